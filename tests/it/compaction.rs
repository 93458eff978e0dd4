//! Automatic compaction and overflow recovery against a loopback
//! OpenAI-compatible model: a conversation past `compact_at` of the window is
//! summarized before the turn (the summary not shown as the reply, a notice
//! in every face), and a provider that refuses a request as too long until
//! it shrinks gets a summary and the turn again.

use crate::support::http::openai::{chunk, text_reply};
use crate::support::http::{Loopback, Reply, Request};
use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

const SUMMARY: &str = "SUMMARY: the person pasted two long logs and asked about them";
const FACT: &str = "The build logs come from the nightly CI job";

fn is_summary_request(request: &Request) -> bool {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|text| text.contains("is being replaced now"))
}

/// A model that writes the summary when asked for one, refuses requests
/// over `limit` bytes as too long (0: never), and answers "ok" otherwise.
fn model(limit: usize) -> Loopback {
    Loopback::start(move |request: &Request, _| {
        if limit > 0 && request.raw.len() > limit {
            return Reply::json(
                400,
                &json!({"error": {"message": "This model's maximum context length is 12000 tokens. However, your messages resulted in 20000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
            );
        }
        if is_summary_request(request) {
            return text_reply(SUMMARY);
        }
        let last = request.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or(Value::Null);
        if last["content"]
            .as_str()
            .is_some_and(|text| text.contains("about to be compacted into a summary"))
        {
            return Reply::event_stream(
                chunk(
                    json!({"tool_calls": [{"index": 0, "id": "call_save", "type": "function",
                        "function": {"name": "memory_save", "arguments": json!({"text": FACT}).to_string()}}]}),
                    Value::Null,
                ) + &chunk(json!({}), json!("tool_calls"))
                    + "data: [DONE]\n\n",
            );
        }
        text_reply("ok")
    })
}

/// `pincer run` against `server`, continuing `session` when given.
fn run(
    dir: &TestDir,
    server: &Loopback,
    session: Option<&str>,
    prompt: &str,
) -> std::process::Output {
    let mut command = dir.command();
    command
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args(["run", "--output", "jsonl"]);
    match session {
        Some(id) => command.args(["--session", id]),
        None => command
            .args(["--provider", "openai", "--model", "m", "--cwd"])
            .arg(dir.workspace()),
    };
    command.arg(prompt).output().unwrap()
}

fn events(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn session_of(out: &std::process::Output) -> String {
    events(out)
        .iter()
        .find_map(|e| e["session_id"].as_str().map(str::to_owned))
        .unwrap()
}

fn log(size: usize, tag: &str) -> String {
    format!("{tag}: ") + &"line of a long build log\n".repeat(size / 25)
}

#[test]
fn a_conversation_past_the_threshold_is_summarized_before_the_turn() {
    let dir = TestDir::new();
    let server = model(0);
    // 20,000 tokens of window, compacted past half of it; saves run unasked.
    dir.write_config(
        "context_window = 20000\ncompact_at = 0.5\n[tools]\nmemory_save = \"allow\"\n",
    );
    let first = run(&dir, &server, None, &log(30_000, "FIRST LOG"));
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(
        server.requests().len(),
        1,
        "one prompt alone is never compacted"
    );
    let session = session_of(&first);
    let second = run(&dir, &server, Some(&session), &log(20_000, "SECOND LOG"));
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "a turn to save, a summary request, then the turn"
    );
    // The turn before compacting offers memory_save alone; what it saves is kept.
    let tools: Vec<&str> = requests[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, vec!["memory_save"]);
    let saved = dir
        .command()
        .args(["memory", "list", "--all", "--json"])
        .output()
        .unwrap();
    let saved = String::from_utf8_lossy(&saved.stdout);
    assert!(
        saved.contains(FACT) && saved.contains("\"call\":\"call_save\""),
        "{saved}"
    );
    assert!(is_summary_request(&requests[2]));
    let sent = requests[3].raw.len();
    let turn = String::from_utf8_lossy(&requests[3].raw).into_owned();
    assert!(turn.contains(SUMMARY), "the turn is sent the summary");
    assert!(
        !turn.contains("FIRST LOG") && !turn.contains("SECOND LOG"),
        "{sent} bytes"
    );
    // The person is told; the summary is not the reply.
    let said = events(&second);
    let notice = said
        .iter()
        .find(|e| e["type"] == "notice")
        .unwrap_or_else(|| panic!("{said:#?}"));
    let message = notice["message"].as_str().unwrap();
    assert!(
        message.starts_with("The conversation neared the model's context window (about ")
            && message
                .contains("of 20000 tokens): 6 earlier messages were compacted into a summary"),
        "{message}"
    );
    let reply: String = said
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(reply, "ok");
    // The history keeps everything, with the summary as the compaction point.
    let shown = dir.show_session(&session);
    let kinds: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "user",
            "assistant",
            "user",
            "note",
            "assistant",
            "tool",
            "summary",
            "assistant"
        ]
    );
}

#[test]
fn a_context_length_error_compacts_and_sends_the_turn_again() {
    let dir = TestDir::new();
    // The configured window is wrong (far too big): only the provider knows.
    let server = model(50_000);
    dir.write_config("context_window = 1000000\ncompact_at = 0\n");
    let first = run(&dir, &server, None, &log(28_000, "FIRST LOG"));
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let session = session_of(&first);
    let second = run(&dir, &server, Some(&session), &log(28_000, "SECOND LOG"));
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        4,
        "the refused turn, the summary, the turn again"
    );
    assert!(requests[1].raw.len() > 50_000);
    assert!(is_summary_request(&requests[2]));
    let summary_request = String::from_utf8_lossy(&requests[2].raw).into_owned();
    assert!(
        !summary_request.contains("FIRST LOG") && summary_request.contains("SECOND LOG"),
        "the summary request is fitted into half of what was refused"
    );
    assert!(String::from_utf8_lossy(&requests[3].raw).contains(SUMMARY));
    let notice = events(&second)
        .into_iter()
        .find(|e| e["type"] == "notice")
        .unwrap();
    assert!(
        notice["message"].as_str().unwrap().starts_with(
            "The provider refused the request as too long: 3 earlier messages were compacted"
        ),
        "{notice}"
    );
    // Nothing left to compact: the refusal ends the run with the provider's words.
    let third = run(&dir, &server, Some(&session), &log(60_000, "HUGE"));
    assert_eq!(third.status.code(), Some(1));
    let said = String::from_utf8_lossy(&third.stdout);
    let ended = said.lines().last().unwrap_or_default();
    assert!(ended.contains("too long for the model"), "{ended}");
    assert!(
        said.contains("could not be compacted"),
        "the person is told why"
    );
}

