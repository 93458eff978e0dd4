//! The `_pincer/…` extension methods: a session's runs, one run, its tape, the session's remembered approvals.

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
