//! Questions to the person (`ask_user`, `docs/tools.md`): asked in every face
//! and answered there: a scripted `{"answer"}` line in `pincer run`, ACP
//! form elicitation, a permission request whose options are the answers,
//! the question as text answered by the next prompt, HTTP and chat; a
//! timeout tells the model no answer came. A secret typed as an answer is
//! redacted on the tape, on stderr and for the model; one typed in a prompt
//! reaches the model as typed, and the session's title redacted.

use std::process::Stdio;

use crate::support::{AcpProcess, TestDir, of_type};
use serde_json::{Value, json};

fn ask(question: &str, options: &[&str]) -> Value {
    json!([{"tool_call": {"name": "ask_user", "arguments": {"question": question, "options": options}}}])
}

fn ask_free(question: &str) -> Value {
    json!([{"tool_call": {"name": "ask_user", "arguments": {"question": question}}}])
}

fn text(text: &str) -> Value {
    json!([{"text": text}])
}

#[test]
fn a_scripted_answer_reaches_the_model_and_none_means_nobody_is_there() {
    let dir = TestDir::new();
    // A `Notification` hook hears that a question waits.
    let log = dir.path().join("notified.jsonl");
    dir.write_config(&format!(
        "[[hooks.Notification]]\nmatcher = \"elicitation_dialog\"\ncommand = {}\n",
        serde_json::to_string(&format!("{{ cat; echo; }} >> '{}'", log.display())).unwrap()
    ));
    let script = [
        ask("Which database?", &["PostgreSQL", "SQLite"]),
        text("SQLite it is"),
        ask_free("What should the table be called?"),
        text("I will pick a name"),
    ];
    let (out, lines) = dir.run_jsonl(
        &script,
        "{\"prompt\": \"set up storage\"}\n{\"answer\": \"2\"}\n{\"prompt\": \"and the table\"}\n",
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let asked = of_type(&lines, "question_asked");
    assert_eq!(asked.len(), 2, "{lines:#?}");
    assert_eq!(asked[0]["question"], "Which database?");
    assert_eq!(asked[0]["options"], json!(["PostgreSQL", "SQLite"]));
    let answered = of_type(&lines, "question_answered");
    assert_eq!(answered[0]["outcome"], "answered");
    assert_eq!(answered[0]["answer"], "SQLite");
    assert_eq!(answered[1]["outcome"], "unattended");
    let results = of_type(&lines, "tool_result");
    assert_eq!(
        results[0]["output"], "The user answered: SQLite",
        "{results:#?}"
    );
    assert_eq!(results[0]["is_error"], false);
    assert!(
        results[1]["output"]
            .as_str()
            .unwrap()
            .contains("Nobody is present to answer questions"),
        "{results:#?}"
    );
    // The run waited (state `waiting`) while the question was open.
    assert!(
        of_type(&lines, "state")
            .iter()
            .any(|s| s["state"] == "waiting"),
        "{lines:#?}"
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let notified = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.lines().filter(|l| !l.trim().is_empty()).count() >= 2
            || std::time::Instant::now() > deadline
        {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let first: Value = serde_json::from_str(notified.lines().next().unwrap()).unwrap();
    assert_eq!(first["hook_event_name"], "Notification");
    assert_eq!(first["notification_type"], "elicitation_dialog");
    assert_eq!(first["message"], "Pincer has a question: Which database?");
    dir.verify();
}

#[test]
fn bad_questions_and_answer_lines_are_refused_naming_the_problem() {
    let dir = TestDir::new();
    dir.write_config("");
    let (out, _) = dir.run_jsonl(&[text("x")], "{\"answer\": \"2\"}\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 1: an answer must follow the prompt"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (out, _) = dir.run_jsonl(&[text("x")], "{\"prompt\": \"a\"}\n{\"answer\": 2}\n");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("{\"answer\": \"...\"}"));
    // A question with one option is refused to the model, not asked.
    let (out, lines) = dir.run_jsonl(
        &[ask("Sure?", &["yes"]), text("fine")],
        "{\"prompt\": \"go\"}\n",
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(of_type(&lines, "question_asked").is_empty());
    let result = &of_type(&lines, "tool_result")[0];
    assert_eq!(result["is_error"], true);
    assert!(
        result["output"].as_str().unwrap().contains("two or more"),
        "{result}"
    );
}

/// Reads from the agent until a request with `method`, returning it.
fn until_request(acp: &mut AcpProcess, method: &str) -> Value {
    loop {
        let message = acp.recv();
        if message["method"] == method && message.get("id").is_some() {
            return message;
        }
    }
}

fn result_of(updates: &[Value]) -> String {
    updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "tool_call_update")
        .filter(|u| u["params"]["update"]["status"] == "completed")
        .map(|u| u["params"]["update"]["content"].to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn an_editor_with_form_elicitation_gets_a_form() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[
            ask("Which database?", &["PostgreSQL", "SQLite"]),
            text("ok"),
            ask_free("What should the table be called?"),
            text("fine"),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"elicitation": {"form": {}}}}),
    );
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "set up storage");
    let request = until_request(&mut acp, "elicitation/create");
    let params = &request["params"];
    assert_eq!(params["sessionId"], session.as_str());
    assert_eq!(params["mode"], "form");
    assert_eq!(params["message"], "Which database?");
    assert!(params["toolCallId"].is_string(), "{params}");
    assert_eq!(
        params["requestedSchema"]["properties"]["answer"]["oneOf"],
        json!([{"const": "PostgreSQL", "title": "PostgreSQL"}, {"const": "SQLite", "title": "SQLite"}])
    );
    assert_eq!(params["requestedSchema"]["required"], json!(["answer"]));
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"answer": "PostgreSQL"}}}));
    let (updates, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        result_of(&updates).contains("The user answered: PostgreSQL"),
        "{updates:#?}"
    );

    // A free question is a text field; declining the form tells the model so.
    let prompt = acp.prompt_async(&session, "and a table");
    let request = until_request(&mut acp, "elicitation/create");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["answer"],
        json!({"type": "string", "title": "Answer"})
    );
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "decline"}}));
    let (updates, _) = acp.until_response(&prompt);
    assert!(
        result_of(&updates).contains("The user declined to answer"),
        "{updates:#?}"
    );
    acp.finish();
}

