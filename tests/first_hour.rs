//! The first hour of a newcomer: what the binary says when a person, not a
//! program, is on the other end.

mod common;

use std::process::{Command, Stdio};

use common::TestDir;

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
