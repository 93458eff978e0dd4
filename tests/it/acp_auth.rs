//! Authentication over ACP (`docs/acp.md`, "Authentication"): the ACP
//! Registry's own check (an empty `HOME`, no keys, its `initialize`, nothing
//! but JSON on stdout), `authenticate` before and after `pincer login`
//! against a loopback provider, and `logout`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use crate::support::{AcpProcess, BIN, Schema, TestDir};
use serde_json::{Value, json};

/// The Registry's check, as its validator runs it: the binary with only
/// `PATH`, `TERM=dumb` and an empty temporary `HOME`; its `initialize`
/// params; at least one `agent` or `terminal` method; then `session/new`
/// and a prompt, which is told how to log in. Every line on stdout is an
/// ACP message.
#[test]
fn the_registry_check_passes_with_an_empty_home_and_no_keys() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let mut child = Command::new(BIN)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("TERM", "dumb")
        .arg("acp")
        .current_dir(workspace.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let schema = Schema::load();
    let mut send = |message: Value| {
        stdin.write_all(format!("{message}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let mut next = || -> Value {
        let line = lines.next().unwrap().unwrap();
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("not JSON on stdout ({err}): {line:?}"));
        schema.check_agent_message(&value);
        value
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": 1,
            "clientInfo": {"name": "ACP Registry Validator", "version": "1.0.0"},
            "clientCapabilities": {
                "terminal": true,
                "fs": {"readTextFile": true, "writeTextFile": true},
                "_meta": {"terminal_output": true, "terminal-auth": true}
            }
        }}),
    );
    let init = next();
    let methods = init["result"]["authMethods"].as_array().unwrap().clone();
    // The Registry reads a method's type from `type`, else from `_meta`
    // (`terminal-auth` → terminal), else agent.
    let types: Vec<&str> = methods
        .iter()
        .map(|m| match m["type"].as_str() {
            Some(kind) => kind,
            None if m["_meta"]["terminal-auth"].is_object() => "terminal",
            None => "agent",
        })
        .collect();
    assert!(
        types.iter().all(|t| *t == "agent" || *t == "terminal"),
        "{methods:#?}"
    );
    let agent = methods
        .iter()
        .find(|m| m["id"] == "pincer-provider")
        .unwrap();
    assert!(agent.get("type").is_none(), "{agent}");
    let hint = &agent["_meta"]["terminal-auth"];
    assert_eq!(hint["args"], json!(["login"]));
    assert_eq!(hint["label"], "pincer login");
    assert!(
        std::path::Path::new(hint["command"].as_str().unwrap()).is_absolute(),
        "{hint}"
    );
    let terminal = methods.iter().find(|m| m["id"] == "pincer-login").unwrap();
    assert_eq!(terminal["type"], "terminal");
    assert_eq!(terminal["args"], json!(["login"]));
    assert_eq!(
        init["result"]["agentCapabilities"]["auth"]["logout"],
        json!({})
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {
            "cwd": workspace.path(), "mcpServers": []
        }}),
    );
    let created = next();
    let session = created["result"]["sessionId"].as_str().unwrap().to_owned();
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": session, "prompt": [{"type": "text", "text": "hi"}]
        }}),
    );
    let refused = loop {
        let message = next();
        if message["id"] == 3 {
            break message;
        }
    };
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let said = refused["error"]["message"].as_str().unwrap();
    assert!(said.starts_with("Authentication required: "), "{said}");
    assert!(said.contains("pincer login"), "{said}");
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success());
    // Whatever is left on stdout is JSON too.
    for line in lines {
        let line = line.unwrap();
        let _: Value = serde_json::from_str(&line).unwrap_or_else(|err| panic!("{err}: {line:?}"));
    }
}

#[test]
fn authenticate_succeeds_once_pincer_login_stored_a_provider_and_logout_removes_it() {
    let dir = TestDir::new();
    let (url, _) = crate::first_run::fake(None);
    let mut acp = AcpProcess::spawn(&dir, &[]);
    let init = acp.call(
        "initialize",
        json!({"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": true}}}),
    );
    let ids: Vec<&str> = init["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["pincer-provider", "pincer-login"]);
    // Nothing usable yet.
    let (_, refused) = acp.request("authenticate", json!({"methodId": "pincer-provider"}));
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let (_, unknown) = acp.request("authenticate", json!({"methodId": "oauth"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    // A session made before the login takes the provider once it exists.
    let session = acp.new_session(&dir.workspace());
    // The person logs in in a terminal (the terminal method runs this).
    let login = dir
        .command()
        .args([
            "login",
            "--provider",
            "local",
            "--base-url",
            &url,
            "--model",
            "m-small",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        login.status.success(),
        "{}",
        String::from_utf8_lossy(&login.stderr)
    );
    let ok = acp.call("authenticate", json!({"methodId": "pincer-provider"}));
    assert_eq!(ok, json!({}));
    let (updates, response) = acp.prompt(&session, "hi");
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    assert!(
        crate::support::agent_text(&updates).contains("Hello from the fake"),
        "{updates:#?}"
    );
    // Logging out removes the stored login: the next prompt is told to log in.
    let out = acp.call("logout", json!({}));
    assert_eq!(out, json!({}));
    assert!(!dir.path().join("config/pincer/credentials.toml").exists());
    let other = acp.new_session(&dir.workspace());
    let (_, refused) = acp.prompt(&other, "hi again");
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    acp.finish();
}
