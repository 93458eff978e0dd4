//! The v1 surface issue 17 added, driven by the official Rust SDK
//! (`agent-client-protocol`, harness in `support/sdk.rs`; every line pincer
//! writes checked against the vendored schema): authentication methods,
//! `session/delete`, `session/fork`, `additionalDirectories`, the thought
//! level, mode and model options with their aliases, steering, notices and
//! compaction updates, and the prompt's usage. Raw JSON-RPC covers the same
//! in `acp_surface.rs`, `acp_auth.rs` and `compaction.rs`.

use crate::support::sdk;

use std::sync::{Arc, Mutex};

use crate::support::TestDir;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    ClientCapabilities, ClientSessionCapabilities, CompactionCapabilities, CompactionStatus,
    DeleteSessionRequest, InitializeRequest, ListSessionsRequest, NewSessionRequest,
    NoticeCapabilities, SessionConfigOptionValue, SessionNotification, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionModeRequest, StopReason,
};
use agent_client_protocol::{Agent, Client, ErrorCode, UntypedMessage};
use pretty_assertions::assert_eq;
use sdk::{Pincer, initialize, lock, text_prompt};
use serde_json::{Value, json};

/// The option of `category` among `options` (as JSON), if any.
fn option(options: &Value, category: &str) -> Option<Value> {
    options
        .as_array()?
        .iter()
        .find(|o| o["category"] == category)
        .cloned()
}

