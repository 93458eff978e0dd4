//! The ACP face driven by the official Rust SDK (`agent-client-protocol`) as an
//! independent client of the real binary (harness in `support/sdk.rs`): every
//! line pincer writes is checked against the vendored schema.

use crate::support::sdk;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::TestDir;
use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, ListSessionsRequest, LoadSessionRequest,
    NewSessionRequest, SessionId, SessionNotification, SessionUpdate, StopReason,
};
use agent_client_protocol::v1::{ConnectionTo, SessionSetup};
use agent_client_protocol::{Agent, Client, ErrorCode, UntypedMessage};
use pretty_assertions::assert_eq;
use sdk::{
    Item, Pincer, describe, initialize, lock, new_session, next_item, pair, read_turn,
    response_position, text_prompt,
};
use serde_json::json;

#[tokio::test]
async fn initialize_then_a_prompt_streams_chunks_in_order() {
    let dir = TestDir::new();
    let script = dir.script(
        "abc.jsonl",
        &[json!([{"text": "a"}, {"text": "b"}, {"text": "c"}])],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (init, session_id, updates, response) = pincer
        .run(Client.v1().name("sdk-test").connect_with(
            transport,
            async |cx: ConnectionTo<Agent>| {
                let init = initialize(&cx).await;
                let SessionSetup {
                    mut session,
                    response,
                    ..
                } = cx.build_session(&ws).block_task().start_session().await?;
                assert_eq!(&response.session_id, session.session_id());
                session.send_prompt("hi")?;
                let (updates, result) = read_turn(&mut session).await;
                Ok((init, session.session_id().clone(), updates, result))
            },
        ))
        .await;
    assert_eq!(init.protocol_version, ProtocolVersion::V1);
    assert!(init.agent_capabilities.load_session);
    assert_eq!(
        updates,
        vec![
            pair(
                "available_commands_update",
                "/compact /undo /mode /model /runs /memory /trust /help"
            ),
            pair("session_info_update", "hi"),
            pair("agent_message_chunk", "a"),
            pair("agent_message_chunk", "b"),
            pair("agent_message_chunk", "c"),
        ]
    );
    assert_eq!(response.unwrap().stop_reason, StopReason::EndTurn);
    // On the wire too: three chunks for this session, then the response.
    let log = pincer.received();
    let texts: Vec<&str> = log
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|m| {
            assert_eq!(m["params"]["sessionId"], session_id.0.as_ref());
            m["params"]["update"]["content"]["text"].as_str().unwrap()
        })
        .collect();
    assert_eq!(texts, vec!["a", "b", "c"]);
    assert_eq!(
        log.last().unwrap()["result"],
        json!({"stopReason": "end_turn"})
    );
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn cancel_mid_stream_ends_the_prompt_with_cancelled() {
    let dir = TestDir::new();
    let script = dir.script(
        "slow.jsonl",
        &[json!([{"text": "first"}, {"delay_ms": 30000}])],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (first, after_cancel, response, elapsed) = pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(&ws).block_task().start_session().await?;
                    session.send_prompt("go")?;
                    // The commands the session offers, and its title.
                    for expected in ["available_commands_update", "session_info_update"] {
                        match next_item(&mut session).await {
                            Item::Update(note) => assert_eq!(describe(&note.update).0, expected),
                            Item::Done(result) => panic!("the prompt ended early: {result:?}"),
                        }
                    }
                    let first = match next_item(&mut session).await {
                        Item::Update(note) => describe(&note.update),
                        Item::Done(result) => panic!("the prompt ended early: {result:?}"),
                    };
                    let sent = Instant::now();
                    session
                        .connection()
                        .send_notification(CancelNotification::new(session.session_id().clone()))?;
                    let (after_cancel, response) =
                        tokio::time::timeout(Duration::from_secs(2), read_turn(&mut session))
                            .await
                            .expect("no prompt response within 2 s of session/cancel");
                    Ok((first, after_cancel, response, sent.elapsed()))
                }),
        )
        .await;
    assert_eq!(first, pair("agent_message_chunk", "first"));
    assert_eq!(after_cancel, vec![], "updates after the cancel");
    let response = response.expect("a cancelled prompt is a response, not an error");
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn load_after_a_restart_replays_history_before_the_response() {
    let dir = TestDir::new();
    let script = dir.script(
        "two.jsonl",
        &[
            json!([{"text": "Hel"}, {"text": "lo"}]),
            json!([{"text": "second"}]),
        ],
    );
    let ws = dir.workspace();

    // Process 1: create a session and prompt it, then close stdin and exit.
    let (first, transport) = Pincer::spawn(&dir, &script);
    let (session_id, text) = first
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(&ws).block_task().start_session().await?;
                    session.send_prompt("hi")?;
                    let text = session.read_to_string().await?;
                    Ok((session.session_id().clone(), text))
                }),
        )
        .await;
    assert_eq!(text, "Hello");
    assert!(first.finish().success());

    // Process 2, same data dir: session/load replays the history first.
    let (second, transport) = Pincer::spawn(&dir, &script);
    let seen: Arc<Mutex<Vec<SessionNotification>>> = Arc::default();
    let (at_response, load_id, after_prompt, stop) = second
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
                    let init = initialize(&cx).await;
                    assert!(init.agent_capabilities.load_session);
                    let load = cx.send_request(LoadSessionRequest::new(session_id.clone(), &ws));
                    let load_id = serde_json::to_value(load.id()).unwrap();
                    load.block_task().await?;
                    // Notification handlers run in the dispatch loop, in arrival order:
                    // what they saw by now arrived before the load response.
                    let at_response = lock(&seen).clone();
                    // The loaded session goes on with the next model turn.
                    let response = cx
                        .send_request(text_prompt(&session_id, "more"))
                        .block_task()
                        .await?;
                    let after_prompt = lock(&seen).clone();
                    Ok((at_response, load_id, after_prompt, response.stop_reason))
                }),
        )
        .await;
    // The commands update follows the load response, before or after the
    // handlers above took their snapshot: once, and left out of both lists.
    let is_commands = |note: &&SessionNotification| {
        matches!(note.update, SessionUpdate::AvailableCommandsUpdate(_))
    };
    assert_eq!(after_prompt.iter().filter(is_commands).count(), 1);
    let described: Vec<(String, String)> = at_response
        .iter()
        .filter(|note| !is_commands(note))
        .map(|note| {
            assert_eq!(note.session_id, session_id);
            describe(&note.update)
        })
        .collect();
    assert_eq!(
        described,
        vec![
            pair("user_message_chunk", "hi"),
            pair("agent_message_chunk", "Hello"),
        ]
    );
    assert_eq!(stop, StopReason::EndTurn);
    let new_updates: Vec<(String, String)> = after_prompt[at_response.len()..]
        .iter()
        .filter(|note| !is_commands(note))
        .map(|note| describe(&note.update))
        .collect();
    assert_eq!(new_updates, vec![pair("agent_message_chunk", "second")]);
    // On the wire: both replayed updates precede the load response.
    let log = second.received();
    let response_at = response_position(&log, &load_id);
    let before: Vec<&str> = log[..response_at]
        .iter()
        .filter(|m| m["method"] == "session/update")
        .map(|m| m["params"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(before, vec!["user_message_chunk", "agent_message_chunk"]);
    assert!(second.finish().success());
}

#[tokio::test]
async fn list_returns_the_sessions_and_close_refuses_later_prompts() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let ws = dir.workspace();
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other = other.canonicalize().unwrap();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    let init = initialize(&cx).await;
                    assert!(init.agent_capabilities.session_capabilities.list.is_some());
                    assert!(init.agent_capabilities.session_capabilities.close.is_some());
                    let a = new_session(&cx, &ws).await;
                    let b = new_session(&cx, &other).await;
                    // Activity is stamped in milliseconds: let the prompt land on a later one.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    let done = cx
                        .send_request(text_prompt(&a, "Title of a"))
                        .block_task()
                        .await?;
                    assert_eq!(done.stop_reason, StopReason::EndTurn);

                    let list = cx
                        .send_request(ListSessionsRequest::new())
                        .block_task()
                        .await?;
                    let listed: Vec<(SessionId, PathBuf)> = list
                        .sessions
                        .iter()
                        .map(|s| (s.session_id.clone(), s.cwd.clone()))
                        .collect();
                    assert_eq!(
                        listed,
                        vec![(a.clone(), ws.clone()), (b.clone(), other.clone())],
                        "most recently active first"
                    );
                    assert_eq!(list.sessions[0].title.as_deref(), Some("Title of a"));
                    assert_eq!(list.next_cursor, None);

                    cx.send_request(CloseSessionRequest::new(a.clone()))
                        .block_task()
                        .await?;
                    let err = cx
                        .send_request(text_prompt(&a, "after close"))
                        .block_task()
                        .await
                        .expect_err("a prompt on a closed session must fail");
                    assert_eq!(err.code, ErrorCode::RESOURCE_NOT_FOUND, "{err:?}");
                    assert_eq!(i32::from(err.code), -32002);
                    assert!(err.message.contains(a.0.as_ref()), "{err:?}");
                    let err = cx
                        .send_request(CloseSessionRequest::new("ses_missing"))
                        .block_task()
                        .await
                        .expect_err("closing an unknown session must fail");
                    assert_eq!(err.code, ErrorCode::RESOURCE_NOT_FOUND, "{err:?}");
                    Ok(())
                }),
        )
        .await;
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn unknown_methods_get_method_not_found() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    for method in ["_pincer/no_such_method", "session/frobnicate"] {
                        let err = cx
                            .send_request(UntypedMessage::new(method, json!({}))?)
                            .block_task()
                            .await
                            .expect_err("an unknown method must fail");
                        assert_eq!(err.code, ErrorCode::METHOD_NOT_FOUND, "{method}: {err:?}");
                        assert_eq!(i32::from(err.code), -32601);
                    }
                    // An unknown notification is ignored, and the connection goes on.
                    cx.send_notification(UntypedMessage::new("_pincer/no_such_note", json!({}))?)?;
                    let list = cx
                        .send_request(ListSessionsRequest::new())
                        .block_task()
                        .await?;
                    assert_eq!(list.sessions.len(), 0);
                    Ok(())
                }),
        )
        .await;
    let log = pincer.received();
    assert_eq!(log.len(), 4, "initialize, two errors, list: {log:#?}");
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn bad_params_get_invalid_params_naming_the_field() {
    let dir = TestDir::new();
    let script = dir.script("ok.jsonl", &[json!([{"text": "ok"}])]);
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let err = cx
                        .send_request(NewSessionRequest::new("relative/ws"))
                        .block_task()
                        .await
                        .expect_err("a relative cwd must be refused");
                    assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{err:?}");
                    assert_eq!(i32::from(err.code), -32602);
                    assert!(
                        err.message.contains("`cwd`") && err.message.contains("absolute"),
                        "{err:?}"
                    );
                    let err = cx
                        .send_request(UntypedMessage::new(
                            "session/prompt",
                            json!({"prompt": [{"type": "text", "text": "x"}]}),
                        )?)
                        .block_task()
                        .await
                        .expect_err("a prompt without a sessionId must be refused");
                    assert_eq!(err.code, ErrorCode::INVALID_PARAMS, "{err:?}");
                    assert!(err.message.contains("sessionId"), "{err:?}");
                    Ok(())
                }),
        )
        .await;
    assert!(pincer.finish().success());
}
