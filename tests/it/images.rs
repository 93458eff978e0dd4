//! Images and embedded resources in prompts, through the real binary: the
//! advertised `promptCapabilities.image`, what reaches an OpenAI-compatible and
//! an Anthropic loopback server, refusals that name the model or the block,
//! and how an image is kept and replayed.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::support::http::Loopback;
use crate::support::http::anthropic::text_stream as anthropic_stream;
use crate::support::http::openai::text_stream as openai_stream;
use crate::support::{AcpProcess, TestDir, assert_error};
use serde_json::{Value, json};

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// Writes `config.toml` into the test directory and returns its path.
fn config(dir: &TestDir, text: &str) -> PathBuf {
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A scripted provider that answers `text` once per prompt, taking images or not.
fn scripted(dir: &TestDir, images: Option<bool>, turns: usize) -> PathBuf {
    let script = dir.script("model.jsonl", &vec![json!([{"text": "seen"}]); turns]);
    let images = images.map_or(String::new(), |on| format!("images = {on}\n"));
    config(
        dir,
        &format!(
            "provider = \"scripted\"\n[providers.scripted]\nkind = \"scripted\"\nscript = {:?}\n{images}",
            script.to_str().unwrap()
        ),
    )
}

fn acp(dir: &TestDir, config: &Path) -> AcpProcess {
    AcpProcess::spawn(dir, &["--config", config.to_str().unwrap()])
}

fn image_capability(dir: &TestDir, config: &Path) -> Value {
    let mut agent = acp(dir, config);
    let init = agent.initialize();
    agent.finish();
    init["agentCapabilities"]["promptCapabilities"].clone()
}

/// A prompt of text, an image, an embedded text resource and a resource link.
fn mixed_prompt(session: &str) -> Value {
    json!({
        "sessionId": session,
        "prompt": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "mimeType": "image/png", "data": PNG, "uri": "file:///shot.png"},
            {"type": "resource", "resource": {"uri": "file:///notes.md", "mimeType": "text/markdown", "text": "the notes"}},
            {"type": "resource_link", "uri": "file:///src/lib.rs", "name": "lib.rs"},
        ]
    })
}

#[test]
fn the_image_capability_follows_the_default_model() {
    // The scripted provider takes images only when its configuration says so.
    let dir = TestDir::new();
    let off = scripted(&dir, None, 1);
    let caps = image_capability(&dir, &off);
    assert_eq!(caps["image"], false, "{caps}");
    assert_eq!(caps["audio"], false, "{caps}");
    assert_eq!(caps["embeddedContext"], true, "{caps}");
    let on = scripted(&dir, Some(true), 1);
    assert_eq!(image_capability(&dir, &on)["image"], true);

    // An OpenAI-compatible provider: by model family, unless `[models]` says.
    let openai = |model: &str, extra: &str| {
        format!(
            "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\nmodels = [\"{model}\"]\n{extra}"
        )
    };
    let cases = [
        (openai("gpt-4o", ""), true),
        (openai("llama3.1:8b", ""), false),
        (
            openai("llava:13b", "[models.\"llava*\"]\nimages = true\n"),
            true,
        ),
        (
            openai("gpt-4o", "[models.\"gpt-4o\"]\nimages = false\n"),
            false,
        ),
    ];
    for (text, expected) in cases {
        let path = config(&dir, &text);
        assert_eq!(
            image_capability(&dir, &path)["image"],
            expected,
            "with config:\n{text}"
        );
    }
}

#[test]
fn an_image_reaches_an_openai_compatible_server_as_a_data_url() {
    let dir = TestDir::new();
    let model = Loopback::streaming(openai_stream("a pixel"));
    let url = model.url.clone();
    let path = config(
        &dir,
        &format!(
            "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodels = [\"gpt-4o\"]\n"
        ),
    );
    let mut agent = acp(&dir, &path);
    assert_eq!(
        agent.initialize()["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let session = agent.new_session(&dir.workspace());
    let (updates, response) = agent.request("session/prompt", mixed_prompt(&session));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(crate::support::agent_text(&updates), "a pixel");
    agent.finish();
    let seen = model.bodies();
    let messages = seen[0]["messages"].as_array().unwrap();
    let user = messages.iter().rfind(|m| m["role"] == "user").unwrap();
    assert_eq!(
        user["content"],
        json!([
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            {"type": "text", "text": "<resource uri=\"file:///notes.md\">\nthe notes\n</resource>"},
            {"type": "text", "text": "[lib.rs](file:///src/lib.rs)"},
        ])
    );
}

#[test]
fn an_image_reaches_anthropic_as_a_base64_source() {
    let dir = TestDir::new();
    let model = Loopback::streaming(anthropic_stream("a pixel"));
    let url = model.url.clone();
    let path = config(
        &dir,
        &format!(
            "provider = \"claude\"\n[providers.claude]\nkind = \"anthropic\"\nbase_url = \"{url}\"\napi_key_env = \"TEST_CLAUDE_KEY\"\nmodels = [\"claude-sonnet-4-5\"]\n"
        ),
    );
    let mut agent = AcpProcess::spawn_env(
        &dir,
        &["--config", path.to_str().unwrap()],
        &[("TEST_CLAUDE_KEY", "claude-key-0123456789")],
    );
    assert_eq!(
        agent.initialize()["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let session = agent.new_session(&dir.workspace());
    let (updates, response) = agent.request("session/prompt", mixed_prompt(&session));
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(crate::support::agent_text(&updates), "a pixel");
    agent.finish();
    let seen = model.bodies();
    assert_eq!(
        seen[0]["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "What is in this picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "text", "text": "<resource uri=\"file:///notes.md\">\nthe notes\n</resource>\n[lib.rs](file:///src/lib.rs)",
             "cache_control": {"type": "ephemeral"}},
        ]}])
    );
}