#[tokio::test]
async fn the_v1_surface_through_the_sdk() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "first"}, {"usage": {"input_tokens": 5, "output_tokens": 1}}]),
            json!([{"text": "second"}]),
            json!([{"text": "third"}]),
        ],
    );
    // A second provider whose API takes reasoning efforts (never called).
    dir.write_config(
        "[providers.oa]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"m\"]\nreasoning_efforts = [\"low\", \"high\"]\n",
    );
    let ws = dir.workspace();
    let extra = dir.path().join("extra");
    std::fs::create_dir_all(&extra).unwrap();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    let init = initialize(&cx).await;
                    assert_eq!(init.protocol_version, ProtocolVersion::V1);
                    let methods: Vec<String> = init
                        .auth_methods
                        .iter()
                        .map(|m| m.id().0.to_string())
                        .collect();
                    assert_eq!(methods, ["pincer-provider"]);
                    let sessions = &init.agent_capabilities.session_capabilities;
                    assert!(sessions.delete.is_some());
                    assert!(sessions.fork.is_some());
                    assert!(sessions.additional_directories.is_some());

                    let created = cx
                        .send_request(
                            NewSessionRequest::new(&ws).additional_directories(vec![extra.clone()]),
                        )
                        .block_task()
                        .await?;
                    let id = created.session_id.clone();
                    let options = serde_json::to_value(&created.config_options).unwrap();
                    assert!(option(&options, "model").is_some());
                    assert!(option(&options, "mode").is_some());
                    assert!(
                        option(&options, "thought_level").is_none(),
                        "the scripted provider lists no efforts"
                    );

                    let done = cx
                        .send_request(text_prompt(&id, "one"))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);

                    // Model, thought level, mode: each answered with every option.
                    let set = |config: &str, value: &str| {
                        SetSessionConfigOptionRequest::new(
                            id.clone(),
                            config.to_owned(),
                            SessionConfigOptionValue::value_id(value.to_owned()),
                        )
                    };
                    let changed = cx.send_request(set("model", "oa/m")).block_task().await?;
                    let options = serde_json::to_value(&changed.config_options).unwrap();
                    assert_eq!(option(&options, "model").unwrap()["currentValue"], "oa/m");
                    let thought = option(&options, "thought_level").expect("offered for oa");
                    assert_eq!(thought["currentValue"], "default");
                    let changed = cx
                        .send_request(set("thought_level", "high"))
                        .block_task()
                        .await?;
                    let options = serde_json::to_value(&changed.config_options).unwrap();
                    assert_eq!(
                        option(&options, "thought_level").unwrap()["currentValue"],
                        "high"
                    );
                    let err = cx
                        .send_request(set("thought_level", "max"))
                        .block_task()
                        .await
                        .expect_err("an unknown level");
                    assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{err:?}");
                    cx.send_request(SetSessionModeRequest::new(id.clone(), "read_only"))
                        .block_task()
                        .await?;
                    // The removed `session/set_model`, kept as an alias.
                    let alias = cx
                        .send_request(UntypedMessage::new(
                            "session/set_model",
                            json!({"sessionId": id, "modelId": "scripted/script"}),
                        )?)
                        .block_task()
                        .await?;
                    assert_eq!(alias, json!({}));

                    // Steering with nothing working: told to prompt instead.
                    let steer = cx
                        .send_request(UntypedMessage::new(
                            "_session/steering",
                            json!({"sessionId": id, "prompt": [{"type": "text", "text": "also"}],
                                   "_meta": {"steering": {"idleBehavior": "promptRequired"}}}),
                        )?)
                        .block_task()
                        .await?;
                    assert_eq!(steer["outcome"], "promptRequired", "{steer}");

                    // Fork up to the first prompt; the fork answers with the
                    // script's second line, as a conversation of one answer.
                    let fork = cx
                        .send_request(UntypedMessage::new(
                            "session/fork",
                            json!({"sessionId": id, "cwd": ws, "mcpServers": [],
                                   "_meta": {"pincer": {"upToPrompt": 1}}}),
                        )?)
                        .block_task()
                        .await?;
                    let forked = fork["sessionId"].as_str().unwrap().to_owned();
                    assert_eq!(
                        option(&fork["configOptions"], "mode").unwrap()["currentValue"],
                        "read_only"
                    );
                    let forked = agent_client_protocol::v1::schema::SessionId::new(forked);
                    let done = cx
                        .send_request(text_prompt(&forked, "two"))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);

                    // Delete the source: gone from the listing, refused after.
                    cx.send_request(DeleteSessionRequest::new(id.clone()))
                        .block_task()
                        .await?;
                    let list = cx
                        .send_request(ListSessionsRequest::new())
                        .block_task()
                        .await?;
                    let listed: Vec<_> =
                        list.sessions.iter().map(|s| s.session_id.clone()).collect();
                    assert_eq!(listed, std::slice::from_ref(&forked));
                    let err = cx
                        .send_request(text_prompt(&id, "after delete"))
                        .block_task()
                        .await
                        .expect_err("a deleted session");
                    assert_eq!(err.code, ErrorCode::RESOURCE_NOT_FOUND, "{err:?}");
                    Ok(())
                }),
        )
        .await;
    // The turn's usage rides on the prompt's response as an extra field
    // (the SDK's stable types leave it out; the wire has it).
    let usage: Vec<Value> = pincer
        .received()
        .iter()
        .filter(|m| m["result"]["stopReason"].is_string())
        .map(|m| m["result"]["usage"]["totalTokens"].clone())
        .collect();
    assert_eq!(usage[0], 6, "{usage:?}");
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn notices_and_compactions_reach_a_client_that_shows_them() {
    let dir = TestDir::new();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "hello"}]),
            json!([{"text": "SUMMARY of the talk"}]),
        ],
    );
    let ws = dir.workspace();
    let seen: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .on_receive_notification(
                    {
                        let seen = seen.clone();
                        async move |note: SessionNotification, _cx| {
                            lock(&seen).push(note);
                            Ok(())
                        }
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    let capabilities = ClientCapabilities::new().session(
                        ClientSessionCapabilities::new()
                            .notices(NoticeCapabilities::new())
                            .compaction(CompactionCapabilities::new()),
                    );
                    cx.send_request(
                        InitializeRequest::new(ProtocolVersion::V1)
                            .client_capabilities(capabilities),
                    )
                    .block_task()
                    .await?;
                    // An MCP server that cannot start makes a notice.
                    let broken = agent_client_protocol::v1::schema::McpServer::Stdio(
                        agent_client_protocol::v1::schema::McpServerStdio::new(
                            "broken",
                            "/nonexistent/mcp-server",
                        ),
                    );
                    let id = cx
                        .send_request(NewSessionRequest::new(&ws).mcp_servers(vec![broken]))
                        .block_task()
                        .await?
                        .session_id;
                    cx.send_request(text_prompt(&id, "hi")).block_task().await?;
                    let done = cx
                        .send_request(text_prompt(&id, "/compact"))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);
                    Ok(())
                }),
        )
        .await;
    let seen = lock(&seen).clone();
    let notices: Vec<String> = seen
        .iter()
        .filter_map(|note| {
            let SessionUpdate::Notice(notice) = &note.update else {
                return None;
            };
            Some(notice.title.clone())
        })
        .collect();
    assert!(
        notices.iter().any(|n| n.contains("broken")),
        "a notice names the server: {notices:?}"
    );
    let texts: String = seen
        .iter()
        .filter_map(|note| {
            let SessionUpdate::AgentMessageChunk(chunk) = &note.update else {
                return None;
            };
            serde_json::to_value(&chunk.content).unwrap()["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert!(
        !texts.contains("[pincer]"),
        "no notice as reply text: {texts}"
    );
    let mut compaction = Vec::new();
    for note in &seen {
        if let SessionUpdate::CompactionUpdate(update) = &note.update {
            compaction.push((
                update.compaction_id.to_string(),
                format!("{:?}", update.status),
            ));
        } else if let SessionUpdate::CompactionSummaryChunk(chunk) = &note.update {
            let text = serde_json::to_value(&chunk.content).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned();
            compaction.push((chunk.compaction_id.to_string(), text));
        }
    }
    assert_eq!(compaction.len(), 3, "{compaction:?}");
    let id = compaction[0].0.clone();
    assert!(compaction.iter().all(|(c, _)| *c == id), "{compaction:?}");
    assert_eq!(
        compaction[0].1,
        format!("{:?}", CompactionStatus::InProgress)
    );
    assert_eq!(compaction[1].1, "SUMMARY of the talk");
    assert_eq!(
        compaction[2].1,
        format!("{:?}", CompactionStatus::Completed)
    );
    assert!(pincer.finish().success());
}