#[test]
fn without_elicitation_the_options_become_a_permission_request() {
    let dir = TestDir::new();
    dir.write_config("");
    let script = dir.script(
        "s.jsonl",
        &[
            ask("Which database?", &["PostgreSQL", "SQLite"]),
            text("ok"),
            ask("Again?", &["Yes", "No"]),
            text("fine"),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "set up storage");
    let request = until_request(&mut acp, "session/request_permission");
    let options: Vec<(String, String)> = request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["optionId"].as_str().unwrap().to_owned(),
                o["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        options,
        vec![
            ("answer_1".to_owned(), "PostgreSQL".to_owned()),
            ("answer_2".to_owned(), "SQLite".to_owned()),
            ("decline".to_owned(), "Decline to answer".to_owned()),
        ]
    );
    assert_eq!(request["params"]["toolCall"]["title"], "Which database?");
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "answer_2"}}}));
    let (updates, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        result_of(&updates).contains("The user answered: SQLite"),
        "{updates:#?}"
    );

    let prompt = acp.prompt_async(&session, "again");
    let request = until_request(&mut acp, "session/request_permission");
    acp.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": {"outcome": "selected", "optionId": "decline"}}}));
    let (updates, _) = acp.until_response(&prompt);
    assert!(
        result_of(&updates).contains("The user declined to answer"),
        "{updates:#?}"
    );
    acp.finish();
}

#[test]
fn a_free_question_is_answered_by_the_next_prompt_or_times_out() {
    let dir = TestDir::new();
    dir.write_config("question_timeout_secs = 1\n");
    let script = dir.script(
        "s.jsonl",
        &[
            ask_free("What should the table be called?"),
            text("naming it"),
            ask_free("And the index?"),
            text("picking one"),
        ],
    );
    let mut acp = AcpProcess::spawn(&dir, &["--script", script.to_str().unwrap()]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let prompt = acp.prompt_async(&session, "make a table");
    // The question comes as agent text.
    loop {
        let message = acp.recv();
        let update = &message["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk"
            && update["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("**Question:** What should the table be called?"))
        {
            break;
        }
    }
    // The next prompt answers it and ends at once; the asking run goes on.
    let (_, answered) = acp.prompt(&session, "orders");
    assert_eq!(answered["result"]["stopReason"], "end_turn", "{answered}");
    let (updates, response) = acp.until_response(&prompt);
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        result_of(&updates).contains("The user answered: orders"),
        "{updates:#?}"
    );

    // Nobody answers the next one: after a second the model hears so.
    let (updates, response) = acp.prompt(&session, "and an index");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        result_of(&updates).contains("No answer came in time"),
        "{updates:#?}"
    );
    acp.finish();
    dir.verify();
}

/// Every `tool_result` output of every run of every session, in order.
pub(crate) fn tool_outputs(dir: &TestDir) -> Vec<String> {
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let mut outputs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let session: Value = serde_json::from_str(line).unwrap();
        let shown = dir.show_session(session["session_id"].as_str().unwrap());
        for run in shown["runs"].as_array().unwrap() {
            for event in of_type(&dir.tape(run["run_id"].as_str().unwrap()), "tool_result") {
                outputs.push(event["output"].as_str().unwrap().to_owned());
            }
        }
    }
    outputs
}

