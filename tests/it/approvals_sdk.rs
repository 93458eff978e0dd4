//! Approvals over ACP, driven by the official Rust SDK as the client (harness in
//! `support/sdk.rs`, every line pincer writes checked against the schema): a
//! supervised session asks `session/request_permission` before `write_file` and
//! `edit_file`, and the client's answer — allow or reject, once or always, or a
//! cancelled turn — decides what happens to the file, the tool call and the run.

use crate::support::sdk;

use std::path::Path;
use std::time::Duration;

use crate::support::TestDir;
use agent_client_protocol::v1::schema::{
    CancelNotification, PromptResponse, RequestPermissionRequest, SessionNotification,
    SessionUpdate, StopReason, ToolCallStatus,
};
use agent_client_protocol::v1::{ActiveSession, ConnectionTo, SessionMessage, SessionSetup};
use agent_client_protocol::{Agent, Client, Dispatch, Error};
use pretty_assertions::assert_eq;
use sdk::{Pincer, initialize};
use serde_json::{Value, json};

/// How the client answers a permission request.
#[derive(Debug, Clone, Copy)]
enum Answer {
    /// Selects the option with this id.
    Select(&'static str),
    /// Cancels the prompt turn (`session/cancel`), then answers the request
    /// with the `cancelled` outcome at once, as ACP asks of a client that cancels.
    CancelTurn,
    /// Cancels the prompt turn, waits for pincer to withdraw the request
    /// (`$/cancel_request`), and only then answers `cancelled`.
    CancelTurnAnswerLate,
}

/// What the client saw during one prompt turn.
#[derive(Debug)]
struct Turn {
    /// In arrival order: each session update's `update` object, and each
    /// permission request as `{"permission": params}`.
    timeline: Vec<Value>,
    /// The params of each permission request, in order.
    requests: Vec<Value>,
    response: Result<PromptResponse, Error>,
}

/// Sends a text prompt and reads the session up to its response, answering
/// the permission requests with `answers` in order. A request beyond them
/// fails the test.
async fn prompt(
    session: &mut ActiveSession<'_, Agent>,
    text: &str,
    answers: &[Answer],
) -> Result<Turn, Error> {
    session.send_prompt(text)?;
    let mut answers = answers.iter();
    let mut timeline = Vec::new();
    let mut requests = Vec::new();
    loop {
        match session.read_update().await? {
            SessionMessage::PromptResponse(response) => {
                return Ok(Turn {
                    timeline,
                    requests,
                    response,
                });
            }
            SessionMessage::Message(Dispatch::Notification(message)) => {
                assert_eq!(message.method(), "session/update", "{message:?}");
                let note: SessionNotification = serde_json::from_value(message.params().clone())
                    .expect("the SDK parses the session update");
                assert_eq!(&note.session_id, session.session_id());
                timeline.push(message.params()["update"].clone());
            }
            SessionMessage::Message(Dispatch::Request(message, responder)) => {
                assert_eq!(
                    message.method(),
                    "session/request_permission",
                    "{message:?}"
                );
                let params = message.params().clone();
                let request: RequestPermissionRequest = serde_json::from_value(params.clone())
                    .expect("the SDK parses the permission request");
                assert_eq!(&request.session_id, session.session_id());
                timeline.push(json!({ "permission": params }));
                requests.push(params);
                let answer = answers
                    .next()
                    .unwrap_or_else(|| panic!("an unexpected permission request: {request:?}"));
                match answer {
                    Answer::Select(option) => responder
                        .respond(json!({"outcome": {"outcome": "selected", "optionId": option}}))?,
                    Answer::CancelTurn | Answer::CancelTurnAnswerLate => {
                        session
                            .connection()
                            .send_notification(CancelNotification::new(
                                session.session_id().clone(),
                            ))?;
                        if matches!(answer, Answer::CancelTurnAnswerLate) {
                            tokio::time::timeout(
                                Duration::from_secs(5),
                                responder.cancellation().cancelled(),
                            )
                            .await
                            .expect("pincer did not withdraw its request after session/cancel");
                        }
                        responder.respond(json!({"outcome": {"outcome": "cancelled"}}))?;
                    }
                }
            }
            SessionMessage::Message(other) => panic!("unexpected message from pincer: {other:?}"),
            other => panic!("unexpected session item: {other:?}"),
        }
    }
}

/// One connection: initialize, a new session in `ws`, one prompt answered with
/// `answers`. Returns the session id and the turn.
async fn one_prompt(
    pincer: &Pincer,
    transport: sdk::Transport,
    ws: &Path,
    answers: &[Answer],
) -> (String, Turn) {
    pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(ws).block_task().start_session().await?;
                    sdk::expect_commands(&mut session).await;
                    let turn = prompt(&mut session, "go", answers).await?;
                    Ok((session.session_id().0.to_string(), turn))
                }),
        )
        .await
}