#[test]
fn an_editor_sees_the_compaction_notice() {
    let dir = TestDir::new();
    let server = model(0);
    dir.write_config("context_window = 20000\ncompact_at = 0.5\n");
    let mut acp = AcpProcess::spawn_env(
        &dir,
        &["--provider", "openai", "--model", "m"],
        &[
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", &format!("{}/v1", server.url)),
        ],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    acp.prompt(&session, &log(30_000, "FIRST LOG"));
    let (notes, response) = acp.prompt(&session, &log(20_000, "SECOND LOG"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let text: String = notes
        .iter()
        .filter(|n| n["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .map(|n| {
            n["params"]["update"]["content"]["text"]
                .as_str()
                .unwrap_or_default()
        })
        .collect();
    assert!(
        text.starts_with("[pincer] The conversation neared the model's context window"),
        "{text}"
    );
    assert!(text.ends_with("ok"), "{text}");
    assert!(!text.contains(SUMMARY), "{text}");
    assert!(acp.finish().success());
}

/// The `session/update`s of `kind`.
fn updates<'a>(notes: &'a [Value], kind: &str) -> Vec<&'a Value> {
    notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| u["sessionUpdate"] == kind)
        .collect()
}

#[test]
fn an_editor_that_shows_notices_and_compactions_gets_them_as_such() {
    let dir = TestDir::new();
    let server = model(0);
    dir.write_config("context_window = 20000\ncompact_at = 0.5\n");
    let mut acp = AcpProcess::spawn_env(
        &dir,
        &["--provider", "openai", "--model", "m"],
        &[
            ("OPENAI_API_KEY", "sk-test"),
            ("OPENAI_BASE_URL", &format!("{}/v1", server.url)),
        ],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"notices": {}, "compaction": {}}}}),
    );
    let session = acp.new_session(&dir.workspace());
    acp.prompt(&session, &log(30_000, "FIRST LOG"));
    let (notes, response) = acp.prompt(&session, &log(20_000, "SECOND LOG"));
    assert_eq!(response["result"]["stopReason"], "end_turn");
    // The notice is a notice, not reply text; the reply is the model's alone.
    let notices = updates(&notes, "notice");
    assert_eq!(notices.len(), 1, "{notes:?}");
    assert_eq!(notices[0]["severity"], "info");
    assert!(
        notices[0]["title"]
            .as_str()
            .unwrap()
            .starts_with("The conversation neared the model's context window"),
        "{}",
        notices[0]
    );
    assert_eq!(crate::support::agent_text(&notes), "ok");
    // The compaction: started, its summary, completed, under one id.
    let compaction: Vec<&Value> = notes
        .iter()
        .map(|n| &n["params"]["update"])
        .filter(|u| {
            u["sessionUpdate"]
                .as_str()
                .is_some_and(|k| k.starts_with("compaction"))
        })
        .collect();
    assert_eq!(compaction.len(), 3, "{compaction:?}");
    let id = compaction[0]["compactionId"].as_str().unwrap();
    assert_eq!(compaction[0]["sessionUpdate"], "compaction_update");
    assert_eq!(compaction[0]["status"], "in_progress");
    assert_eq!(compaction[1]["sessionUpdate"], "compaction_summary_chunk");
    assert_eq!(compaction[1]["compactionId"], id);
    assert_eq!(compaction[1]["content"]["text"], SUMMARY);
    assert_eq!(compaction[2]["sessionUpdate"], "compaction_update");
    assert_eq!(compaction[2]["compactionId"], id);
    assert_eq!(compaction[2]["status"], "completed");

    // `/compact` too; its summary is also the command's reply.
    let (notes, response) = acp.prompt(&session, "/compact");
    assert_eq!(response["result"]["stopReason"], "end_turn");
    let statuses: Vec<&Value> = updates(&notes, "compaction_update")
        .iter()
        .map(|u| &u["status"])
        .collect();
    assert_eq!(statuses, [&json!("in_progress"), &json!("completed")]);
    assert_eq!(updates(&notes, "compaction_summary_chunk").len(), 1);
    assert!(crate::support::agent_text(&notes).contains("ok"));
    assert!(acp.finish().success());

    // Loading the session replays both summaries as completed compactions.
    let mut acp = AcpProcess::spawn_env(
        &dir,
        &["--provider", "openai", "--model", "m"],
        &[("OPENAI_API_KEY", "sk-test")],
    );
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"session": {"compaction": {}}}}),
    );
    let (notes, _) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    let chunks = updates(&notes, "compaction_summary_chunk");
    assert_eq!(chunks.len(), 2, "{notes:?}");
    assert_eq!(chunks[0]["content"]["text"], SUMMARY);
    let done = updates(&notes, "compaction_update");
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|u| u["status"] == "completed"));
    assert!(
        !crate::support::agent_text(&notes).contains(SUMMARY),
        "summaries are not replayed as reply text"
    );
    assert!(acp.finish().success());
}