#[test]
fn embedded_text_reaches_a_model_that_takes_no_images() {
    let dir = TestDir::new();
    let model = Loopback::streaming(openai_stream("read it"));
    let url = model.url.clone();
    let path = config(
        &dir,
        &format!(
            "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodels = [\"llama3.1:8b\"]\n"
        ),
    );
    let mut agent = acp(&dir, &path);
    assert_eq!(
        agent.initialize()["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    let session = agent.new_session(&dir.workspace());
    let (_, response) = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Summarize"},
            {"type": "resource", "resource": {"uri": "file:///notes.md", "text": "the notes"}},
        ]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    agent.finish();
    let seen = model.bodies();
    let user = seen[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .unwrap()
        .clone();
    // No images: the content stays the plain string every server takes.
    assert_eq!(
        user["content"],
        "Summarize\n\n<resource uri=\"file:///notes.md\">\nthe notes\n</resource>"
    );
}

#[test]
fn an_image_for_a_text_only_model_is_refused_and_starts_no_run() {
    let dir = TestDir::new();
    let path = scripted(&dir, None, 1);
    let mut agent = acp(&dir, &path);
    agent.initialize();
    let session = agent.new_session(&dir.workspace());
    let (_, response) = agent.request("session/prompt", mixed_prompt(&session));
    assert_error(
        &response,
        -32602,
        "model script does not accept images; choose a model that does, or set `images = true` in [models.\"script\"]",
    );
    let runs = agent.call("_pincer/runs/list", json!({"sessionId": session}));
    assert_eq!(runs["runs"], json!([]), "{runs}");
    // The session goes on: the script's one turn is still there for text.
    let (updates, response) = agent.prompt(&session, "hello");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert_eq!(crate::support::agent_text(&updates), "seen");
    agent.finish();
}

#[test]
fn bad_images_and_binary_blobs_are_refused_naming_the_block() {
    let dir = TestDir::new();
    let path = scripted(&dir, Some(true), 1);
    let mut agent = acp(&dir, &path);
    agent.initialize();
    let session = agent.new_session(&dir.workspace());
    let text = json!({"type": "text", "text": "look"});
    let cases = [
        (
            json!({"type": "image", "mimeType": "image/png", "data": "not base64!"}),
            "prompt[1]: image data is not valid base64",
        ),
        (
            json!({"type": "image", "mimeType": "image/bmp", "data": PNG}),
            "prompt[1]: image type \"image/bmp\" is not supported; send image/png, image/jpeg, image/gif or image/webp",
        ),
        (
            json!({"type": "image", "mimeType": "image/jpeg", "data": PNG}),
            "prompt[1]: image data does not look like image/jpeg",
        ),
        (
            json!({"type": "resource", "resource": {"uri": "file:///a.pdf", "mimeType": "application/pdf", "blob": "JVBERi0="}}),
            "prompt[1]: binary embedded resource file:///a.pdf (application/pdf) is not supported",
        ),
    ];
    for (block, message) in cases {
        let (_, response) = agent.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [text, block]}),
        );
        assert_error(&response, -32602, message);
    }
    let runs = agent.call("_pincer/runs/list", json!({"sessionId": session}));
    assert_eq!(runs["runs"], json!([]), "{runs}");
    agent.finish();
}