/// A timeline as short lines, for comparing the shape of a turn:
/// `ID STATUS` for tool calls, `permission ID`, `text TEXT`.
fn summary(timeline: &[Value]) -> Vec<String> {
    timeline
        .iter()
        .map(|item| {
            if let Some(request) = item.get("permission") {
                return format!("permission {}", str_of(&request["toolCall"]["toolCallId"]));
            }
            let id = item["toolCallId"].as_str().unwrap_or_default();
            match str_of(&item["sessionUpdate"]) {
                // `status` defaults to pending.
                "tool_call" => format!(
                    "{id} {}",
                    item.get("status").map_or("pending", |s| str_of(s))
                ),
                // Without a status: the plan (title, locations, diff).
                "tool_call_update" => {
                    format!(
                        "{id} {}",
                        item.get("status").map_or("planned", |s| str_of(s))
                    )
                }
                "agent_message_chunk" => format!("text {}", str_of(&item["content"]["text"])),
                other => other.to_owned(),
            }
        })
        // The title a first prompt gives its session is not part of a turn's shape.
        .filter(|line| line != "session_info_update")
        .collect()
}

fn str_of(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
}

fn lines(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|line| (*line).to_owned()).collect()
}

/// The text of the last update of tool call `id` (its result).
fn result_text<'a>(timeline: &'a [Value], id: &str) -> &'a str {
    let update = timeline
        .iter()
        .rev()
        .find(|item| item["sessionUpdate"] == "tool_call_update" && item["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no update of {id} in {timeline:#?}"));
    let text = update["content"]
        .as_array()
        .and_then(|content| content.iter().find(|c| c["type"] == "content"))
        .unwrap_or_else(|| panic!("no text content in {update}"));
    str_of(&text["content"]["text"])
}

/// How many `session/request_permission` requests pincer wrote, on the wire.
fn permission_requests_on_wire(pincer: &Pincer) -> usize {
    pincer
        .received()
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count()
}

/// The four options every approval offers.
fn options() -> Value {
    json!([
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow in this session", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": "Always reject in this session", "kind": "reject_always"},
    ])
}

/// A model turn that calls `write_file` as tool call `id`.
fn write_call(id: &str, path: &str, content: &str) -> Value {
    json!([{"tool_call": {"id": id, "name": "write_file", "arguments": {"path": path, "content": content}}}])
}