#[test]
fn in_a_chat_a_button_or_the_next_message_answers() {
    use crate::support::telegram::{FakeTelegram, TOKEN};
    const USER: i64 = 42;
    let wait = std::time::Duration::from_secs(20);
    let fake = FakeTelegram::start();
    let dir = TestDir::new();
    dir.write_config(&format!(
        "[channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nlive_drafts = false\nallow = [\"{USER}\"]\n",
        fake.url,
        dir.workspace().display()
    ));
    let script = dir.script(
        "s.jsonl",
        &[
            ask("Which color?", &["Red", "Blue"]),
            text("Painting."),
            ask_free("What is the room called?"),
            text("Labelled."),
        ],
    );
    let mut bridge = dir
        .command()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .args([
            "acp",
            "--provider",
            "scripted",
            "--script",
            script.to_str().unwrap(),
        ])
        .args(["--channel", "telegram"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let texts = |f: &FakeTelegram| -> Vec<(i64, String)> { f.chat(USER) };
    fake.user_says(USER, "paint the room");
    fake.wait_for("the question", wait, |f| {
        texts(f)
            .iter()
            .any(|(_, t)| t.starts_with("Question: Which color?"))
    });
    let asked = fake
        .calls("sendMessage")
        .into_iter()
        .find(|c| {
            c.body["text"]
                .as_str()
                .unwrap()
                .starts_with("Question: Which color?")
        })
        .unwrap();
    assert!(
        asked.body["text"]
            .as_str()
            .unwrap()
            .contains("1. Red\n2. Blue"),
        "{}",
        asked.body
    );
    let buttons: Vec<(String, String)> = asked.body["reply_markup"]["inline_keyboard"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| row.as_array().unwrap().clone())
        .map(|b| {
            (
                b["text"].as_str().unwrap().to_owned(),
                b["callback_data"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let labels: Vec<&str> = buttons.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(labels, ["Red", "Blue", "Decline"]);
    let (message_id, _) = texts(&fake)
        .into_iter()
        .find(|(_, t)| t.starts_with("Question: Which color?"))
        .unwrap();
    fake.press(USER, message_id, &buttons[1].1);
    fake.wait_for("the reply", wait, |f| {
        texts(f).iter().any(|(_, t)| t == "Painting.")
    });

    // A free question: the next message is the answer, not a new prompt.
    fake.user_says(USER, "and label it");
    fake.wait_for("the second question", wait, |f| {
        texts(f)
            .iter()
            .any(|(_, t)| t.starts_with("Question: What is the room called?"))
    });
    fake.user_says(USER, "Studio");
    fake.wait_for("the second reply", wait, |f| {
        texts(f).iter().any(|(_, t)| t == "Labelled.")
    });
    let _ = bridge.kill();
    let _ = bridge.wait();
    let outputs = tool_outputs(&dir);
    assert!(
        outputs.contains(&"The user answered: Blue".to_owned()),
        "{outputs:#?}"
    );
    assert!(
        outputs.contains(&"The user answered: Studio".to_owned()),
        "{outputs:#?}"
    );
    // The answer was not taken as a prompt: two runs, two questions.
    assert_eq!(outputs.len(), 2, "{outputs:#?}");
}

/// Every event on every run's tape of every session, in order.
fn all_tape_events(dir: &TestDir) -> Vec<Value> {
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let mut events = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let session: Value = serde_json::from_str(line).unwrap();
        let shown = dir.show_session(session["session_id"].as_str().unwrap());
        for run in shown["runs"].as_array().unwrap() {
            events.extend(dir.tape(run["run_id"].as_str().unwrap()));
        }
    }
    events
}

/// Whether any file under `dir` (the store, its WAL, anything else) holds `text`.
fn stored_anywhere(dir: &std::path::Path, text: &str) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        if path.is_dir() {
            return stored_anywhere(&path, text);
        }
        let bytes = std::fs::read(&path).unwrap_or_default();
        bytes
            .windows(text.len())
            .any(|window| window == text.as_bytes())
    })
}

/// `pincer run --input` against a loopback OpenAI-compatible model that asks
/// `ask_user` first and answers "Thanks." after; the output and the requests.
fn run_asking(
    dir: &TestDir,
    input: &str,
    env: &[(&str, &str)],
) -> (std::process::Output, Vec<crate::support::http::Request>) {
    use crate::support::http::{Loopback, openai};
    let server = Loopback::model(|_, n| {
        if n == 0 {
            openai::tool_reply("ask_user", &json!({"question": "Which key should I use?"}))
        } else {
            openai::text_reply("Thanks.")
        }
    });
    let input_path = dir.path().join("input.jsonl");
    std::fs::write(&input_path, input).unwrap();
    let out = dir
        .command()
        .envs(env.iter().copied())
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
        .args(["run", "--provider", "openai", "--model", "m"])
        .args(["--cwd", dir.workspace().to_str().unwrap()])
        .args(["--input", input_path.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out, server.requests())
}

#[test]
fn a_secret_typed_as_an_answer_is_redacted_on_the_tape_on_stderr_and_for_the_model() {
    let dir = TestDir::new();
    // A configured secret (`[safety] secret_env`) and a key of a known shape.
    dir.write_config("[safety]\nsecret_env = [\"DEPLOY_PHRASE\"]\n");
    let phrase = "correct-horse-battery-staple";
    let key = "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34";
    let (out, requests) = run_asking(
        &dir,
        &format!("{{\"prompt\": \"deploy\"}}\n{{\"answer\": \"use {key} with {phrase}\"}}\n"),
        &[("DEPLOY_PHRASE", phrase)],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let redacted = "use [REDACTED:openai] with [REDACTED:configured]";
    // `pincer run` says what was answered, as the tape has it.
    assert!(
        stderr.contains(&format!(
            "pincer: question: Which key should I use? -> {redacted}"
        )),
        "{stderr}"
    );
    for secret in [key, phrase] {
        assert!(!stderr.contains(secret), "{stderr}");
        assert!(
            !stored_anywhere(&dir.data_dir(), secret),
            "{secret} is stored in the data directory"
        );
    }
    let events = all_tape_events(&dir);
    let tape = serde_json::to_string(&events).unwrap();
    for secret in [key, phrase] {
        assert!(!tape.contains(secret), "{tape}");
    }
    let answered: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "question_answered")
        .collect();
    assert_eq!(answered.len(), 1, "{tape}");
    assert_eq!(answered[0]["outcome"], "answered");
    assert_eq!(answered[0]["answer"], redacted);
    // The model reads the answer redacted, as before.
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(
        crate::support::http::openai::message_text(result),
        format!("The user answered: {redacted}")
    );
    let sent = String::from_utf8_lossy(&requests[1].raw).into_owned();
    for secret in [key, phrase] {
        assert!(!sent.contains(secret), "{sent}");
    }
}

#[test]
fn a_secret_in_a_prompt_reaches_the_model_as_typed_and_the_title_redacted() {
    let dir = TestDir::new();
    dir.write_config("");
    // The key starts at character 45: a title cut at 60 characters before
    // redaction would keep its first 15.
    let key = "sk-proj-Qw12Er34Ty56Ui78Op90As12";
    let prompt = format!("Please deploy the staging build now with key {key}");
    let (_, requests) = run_asking(
        &dir,
        &format!(
            "{}\n{{\"answer\": \"the staging one\"}}\n",
            json!({"prompt": prompt})
        ),
        &[],
    );
    // The prompt is the person's own message: the model gets it whole, and
    // the conversation (the tape's `user_message`) keeps it as typed.
    let first = requests[0].body["messages"].as_array().unwrap();
    let user = first.iter().find(|m| m["role"] == "user").unwrap();
    assert_eq!(crate::support::http::openai::message_text(user), prompt);
    let events = all_tape_events(&dir);
    let typed = events.iter().find(|e| e["type"] == "user_message").unwrap();
    assert_eq!(typed["content"], json!([{"type": "text", "text": prompt}]));
    // The title Pincer makes of it, shown in every session list, is its own
    // text: redacted before it is cut.
    let title = "Please deploy the staging build now with key [REDACTED:opena…";
    let info = events.iter().find(|e| e["type"] == "session_info").unwrap();
    assert_eq!(info["title"], title);
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(listed["title"], title, "{listed}");
}