#[test]
fn an_image_is_kept_on_the_tape_and_replayed_on_load() {
    let dir = TestDir::new();
    let path = scripted(&dir, Some(true), 1);
    let workspace = dir.workspace();
    let mut agent = acp(&dir, &path);
    agent.initialize();
    let session = agent.new_session(&workspace);
    // An image embedded as a blob resource is an image too.
    let (_, response) = agent.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "look"},
            {"type": "resource", "resource": {"uri": "file:///shot.png", "mimeType": "image/png", "blob": PNG}},
        ]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    agent.finish();

    let shown = dir.show_session(&session);
    let user = shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["message"]["role"] == "user")
        .unwrap_or_else(|| panic!("no user message in {shown}"));
    assert_eq!(
        user["message"]["content"][1],
        json!({"type": "image", "mime_type": "image/png", "data": PNG, "uri": "file:///shot.png"})
    );

    let mut agent = acp(&dir, &path);
    agent.initialize();
    let (updates, response) = agent.request(
        "session/load",
        json!({"sessionId": session, "cwd": workspace, "mcpServers": []}),
    );
    assert!(response.get("result").is_some(), "{response}");
    let replayed: Vec<&Value> = updates
        .iter()
        .filter(|u| u["params"]["update"]["sessionUpdate"] == "user_message_chunk")
        .map(|u| &u["params"]["update"]["content"])
        .collect();
    assert_eq!(replayed.len(), 2, "{updates:?}");
    assert_eq!(replayed[0]["text"], "look");
    assert_eq!(replayed[1]["type"], "image");
    assert_eq!(replayed[1]["mimeType"], "image/png");
    assert_eq!(replayed[1]["data"], PNG);
    assert_eq!(replayed[1]["uri"], "file:///shot.png");
    agent.finish();
}

#[test]
fn pincer_run_attaches_image_files() {
    use base64::Engine as _;
    let dir = TestDir::new();
    let server = Loopback::streaming(openai_stream("a pixel"));
    let url = server.url.clone();
    let with_model = |model: &str| {
        config(
            &dir,
            &format!(
                "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodels = [\"{model}\"]\n"
            ),
        )
    };
    let png = base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap();
    std::fs::write(dir.path().join("shot.png"), png).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
    let run = |config: &PathBuf, image: &str| {
        dir.command()
            .args([
                "--config",
                config.to_str().unwrap(),
                "run",
                "--image",
                image,
            ])
            .arg("What is this?")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let stderr = |out: &std::process::Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let vision = with_model("gpt-4o");
    let out = run(&vision, "shot.png");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "a pixel\n");
    {
        let seen = server.bodies();
        let user = seen[0]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rfind(|m| m["role"] == "user")
            .unwrap();
        assert_eq!(
            user["content"],
            json!([
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            ])
        );
    }

    let out = run(&vision, "notes.txt");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("image notes.txt is not a PNG, JPEG, GIF or WebP image"),
        "{}",
        stderr(&out)
    );

    let text_only = with_model("llama3.1:8b");
    let out = run(&text_only, "shot.png");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("model llama3.1:8b does not accept images"),
        "{}",
        stderr(&out)
    );
    // Neither refusal reached the model.
    assert_eq!(server.bodies().len(), 1);
}

/// One HTTP/1.1 request over a fresh connection; the status and the JSON body.
fn http(addr: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let body = body.to_string();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {HTTP_TOKEN}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

const HTTP_TOKEN: &str = "test-token-0123456789abcdef";

#[test]
fn the_http_api_takes_image_parts() {
    let dir = TestDir::new();
    let path = scripted(&dir, Some(true), 1);
    let ready = dir.path().join("ready");
    let mut server = dir
        .command()
        .env("PINCER_HTTP_TOKEN", HTTP_TOKEN)
        .args(["--config", path.to_str().unwrap()])
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let addr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            break text.trim().to_owned();
        }
        assert!(
            started.elapsed() < crate::support::TIMEOUT,
            "the server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let (status, session) = http(
        &addr,
        "POST",
        "/v1/sessions",
        &json!({"workspace": dir.workspace()}),
    );
    assert_eq!(status, 201, "{session}");
    let prompt = format!(
        "/v1/sessions/{}/prompt?wait=true",
        session["session_id"].as_str().unwrap()
    );
    let (status, refused) = http(
        &addr,
        "POST",
        &prompt,
        &json!({"content": [
            {"type": "text", "text": "look"},
            {"type": "image", "mime_type": "image/png", "data": "not base64!"},
        ]}),
    );
    assert_eq!(status, 400, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("`content[1]`: image data is not valid base64"),
        "{refused}"
    );
    let (status, run) = http(
        &addr,
        "POST",
        &prompt,
        &json!({"content": [
            {"type": "text", "text": "look"},
            {"type": "image", "mime_type": "image/png", "data": PNG},
        ]}),
    );
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["state"], "completed", "{run}");
    let (_, tape) = http(
        &addr,
        "GET",
        &format!("/v1/runs/{}/tape", run["run_id"].as_str().unwrap()),
        &json!({}),
    );
    let user = tape["events"]
        .as_array()
        .unwrap_or_else(|| panic!("no events in {tape}"))
        .iter()
        .find(|e| e["type"] == "user_message")
        .unwrap_or_else(|| panic!("no user_message in {tape}"));
    assert_eq!(
        user["content"][1],
        json!({"type": "image", "mime_type": "image/png", "data": PNG})
    );
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    server.wait().unwrap();
}