#[tokio::test]
async fn allow_once_writes_the_file_and_reports_the_diff() {
    let dir = TestDir::new();
    let args = json!({"path": "out.txt", "content": "hello\n"});
    let script = dir.script(
        "write.jsonl",
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": args}}]),
            json!([{"text": "done"}]),
        ],
    );
    let ws = dir.workspace();
    let out = ws.join("out.txt");
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (session, turn) =
        one_prompt(&pincer, transport, &ws, &[Answer::Select("allow_once")]).await;

    assert_eq!(turn.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "hello\n");
    // A new file: the diff has no old text.
    let diff = json!({"type": "diff", "path": out, "newText": "hello\n"});
    let locations = json!([{"path": out}]);
    let request = json!({
        "sessionId": session,
        "toolCall": {
            "toolCallId": "w1",
            "kind": "edit",
            "status": "pending",
            "title": "Create out.txt",
            "content": [diff],
            "locations": locations,
            "rawInput": args,
        },
        "options": options(),
    });
    assert_eq!(turn.requests, vec![request.clone()]);
    assert_eq!(
        turn.timeline,
        vec![
            json!({"sessionUpdate": "session_info_update", "title": "go"}),
            // `status` written out, though pending is the schema's default.
            json!({"sessionUpdate": "tool_call", "toolCallId": "w1", "title": "write_file",
                   "kind": "edit", "status": "pending", "rawInput": args}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "w1", "title": "Create out.txt",
                   "content": [diff], "locations": locations}),
            json!({"permission": request}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "w1", "status": "in_progress"}),
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "w1", "status": "completed",
                   "content": [diff, {"type": "content",
                                      "content": {"type": "text", "text": "Created out.txt (+1 -0 lines)"}}]}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}),
        ]
    );
    // The SDK reads the left-out status as pending.
    let announced: SessionUpdate = serde_json::from_value(turn.timeline[1].clone()).unwrap();
    let SessionUpdate::ToolCall(call) = announced else {
        panic!("not a tool call: {announced:?}")
    };
    assert_eq!(call.status, ToolCallStatus::Pending);
    assert_eq!(permission_requests_on_wire(&pincer), 1);
    assert!(pincer.finish().success());
}

#[tokio::test]
async fn reject_once_leaves_the_file_and_the_run_goes_on() {
    let dir = TestDir::new();
    let args = json!({"path": "src.txt", "edits": [{"old_text": "b", "new_text": "c"}]});
    let script = dir.script(
        "edit.jsonl",
        &[
            json!([{"tool_call": {"id": "e1", "name": "edit_file", "arguments": args}}]),
            json!([{"text": "as you wish"}]),
        ],
    );
    let ws = dir.workspace();
    let src = ws.join("src.txt");
    std::fs::write(&src, "a\nb\n").unwrap();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (session, turn) =
        one_prompt(&pincer, transport, &ws, &[Answer::Select("reject_once")]).await;

    assert_eq!(turn.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(std::fs::read_to_string(&src).unwrap(), "a\nb\n");
    let diff = json!({"type": "diff", "path": src, "oldText": "a\nb\n", "newText": "a\nc\n"});
    assert_eq!(turn.requests.len(), 1, "{:#?}", turn.requests);
    assert_eq!(
        turn.requests[0]["toolCall"],
        json!({
            "toolCallId": "e1",
            "kind": "edit",
            "status": "pending",
            "title": "Edit src.txt",
            "content": [diff],
            "locations": [{"path": src}],
            "rawInput": args,
        })
    );
    let rejected = result_text(&turn.timeline, "e1");
    assert!(rejected.contains("rejected by the user"), "{rejected}");
    assert_eq!(
        summary(&turn.timeline),
        lines(&[
            "e1 pending",
            "e1 planned",
            "permission e1",
            "e1 failed",
            "text as you wish"
        ])
    );
    // The failed update carries only the reason: nothing was changed.
    assert_eq!(
        turn.timeline[4],
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "e1", "status": "failed",
               "content": [{"type": "content", "content": {"type": "text", "text": rejected}}]})
    );
    assert!(pincer.finish().success());
    // The model was told: the rejection is the call's (failed) result in the history.
    let shown = dir.show_session(&session);
    let results: Vec<&Value> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| &entry["message"])
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "{shown:#}");
    assert_eq!(results[0]["is_error"], true, "{shown:#}");
    assert_eq!(results[0]["content"], rejected, "{shown:#}");
}

