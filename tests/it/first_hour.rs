//! The first hour of a newcomer: what the binary says when a person, not a
//! program, is on the other end.

use std::process::{Command, Stdio};

use crate::support::TestDir;

/// `script` with the isolation of [`TestDir::command`]: runs `line` on a new
/// pseudo-terminal whose input is empty, so it sees end-of-file at once.
fn on_a_terminal(dir: &TestDir, line: &str) -> String {
    let isolated = dir.command();
    let mut script = Command::new("script");
    script.env_clear();
    for (key, value) in isolated.get_envs() {
        if let Some(value) = value {
            script.env(key, value);
        }
    }
    let out = script
        .current_dir(dir.path())
        .args(["-qec", line, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("`script` (util-linux; Debian's bsdutils) gives pincer a terminal: install it");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `pincer acp` typed on a terminal says what it waits for and how to talk
/// to Pincer instead; on a pipe (an editor) it says nothing of the kind.
#[test]
fn acp_on_a_terminal_says_what_it_is_for() {
    let dir = TestDir::new();
    let bin = env!("CARGO_BIN_EXE_pincer");
    let shown = on_a_terminal(&dir, &format!("{bin} acp"));
    assert!(
        shown.contains("Agent Client Protocol") && shown.contains("pincer chat"),
        "{shown}"
    );

    let piped = dir
        .command()
        .arg("acp")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(!err.contains("Agent Client Protocol"), "{err}");
    assert!(piped.stdout.is_empty());
}

/// The README's HTTP quick start, run as written (on a free port): every
/// command succeeds and the prompt's response shows the reply.
#[test]
fn the_readmes_http_quick_start_shows_the_reply() {
    let dir = TestDir::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## HTTP\n")
        .nth(1)
        .expect("the README has an HTTP section");
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the HTTP section starts with a sh block");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let block = block.replace("8787", &port.to_string()).replace(
        "pincer serve --http ",
        &format!("pincer serve --http 127.0.0.1:{port} "),
    );
    // The run's event stream ends with the run: one that hangs fails here.
    let wrapped = format!(
        "set -e\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n\
         curl() {{ command curl --max-time 10 \"$@\"; }}\n{block}\n"
    );
    let bin_dir = std::path::Path::new(env!("CARGO_BIN_EXE_pincer"))
        .parent()
        .unwrap();
    let mut bash = Command::new("timeout");
    bash.env_clear();
    for (key, value) in dir.command().get_envs() {
        if let Some(value) = value {
            bash.env(key, value);
        }
    }
    let out = bash
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin_dir.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .current_dir(root)
        // A server that never gets ready must not hold the test up for ever.
        .args(["60", "bash", "-c", &wrapped])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // The prompt's response, shown as it is read (on stderr, by `tee`).
    assert!(
        stderr.contains(r#""reply":"Hello from Pincer!""#),
        "{stdout}\n{stderr}"
    );
    // Then the run's events, from its start to its end.
    assert!(
        stdout.contains(r#""type":"text_delta","text":" Pincer!""#)
            && stdout.contains(r#""type":"state","state":"completed""#),
        "{stdout}\n{stderr}"
    );
}

/// The README's sample configuration loads as written and starts nothing
/// on its own (no MCP server launched with every session).
#[test]
fn the_readmes_sample_config_loads() {
    let dir = TestDir::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme
        .split("\n## Configuration\n")
        .nth(1)
        .expect("the README has a Configuration section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("the Configuration section has a toml block");
    let file = dir.path().join("config.toml");
    std::fs::write(&file, block).unwrap();
    let out = dir
        .command()
        .args(["--config", file.to_str().unwrap(), "config", "show"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("provider = \"local\""), "{shown}");
    assert!(!shown.contains("[mcpServers"), "{shown}");
}

/// CI's editor scripts look for the binary where cargo put it, also when
/// `CARGO_TARGET_DIR` moves the target directory.
#[test]
fn the_ci_scripts_find_the_binary_under_cargo_target_dir() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = tempfile::tempdir().unwrap();
    let debug = target.path().join("debug");
    std::fs::create_dir_all(&debug).unwrap();
    for script in ["scripts/ci/editors.sh", "scripts/ci/vscode.sh"] {
        // No binary there yet: the script says where it looked.
        let out = Command::new("bash")
            .arg(root.join(script))
            .env("CARGO_TARGET_DIR", target.path())
            .env_remove("PINCER_BIN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{script}: {err}");
        let wanted = debug.join("pincer");
        assert!(err.contains(wanted.to_str().unwrap()), "{script}: {err}");
    }
}
