//! The `_pincer/…` extension methods: a session's runs, one run, its tape,
//! the session's remembered approvals, and what its next model turn would be
//! sent.

use super::*;

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunsListParams {
    session_id: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunParams {
    run_id: String,
    #[serde(default)]
    from_seq: u64,
}

impl Connection {
    /// `_pincer/context`: what the session's next model turn would be sent,
    /// with the estimated tokens of each part (as `pincer context show --json`).
    pub(super) async fn context(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunsListParams = params(raw)?;
        let id = SessionId::from_string(request.session_id);
        let view = self.runtime.context(&id).await.map_err(runtime_error)?;
        let total =
            view.system_tokens + view.tool_tokens + view.message_tokens.iter().sum::<usize>();
        let mut value = to_value(view)?;
        value["sessionId"] = json!(id.as_str());
        value["totalTokens"] = json!(total);
        Ok(value)
    }

    pub(super) async fn runs_list(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunsListParams = params(raw)?;
        let runs = self
            .runtime
            .runs(&SessionId::from_string(request.session_id))
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "runs": runs.iter().map(convert::run_json).collect::<Vec<_>>() }))
    }

    pub(super) async fn runs_get(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunParams = params(raw)?;
        let run = self
            .runtime
            .run(&RunId::from_string(request.run_id))
            .await
            .map_err(runtime_error)?;
        Ok(convert::run_json(&run))
    }

    pub(super) async fn grants_list(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunsListParams = params(raw)?;
        let grants = self
            .runtime
            .grants(&SessionId::from_string(request.session_id))
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "grants": grants.iter().map(|g| json!({
            "tool": g.tool,
            "scope": g.scope,
            "decision": if g.allow { "allow_always" } else { "reject_always" },
        })).collect::<Vec<_>>() }))
    }

    pub(super) async fn runs_tape(&self, raw: Option<Box<RawValue>>) -> Result<Value, RpcError> {
        let request: RunParams = params(raw)?;
        let events = self
            .runtime
            .tape(&RunId::from_string(request.run_id), request.from_seq)
            .await
            .map_err(runtime_error)?;
        Ok(json!({ "events": to_value(&events)? }))
    }
}