#[tokio::test]
async fn allow_always_is_remembered_for_the_session_and_across_a_restart() {
    let dir = TestDir::new();
    // Turns 1–3 play in the first process, 4–5 after the restart: the script
    // line is chosen by counting the assistant messages in the history.
    let script = dir.script(
        "always.jsonl",
        &[
            write_call("w1", "a.txt", "A\n"),
            write_call("w2", "b.txt", "B\n"),
            json!([{"text": "both written"}]),
            write_call("w3", "c.txt", "C\n"),
            json!([{"text": "again"}]),
        ],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (session, turn) =
        one_prompt(&pincer, transport, &ws, &[Answer::Select("allow_always")]).await;

    assert_eq!(turn.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(
        summary(&turn.timeline),
        lines(&[
            "w1 pending",
            "w1 planned",
            "permission w1",
            "w1 in_progress",
            "w1 completed",
            // Not asked again: the answer covers every write_file call.
            "w2 pending",
            "w2 planned",
            "w2 in_progress",
            "w2 completed",
            "text both written",
        ])
    );
    assert_eq!(permission_requests_on_wire(&pincer), 1);
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "A\n");
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "B\n");
    assert!(pincer.finish().success());
    let grants = json!([{"tool": "write_file", "scope": "", "allow": true}]);
    assert_eq!(dir.show_session(&session)["grants"], grants);

    // A new process loads the session: the grant still holds, nobody is asked.
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let turn = pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } = cx
                        .load_session(session.clone(), &ws)
                        .block_task()
                        .start_session()
                        .await?;
                    // The replayed history, then the session's commands.
                    sdk::skip_to_commands(&mut session).await;
                    prompt(&mut session, "once more", &[]).await
                }),
        )
        .await;
    assert_eq!(turn.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(turn.requests, Vec::<Value>::new());
    // The stream starts with the replayed history; this prompt's part is the end.
    let all = summary(&turn.timeline);
    assert_eq!(
        all[all.len() - 5..],
        lines(&[
            "w3 pending",
            "w3 planned",
            "w3 in_progress",
            "w3 completed",
            "text again"
        ])
    );
    assert_eq!(permission_requests_on_wire(&pincer), 0);
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "C\n");
    assert!(pincer.finish().success());
    assert_eq!(dir.show_session(&session)["grants"], grants);
}