#[test]
fn an_editor_sees_overflow_recovery_and_the_loop_guard() {
    let dir = TestDir::new();
    // As over HTTP and in a chat (`tests/it/http.rs`, `telegram.rs`).
    let script = crate::support::overflow_then_loop_script(&dir);
    let mut acp = AcpProcess::spawn(
        &dir,
        &[
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ],
    );
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    acp.prompt(&session, &crate::support::long_log());
    let (notes, response) = acp.prompt(&session, "second");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let said = crate::support::agent_text(&notes);
    assert!(
        said.starts_with("[pincer] The provider refused the request as too long"),
        "{said}"
    );
    assert!(said.ends_with("Done."), "{said}");
    let (notes, response) = acp.prompt(&session, "read a.txt until it changes");
    let all = format!("{notes:?} {response}");
    assert!(
        all.contains("the model called `read_file` with the same arguments 4 times"),
        "{all}"
    );
    assert!(!all.contains("never reached"), "{all}");
    acp.finish();
}

/// Compacted again and again (issue 28): each turn is sent the newest
/// summary and what follows it, never the prompts before it, while loading
/// the session in another process replays every prompt and reply and
/// `pincer sessions show` lists the whole history with each summary.
#[test]
fn a_session_compacted_again_and_again_is_sent_from_its_last_summary_and_replayed_whole() {
    const PROMPTS: usize = 14;
    let dir = TestDir::new();
    let server = model(0);
    dir.write_config("context_window = 20000\ncompact_at = 0.5\n");
    let env = [
        ("OPENAI_API_KEY", "sk-test"),
        ("OPENAI_BASE_URL", &format!("{}/v1", server.url)),
    ];
    let mut acp = AcpProcess::spawn_env(&dir, &["--provider", "openai", "--model", "m"], &env);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    for n in 0..PROMPTS {
        let (_, response) = acp.prompt(&session, &log(8_000, &format!("LOG {n}")));
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    }
    assert!(acp.finish().success());

    let requests = server.requests();
    let summaries = requests.iter().filter(|r| is_summary_request(r)).count();
    assert!(summaries >= 3, "{summaries} compactions");
    // After each summary, the turns are sent it and the prompts since, and
    // none before it: the newest prompt a summary stands for is the last
    // one a later request may carry.
    let mut covered: Option<usize> = None;
    for request in &requests {
        let body = String::from_utf8_lossy(&request.raw).into_owned();
        let logs: Vec<usize> = (0..PROMPTS)
            .filter(|n| body.contains(&format!("LOG {n}:")))
            .collect();
        assert!(
            logs.iter().all(|n| covered.is_none_or(|c| *n > c)),
            "prompts {logs:?} sent after a summary of those up to {covered:?}"
        );
        if is_summary_request(request) {
            covered = logs.last().copied().or(covered);
        } else {
            assert_eq!(body.contains(SUMMARY), covered.is_some());
        }
    }
    // Another process loads it: every prompt and every reply.
    let mut acp = AcpProcess::spawn_env(&dir, &["--provider", "openai", "--model", "m"], &env);
    acp.initialize();
    let (notes, response) = acp.request(
        "session/load",
        json!({"sessionId": session, "cwd": dir.workspace(), "mcpServers": []}),
    );
    assert!(response.get("error").is_none(), "{response}");
    let prompts = crate::support::chunks(&notes, "user_message_chunk");
    for n in 0..PROMPTS {
        assert!(
            prompts.contains(&format!("LOG {n}:")),
            "prompt {n} replayed"
        );
    }
    assert!(
        crate::support::agent_text(&notes).matches("ok").count() >= PROMPTS,
        "every reply replayed"
    );
    assert!(acp.finish().success());
    let shown = dir.show_session(&session);
    let roles: Vec<&str> = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["message"]["role"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(roles.iter().filter(|r| **r == "user").count(), PROMPTS);
    assert_eq!(roles.iter().filter(|r| **r == "summary").count(), summaries);
}
