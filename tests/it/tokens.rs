//! Token counts through the binary: an OpenAI model is counted by its own
//! tokenizer, another family by bytes; both are calibrated by the input
//! tokens the provider reports, from the next count on (ACP
//! `_pincer/context` shows the counter and the calibration).

use crate::support::http::openai::chunk;
use crate::support::http::{Loopback, Reply};
use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

/// A model that answers "ok" and reports `prompt_tokens` input tokens.
fn model(prompt_tokens: u64) -> Loopback {
    Loopback::start(move |_, _| {
        Reply::event_stream(
            chunk(json!({"content": "ok"}), Value::Null)
                + &chunk(json!({}), json!("stop"))
                + &format!(
                    "data: {}\n\ndata: [DONE]\n\n",
                    json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                           "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1}})
                ),
        )
    })
}

/// A session of `pincer acp` with `model` of a provider that reports
/// `prompt_tokens` input tokens for every turn.
struct Session {
    acp: AcpProcess,
    id: String,
    _server: Loopback,
    _dir: TestDir,
}

impl Session {
    fn start(model_name: &str, prompt_tokens: u64) -> Self {
        let dir = TestDir::new();
        let server = model(prompt_tokens);
        dir.write_config(&format!(
            "provider = \"local\"\nmodel = \"{model_name}\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"{model_name}\"]\n",
            server.url
        ));
        let mut acp = AcpProcess::spawn(&dir, &[]);
        acp.initialize();
        let id = acp.new_session(&dir.workspace());
        Self {
            acp,
            id,
            _server: server,
            _dir: dir,
        }
    }

    /// What `_pincer/context` says of the session's next turn.
    fn context(&mut self) -> Value {
        self.acp
            .call("_pincer/context", json!({"sessionId": self.id}))
    }

    fn prompt(&mut self, text: &str) {
        self.acp.prompt(&self.id, text);
    }

    fn finish(self) {
        self.acp.finish();
    }
}

#[test]
fn counts_are_calibrated_by_what_the_provider_reports() {
    // The provider counts far more than the estimate: the ratio is capped.
    let mut session = Session::start("llama3.2", 1_000_000);
    let before = session.context();
    assert_eq!(before["counted_by"], "bytes");
    assert_eq!(before["calibration"], 1.0);
    let system = before["system"].as_str().unwrap();
    assert_eq!(
        before["system_tokens"].as_u64().unwrap() as usize,
        system.len().div_ceil(4)
    );

    session.prompt("hello");
    let after = session.context();
    assert_eq!(after["calibration"], 2.5, "{after}");
    assert_eq!(after["system"], before["system"]);
    assert_eq!(
        after["system_tokens"].as_u64().unwrap(),
        (before["system_tokens"].as_u64().unwrap() as f64 * 2.5).round() as u64
    );
    session.finish();

    // A provider that counts about what was estimated keeps the ratio near 1.
    let mut session = Session::start("llama3.2", 3_000);
    let estimate = session.context()["totalTokens"].as_u64().unwrap();
    session.prompt("hello");
    let ratio = session.context()["calibration"].as_f64().unwrap();
    let expected = 3_000.0 / estimate as f64;
    assert!(
        (ratio - expected).abs() < 0.05,
        "{ratio} vs {expected} (estimate {estimate})"
    );
    session.finish();
}

#[test]
fn an_openai_model_is_counted_by_its_tokenizer() {
    let mut session = Session::start("gpt-4o-mini", 10);
    let view = session.context();
    assert_eq!(view["counted_by"], "o200k_base");
    let system = view["system"].as_str().unwrap();
    let tokens = view["system_tokens"].as_u64().unwrap() as usize;
    // English prose runs at 4 to 5 bytes per o200k token; the byte
    // estimate would be exactly len / 4.
    assert_ne!(tokens, system.len().div_ceil(4));
    let per_token = system.len() as f64 / tokens as f64;
    assert!((4.0..5.5).contains(&per_token), "{per_token}");
    session.finish();
}