#[tokio::test]
async fn reject_always_refuses_later_calls_without_asking() {
    let dir = TestDir::new();
    let script = dir.script(
        "never.jsonl",
        &[
            write_call("w1", "a.txt", "A\n"),
            write_call("w2", "b.txt", "B\n"),
            json!([{"text": "giving up"}]),
        ],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (session, turn) =
        one_prompt(&pincer, transport, &ws, &[Answer::Select("reject_always")]).await;

    assert_eq!(turn.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(
        summary(&turn.timeline),
        lines(&[
            "w1 pending",
            "w1 planned",
            "permission w1",
            "w1 failed",
            "w2 pending",
            "w2 planned",
            "w2 failed",
            "text giving up",
        ])
    );
    assert_eq!(permission_requests_on_wire(&pincer), 1);
    let first = result_text(&turn.timeline, "w1");
    let second = result_text(&turn.timeline, "w2");
    assert!(first.contains("rejected by the user"), "{first}");
    assert!(second.starts_with("rejected"), "{second}");
    assert!(!ws.join("a.txt").exists());
    assert!(!ws.join("b.txt").exists());
    assert!(pincer.finish().success());
    assert_eq!(
        dir.show_session(&session)["grants"],
        json!([{"tool": "write_file", "scope": "", "allow": false}])
    );
}

#[tokio::test]
async fn cancel_while_waiting_for_an_approval_cancels_the_run() {
    let dir = TestDir::new();
    let script = dir.script(
        "cancel.jsonl",
        &[
            write_call("w1", "x.txt", "X\n"),
            json!([{"text": "must not play"}]),
        ],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (session, turn) = one_prompt(&pincer, transport, &ws, &[Answer::CancelTurn]).await;

    let response = turn
        .response
        .expect("a cancelled prompt is a response, not an error");
    assert_eq!(response.stop_reason, StopReason::Cancelled);
    assert_eq!(
        summary(&turn.timeline),
        lines(&["w1 pending", "w1 planned", "permission w1", "w1 failed"])
    );
    let reason = result_text(&turn.timeline, "w1");
    assert!(reason.contains("cancelled"), "{reason}");
    assert!(!ws.join("x.txt").exists());
    assert!(pincer.finish().success());

    // The tape: the run waited for the approval, then ended cancelled.
    let shown = dir.show_session(&session);
    let runs = shown["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{shown:#}");
    let run = str_of(&runs[0]["run_id"]).to_owned();
    let out = dir
        .command()
        .args(["tape", &run, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let tape: Vec<String> = events
        .iter()
        .map(|e| {
            let what = str_of(&e["type"]);
            match what {
                "state" => format!("state {}", str_of(&e["state"])),
                "tool_call" | "tool_planned" => format!("{what} {}", str_of(&e["id"])),
                "approval_requested" => format!("{what} {}", str_of(&e["call_id"])),
                "approval_decided" => format!(
                    "{what} {} {}",
                    str_of(&e["call_id"]),
                    str_of(&e["decision"])
                ),
                "tool_result" => format!("{what} {} {}", str_of(&e["id"]), str_of(&e["verdict"])),
                other => other.to_owned(),
            }
        })
        .collect();
    assert_eq!(
        tape,
        lines(&[
            "state queued",
            "user_message",
            "session_info",
            "state running",
            "model_turn",
            "tool_call w1",
            "tool_planned w1",
            "state waiting",
            "approval_requested w1",
            "approval_decided w1 cancelled",
            "tool_result w1 cancelled",
            "state cancelled",
        ])
    );
    assert_eq!(events.last().unwrap()["stop_reason"], "cancelled");
    let out = dir
        .command()
        .args(["runs", "show", &run, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown_run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&shown_run["state"], &shown_run["stop_reason"]),
        (&json!("cancelled"), &json!("cancelled")),
        "{shown_run:#}"
    );
}

#[tokio::test]
async fn a_request_withdrawn_after_a_cancel_takes_a_late_answer_harmlessly() {
    let dir = TestDir::new();
    let script = dir.script(
        "late.jsonl",
        &[
            write_call("w1", "x.txt", "X\n"),
            json!([{"text": "still here"}]),
        ],
    );
    let ws = dir.workspace();
    let (pincer, transport) = Pincer::spawn(&dir, &script);
    let (cancelled, next) = pincer
        .run(
            Client
                .v1()
                .connect_with(transport, async |cx: ConnectionTo<Agent>| {
                    initialize(&cx).await;
                    let SessionSetup { mut session, .. } =
                        cx.build_session(&ws).block_task().start_session().await?;
                    sdk::expect_commands(&mut session).await;
                    let cancelled =
                        prompt(&mut session, "go", &[Answer::CancelTurnAnswerLate]).await?;
                    // The late answer changed nothing: the session takes the next prompt.
                    let next = prompt(&mut session, "and now?", &[]).await?;
                    Ok((cancelled, next))
                }),
        )
        .await;
    assert_eq!(
        cancelled.response.unwrap().stop_reason,
        StopReason::Cancelled
    );
    assert_eq!(
        summary(&cancelled.timeline),
        lines(&["w1 pending", "w1 planned", "permission w1", "w1 failed"])
    );
    assert_eq!(next.response.unwrap().stop_reason, StopReason::EndTurn);
    assert_eq!(summary(&next.timeline), lines(&["text still here"]));
    assert!(!ws.join("x.txt").exists());
    // On the wire: pincer withdrew exactly the permission request it had sent.
    let log = pincer.received();
    let asked: Vec<&Value> = log
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .map(|m| &m["id"])
        .collect();
    let withdrawn: Vec<&Value> = log
        .iter()
        .filter(|m| m["method"] == "$/cancel_request")
        .map(|m| &m["params"]["requestId"])
        .collect();
    assert_eq!(asked.len(), 1, "{log:#?}");
    assert_eq!(withdrawn, asked);
    assert!(pincer.finish().success());
}
