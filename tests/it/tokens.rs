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

fn config(dir: &TestDir, server: &Loopback, model: &str) {
    let config_dir = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!(
            "provider = \"local\"\nmodel = \"{model}\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"{model}\"]\n",
            server.url
        ),
    )
    .unwrap();
}

fn context(acp: &mut AcpProcess, session: &str) -> Value {
    acp.call("_pincer/context", json!({"sessionId": session}))
}

#[test]
fn counts_are_calibrated_by_what_the_provider_reports() {
    let dir = TestDir::new();
    // The provider counts far more than the estimate: the ratio is capped.
    let server = model(1_000_000);
    config(&dir, &server, "llama3.2");
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let before = context(&mut acp, &session);
    assert_eq!(before["counted_by"], "bytes");
    assert_eq!(before["calibration"], 1.0);
    let system = before["system"].as_str().unwrap();
    assert_eq!(
        before["system_tokens"].as_u64().unwrap() as usize,
        system.len().div_ceil(4)
    );

    acp.prompt(&session, "hello");
    let after = context(&mut acp, &session);
    assert_eq!(after["calibration"], 2.5, "{after}");
    assert_eq!(after["system"], before["system"]);
    assert_eq!(
        after["system_tokens"].as_u64().unwrap(),
        (before["system_tokens"].as_u64().unwrap() as f64 * 2.5).round() as u64
    );
    acp.finish();

    // A provider that counts about what was estimated keeps the ratio near 1.
    let dir = TestDir::new();
    let server = model(3_000);
    config(&dir, &server, "llama3.2");
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let estimate = context(&mut acp, &session)["totalTokens"].as_u64().unwrap();
    acp.prompt(&session, "hello");
    let ratio = context(&mut acp, &session)["calibration"].as_f64().unwrap();
    let expected = 3_000.0 / estimate as f64;
    assert!(
        (ratio - expected).abs() < 0.05,
        "{ratio} vs {expected} (estimate {estimate})"
    );
    acp.finish();
}

#[test]
fn an_openai_model_is_counted_by_its_tokenizer() {
    let dir = TestDir::new();
    let server = model(10);
    config(&dir, &server, "gpt-4o-mini");
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let view = context(&mut acp, &session);
    assert_eq!(view["counted_by"], "o200k_base");
    let system = view["system"].as_str().unwrap();
    let tokens = view["system_tokens"].as_u64().unwrap() as usize;
    // English prose runs at 4 to 5 bytes per o200k token; the byte
    // estimate would be exactly len / 4.
    assert_ne!(tokens, system.len().div_ceil(4));
    let per_token = system.len() as f64 / tokens as f64;
    assert!((4.0..5.5).contains(&per_token), "{per_token}");
    acp.finish();
}
