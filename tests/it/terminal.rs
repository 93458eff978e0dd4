//! The terminal face (`pincer chat`), driven in tmux: keys sent with
//! `send-keys`, the screen read with `capture-pane`. tmux is a test
//! dependency (`scripts/test-deps.sh` installs it; CI runs that).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::http::{Loopback, Reply, Request, openai};
use crate::support::{BIN, TestDir};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);

/// A `pincer` in a private tmux server (its own socket), 120x40.
struct Tmux {
    socket: String,
    stderr: PathBuf,
}

fn tmux_available() {
    let found = Command::new("tmux").arg("-V").output();
    assert!(
        found.is_ok_and(|out| out.status.success()),
        "tmux is missing: these tests drive `pincer chat` in tmux; run scripts/test-deps.sh (CI installs it)"
    );
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

impl Tmux {
    /// Starts `pincer ARGS` in `cwd` with the test directory's HOME, config
    /// and data dir (and `env`); when it exits the pane shows `EXITED=CODE`.
    fn start(dir: &TestDir, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        tmux_available();
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let socket = format!(
            "pincer-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let stderr = dir.path().join(format!("{socket}.stderr"));
        let mut vars = vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), path(&dir.path().join("home"))),
            (
                "XDG_CONFIG_HOME".to_owned(),
                path(&dir.path().join("config")),
            ),
            ("PINCER_DATA_DIR".to_owned(), path(&dir.data_dir())),
        ];
        vars.extend(env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        let vars: Vec<String> = vars
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .collect();
        let args: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
        let script = format!(
            "cd {} && env -i TERM=\"$TERM\" {} {} {} 2>{}; echo EXITED=$?; sleep 600",
            shell_quote(&path(cwd)),
            vars.join(" "),
            shell_quote(BIN),
            args.join(" "),
            shell_quote(&path(&stderr)),
        );
        let out = Command::new("tmux")
            .env_remove("TMUX")
            .args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
            .args(["-x", "120", "-y", "40", &script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { socket, stderr }
    }

    fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .env_remove("TMUX")
            .args(["-L", &self.socket])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types text literally, then presses Enter.
    fn line(&self, text: &str) {
        self.tmux(&["send-keys", "-l", text]);
        self.keys(&["Enter"]);
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys"];
        args.extend_from_slice(keys);
        self.tmux(&args);
    }

    /// The screen and its scrollback, wrapped lines joined.
    fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-J", "-S", "-"])
    }

    /// The screen with its colors and styles as escape sequences.
    fn styled_screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-e", "-J", "-S", "-"])
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until the screen satisfies `ready`; panics with the screen if it
    /// does not within the deadline.
    fn wait(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; screen:\n{screen}\nstderr:\n{}",
                    self.stderr()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_for(&self, needle: &str) -> String {
        self.wait(&format!("{needle:?}"), |screen| screen.contains(needle))
    }

    /// Waits for `needle` to show `count` times.
    fn wait_count(&self, needle: &str, count: usize) -> String {
        self.wait(&format!("{needle:?} {count} times"), |screen| {
            screen.matches(needle).count() >= count
        })
    }

    /// Waits for the prompt to be the screen's last line.
    fn wait_prompt(&self) -> String {
        self.wait("the prompt", |screen| {
            screen.trim_end().lines().last().is_some_and(|l| l == ">")
        })
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .env_remove("TMUX")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

/// The ids of the sessions in the data dir, newest first.
fn session_ids(dir: &TestDir) -> Vec<String> {
    let out = dir
        .command()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line).unwrap();
            value["session_id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The text of each user message of a session, in order.
fn user_prompts(dir: &TestDir, session: &str) -> Vec<String> {
    let shown = dir.show_session(session);
    shown["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["message"]["role"] == "user")
        .map(|entry| {
            entry["message"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

#[test]
fn a_prompt_gets_a_streamed_rendered_reply_and_joins_the_history() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([
                {"thought": "The user greets me.\n"},
                {"text": "Hello, this is **very bold** and `some code`.\n"},
                {"text": "## A heading\n- first item\n"},
                {"text": "- second "},
                {"text": "item\nThe end."}
            ]),
            json!([{"text": "Second reply."}]),
            json!([{"tool_call": {"name": "read_file", "arguments": {"path": "missing.txt"}}}]),
            json!([{"text": "Cut short"}, {"stop": "max_tokens"}]),
            json!([{"error": {"kind": "auth", "message": "bad key"}}]),
        ],
    );
    let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    tmux.wait_prompt();
    tmux.line("hello there");
    let screen = tmux.wait_for("The end.");
    assert!(
        screen.contains("Hello, this is very bold and some code."),
        "{screen}"
    );
    assert!(!screen.contains("**"), "{screen}");
    assert!(screen.contains("\nA heading\n"), "{screen}");
    assert!(screen.contains("first item\n"), "{screen}");
    assert!(screen.contains("second item\n"), "{screen}");
    assert!(screen.contains("~ The user greets me."), "{screen}");
    // Styles reach the terminal: bold text is drawn bold.
    let styled = tmux.styled_screen();
    assert!(styled.contains("\x1b[1mvery bold"), "{styled:?}");
    tmux.wait_prompt();

    // A trailing backslash and Alt-Enter both continue the prompt on a new line.
    tmux.line("line one\\");
    tmux.tmux(&["send-keys", "-l", "line two"]);
    tmux.keys(&["M-Enter"]);
    tmux.line("line three");
    tmux.wait_for("Second reply.");
    tmux.wait_prompt();

    // A failed tool call, a reply cut short, a failed run.
    tmux.line("read a missing file");
    let screen = tmux.wait_for("(stopped: max_tokens)");
    assert!(
        screen.contains("* Read missing.txt [read]\n  failed: "),
        "{screen}"
    );
    tmux.wait_prompt();
    tmux.line("fail please");
    tmux.wait_for("error: ");
    tmux.wait_prompt();
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED=0");

    let sessions = session_ids(&dir);
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        user_prompts(&dir, &sessions[0]),
        vec![
            "hello there".to_owned(),
            "line one\nline two\nline three".to_owned(),
            "read a missing file".to_owned(),
            "fail please".to_owned(),
        ]
    );
    let shown = dir.show_session(&sessions[0]);
    assert_eq!(shown["session"]["origin"], "terminal");
    // The prompts are kept in the history file for the next conversation.
    let history = std::fs::read_to_string(dir.data_dir().join("chat-history")).unwrap();
    assert!(history.contains("hello there"), "{history}");
}

#[test]
fn no_color_and_a_dumb_terminal_give_plain_output() {
    for env in [("NO_COLOR", "1"), ("TERM", "dumb")] {
        let dir = TestDir::new();
        let ws = dir.workspace();
        let script = dir.script("s.jsonl", &[json!([{"text": "Some **bold** words."}])]);
        let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[env]);
        tmux.wait_prompt();
        tmux.line("hi");
        tmux.wait_for("Some bold words.");
        let styled = tmux.styled_screen();
        assert!(!styled.contains('\x1b'), "{env:?}: {styled:?}");
    }
}

#[test]
fn an_approval_is_asked_with_the_diff_or_command_and_answered_at_the_prompt() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "allowed.txt", "content": "kept line\n"}}}]),
            json!([{"text": "First done."}]),
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "rejected.txt", "content": "refused line\n"}}}]),
            json!([{"text": "Second done."}]),
            json!([{"tool_call": {"name": "shell", "arguments": {"command": "echo shell-was-run > ran.txt"}}}]),
            json!([{"text": "Third done."}]),
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "always.txt", "content": "one\n"}}}]),
            json!([{"text": "Fourth done."}]),
            json!([{"tool_call": {"name": "write_file", "arguments": {"path": "always.txt", "content": "two\n"}}}]),
            json!([{"text": "Fifth done."}]),
        ],
    );
    let tmux = Tmux::start(
        &dir,
        &ws,
        &["chat", "--script", &path(&script), "--mode", "supervised"],
        &[],
    );
    tmux.wait_prompt();
    tmux.line("write the first file");
    let screen = tmux.wait_for("Allow? [y] once, [a] always, [n] reject:");
    assert!(
        screen.contains("Approval needed: Create allowed.txt"),
        "{screen}"
    );
    assert!(screen.contains("+kept line"), "{screen}");
    tmux.line("y");
    let screen = tmux.wait_for("First done.");
    assert!(screen.contains("  done"), "{screen}");
    assert_eq!(
        std::fs::read_to_string(ws.join("allowed.txt")).unwrap(),
        "kept line\n"
    );
    tmux.wait_prompt();

    tmux.line("write the second file");
    let screen = tmux.wait_count("Allow? [y] once", 2);
    assert!(screen.contains("+refused line"), "{screen}");
    tmux.line("maybe");
    tmux.wait_for("Answer y, a or n.");
    tmux.line("n");
    let screen = tmux.wait_for("Second done.");
    // Said in the person's words, not the sentence the model reads.
    assert!(screen.contains("  rejected: you said no"), "{screen}");
    assert!(!screen.contains("do not retry"), "{screen}");
    assert!(!ws.join("rejected.txt").exists());
    tmux.wait_prompt();

    tmux.line("run a command");
    // The third approval; "maybe" above asked the second one again.
    let screen = tmux.wait_count("Allow? [y] once", 4);
    assert!(
        screen.contains("    $ echo shell-was-run > ran.txt"),
        "{screen}"
    );
    tmux.line("n");
    tmux.wait_for("Third done.");
    assert!(!ws.join("ran.txt").exists());
    tmux.wait_prompt();

    // `/undo` reverts the allowed write.
    tmux.line("/undo");
    let screen = tmux.wait_for("Reverted 1 file from run");
    assert!(screen.contains("allowed.txt"), "{screen}");
    tmux.wait_prompt();
    assert!(!ws.join("allowed.txt").exists());

    // "a" allows the tool from now on: the next write asks nothing.
    tmux.line("write always");
    tmux.wait_count("Allow? [y] once", 5);
    tmux.line("a");
    tmux.wait_for("Fourth done.");
    tmux.wait_prompt();
    tmux.line("write it again");
    let screen = tmux.wait_for("Fifth done.");
    assert_eq!(screen.matches("Allow? [y] once").count(), 5, "{screen}");
    assert_eq!(
        std::fs::read_to_string(ws.join("always.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn ctrl_c_cancels_the_run_and_twice_leaves() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Working on it\n"}, {"delay_ms": 60000}, {"text": "never shown"}]),
            json!([{"text": "Working again\n"}, {"delay_ms": 60000}, {"text": "never shown"}]),
        ],
    );
    let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    tmux.wait_prompt();
    tmux.line("start a long task");
    tmux.wait_for("Working on it");
    tmux.keys(&["C-c"]);
    tmux.wait_for("(cancelled)");
    tmux.wait_prompt();

    let sessions = session_ids(&dir);
    let shown = dir.show_session(&sessions[0]);
    let run = shown["runs"][0]["run_id"].as_str().unwrap().to_owned();
    let out = dir
        .command()
        .args(["runs", "show", &run, "--json"])
        .output()
        .unwrap();
    let info: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(info["state"], "cancelled", "{info}");

    // The prompt is back and works; a second Ctrl-C leaves cleanly (during
    // the run's cancelling, or at the empty prompt once it is cancelled).
    tmux.line("another long task");
    tmux.wait_for("Working again");
    tmux.keys(&["C-c"]);
    tmux.wait_count("Ctrl-C again to leave", 2);
    tmux.keys(&["C-c"]);
    tmux.wait_for("EXITED=0");
    let shown = dir.show_session(&sessions[0]);
    let states: Vec<&str> = shown["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, vec!["cancelled", "cancelled"]);
}

#[test]
fn resume_picks_an_earlier_session_and_continues_it() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "The first answer."}]),
            json!([{"text": "The second answer."}]),
        ],
    );
    let first = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    first.wait_prompt();
    first.line("the first question");
    first.wait_for("The first answer.");
    first.wait_prompt();
    first.line("/quit");
    first.wait_for("EXITED=0");
    drop(first);

    let second = Tmux::start(
        &dir,
        &ws,
        &["chat", "--resume", "--script", &path(&script)],
        &[],
    );
    let screen = second.wait_for("Resume which?");
    assert!(screen.contains("  1. the first question"), "{screen}");
    second.line("1");
    let screen = second.wait_for("Resumed session");
    assert!(screen.contains("you: the first question"), "{screen}");
    assert!(screen.contains("pincer: The first answer."), "{screen}");
    second.wait_prompt();
    // The history file brings back the first conversation's lines.
    second.keys(&["Up"]);
    second.wait_for("> /quit");
    second.keys(&["Up"]);
    second.wait_for("> the first question");
    second.keys(&["C-u"]);
    second.wait_prompt();
    second.line("the second question");
    second.wait_for("The second answer.");
    second.wait_prompt();
    second.line("/exit");
    second.wait_for("EXITED=0");

    let sessions = session_ids(&dir);
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        user_prompts(&dir, &sessions[0]),
        vec![
            "the first question".to_owned(),
            "the second question".to_owned()
        ]
    );

    // `--session ID` continues it without asking.
    let third = Tmux::start(
        &dir,
        &ws,
        &[
            "chat",
            "--session",
            &sessions[0],
            "--script",
            &path(&script),
        ],
        &[],
    );
    let screen = third.wait_for("Resumed session");
    assert!(screen.contains("you: the second question"), "{screen}");
    drop(third);

    // Enter takes the newest session; `n` starts a new one.
    let fourth = Tmux::start(
        &dir,
        &ws,
        &["chat", "--resume", "--script", &path(&script)],
        &[],
    );
    fourth.wait_for("Resume which?");
    fourth.keys(&["Enter"]);
    fourth.wait_for("Resumed session the first question");
    drop(fourth);
    let fifth = Tmux::start(
        &dir,
        &ws,
        &["chat", "--resume", "--script", &path(&script)],
        &[],
    );
    fifth.wait_for("Resume which?");
    fifth.line("n");
    let screen = fifth.wait_prompt();
    assert!(!screen.contains("Resumed session"), "{screen}");
}

#[test]
fn slash_commands_are_answered_and_an_unknown_one_is_named() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script("s.jsonl", &[json!([{"text": "unused"}])]);
    let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    tmux.wait_prompt();
    // Tab completes a command name.
    tmux.tmux(&["send-keys", "-l", "/he"]);
    tmux.keys(&["Tab"]);
    tmux.wait_for("> /help");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("Ctrl-D at an empty prompt leaves.");
    for command in [
        "/compact", "/undo", "/mode", "/model", "/runs", "/help", "/new", "/quit",
    ] {
        assert!(screen.contains(command), "{command} in {screen}");
    }
    tmux.line("/frobnicate now");
    tmux.wait_for("Unknown command /frobnicate; /help lists the commands.");
    tmux.line("/mode full");
    tmux.wait_for("Mode set to");
    tmux.line("/mode");
    tmux.wait_for("Mode: Full autonomy (full)");
    tmux.line("/runs");
    tmux.wait_for("No runs in this session yet.");
    tmux.line("/model");
    tmux.wait_for("Model: scripted/");
    tmux.line("/compact");
    tmux.wait_for("Nothing to compact");
    tmux.line("/new");
    tmux.wait_for("A new session starts with the next prompt.");
    tmux.wait_prompt();
    tmux.keys(&["C-c"]);
    tmux.wait_for("EXITED=0");
    assert_eq!(session_ids(&dir).len(), 1);
}

/// A skill the person has (`HOME/.agents/skills/pdf`) is completed with
/// Tab, listed by `/help` and run by its name: a prompt, not an unknown
/// command.
#[test]
fn a_skill_is_completed_listed_and_run_by_its_name() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let folder = dir.path().join("home/.agents/skills/pdf");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(
        folder.join("SKILL.md"),
        "---\nname: pdf\ndescription: Extract tables and text from PDF files.\n---\n\nUse pdftotext.\n",
    )
    .unwrap();
    let script = dir.script("s.jsonl", &[json!([{"text": "PDF-DONE"}])]);
    let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    tmux.wait_prompt();
    tmux.tmux(&["send-keys", "-l", "/pd"]);
    tmux.keys(&["Tab"]);
    tmux.wait_for("> /pdf");
    tmux.keys(&["C-u"]);
    tmux.line("/help");
    let screen = tmux.wait_for("Extract tables and text from PDF files.");
    assert!(screen.contains("Skills and custom commands:"), "{screen}");
    assert!(screen.contains("/skill [NAME [request]]"), "{screen}");
    tmux.line("/pdf the tables of report.pdf");
    tmux.wait_for("PDF-DONE");
    let screen = tmux.screen();
    assert!(!screen.contains("Unknown command"), "{screen}");
    tmux.keys(&["C-c"]);
    tmux.wait_for("EXITED=0");
    let sessions = session_ids(&dir);
    assert_eq!(sessions.len(), 1);
    assert_eq!(
        user_prompts(&dir, &sessions[0]).first().map(String::as_str),
        Some("/pdf the tables of report.pdf")
    );
}

/// A custom command with arguments typed in the terminal: the model is
/// sent its prompt with them put in.
#[test]
fn a_custom_command_with_arguments_runs_in_the_terminal() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let commands = dir.path().join("home/.claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("fix.md"),
        "---\ndescription: Fix an issue in a file\nargument-hint: ISSUE FILE\n---\nFix issue #$1 in `$2`.\n",
    )
    .unwrap();
    let server = Loopback::model(|_, _| openai::text_reply("FIXED-IT"));
    let env = openai_env(&server);
    let tmux = Tmux::start(
        &dir,
        &ws,
        &["chat", "--provider", "openai", "--model", "m"],
        &env_refs(&env),
    );
    tmux.wait_prompt();
    tmux.line("/help");
    tmux.wait_for("/fix [ISSUE FILE]");
    tmux.line("/fix 7 src/lib.rs");
    tmux.wait_for("FIXED-IT");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        user_texts(&requests[0]).last().map(String::as_str),
        Some("Fix issue #7 in `src/lib.rs`.")
    );
    tmux.keys(&["C-c"]);
    tmux.wait_for("EXITED=0");
}

#[test]
fn pincer_alone_on_a_terminal_opens_a_conversation() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script("s.jsonl", &[json!([{"text": "Configured reply."}])]);
    let config = dir.path().join("config").join("pincer");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {:?}\n",
            path(&script)
        ),
    )
    .unwrap();
    let tmux = Tmux::start(&dir, &ws, &[], &[]);
    tmux.wait_prompt();
    tmux.line("hi");
    tmux.wait_for("Configured reply.");
}

#[test]
fn pincer_alone_without_a_terminal_prints_the_usage() {
    let dir = TestDir::new();
    let out = dir.command().output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Usage: pincer"), "{stderr}");
    assert!(stderr.contains("chat"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn a_question_is_answered_at_the_prompt() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["Red", "Blue"]}}}]),
            json!([{"text": "Painting."}]),
            json!([{"tool_call": {"name": "ask_user", "arguments": {"question": "What is the room called?"}}}]),
            json!([{"text": "Labelled."}]),
        ],
    );
    let tmux = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    tmux.wait_prompt();
    tmux.line("paint the room");
    let screen = tmux.wait_for("Answer (a number or your own words; empty to decline):");
    assert!(screen.contains("Question: Which color?"), "{screen}");
    assert!(screen.contains("  1. Red\n  2. Blue"), "{screen}");
    tmux.line("2");
    tmux.wait_for("Painting.");
    tmux.wait_prompt();
    tmux.line("and label it");
    tmux.wait_for("Answer (empty to decline):");
    tmux.line("Studio");
    tmux.wait_for("Labelled.");
    tmux.wait_prompt();
    let outputs = crate::questions::tool_outputs(&dir);
    assert_eq!(
        outputs,
        ["The user answered: Blue", "The user answered: Studio"],
        "{}",
        tmux.stderr()
    );
}

#[test]
fn slash_trust_trusts_the_workspace_from_the_terminal() {
    let dir = TestDir::new();
    let ws = crate::hooks::workspace_with_hooks(&dir);
    dir.write_config("[hooks]\nimport = [\"claude\"]\n");
    let script = dir.script("s.jsonl", &[json!([{"text": "hello"}])]);
    let tmux = Tmux::start(
        &dir,
        &ws,
        &["chat", "--script", &path(&script), "--mode", "full"],
        &[],
    );
    tmux.wait_prompt();
    tmux.line("/trust");
    tmux.wait_for(&format!(
        "Trusted {}: its hooks run from now on, as long as their files stay as they are now.",
        ws.display()
    ));
    tmux.wait_prompt();
    let listed = dir.command().args(["trust", "--list"]).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).lines().next(),
        Some(ws.to_str().unwrap())
    );
}

/// `pincer chat --session ID` on a session another process is running:
/// the prompt waits behind that run, the chat says so, then it is answered
/// and the history keeps the order the runs had.
#[test]
fn a_prompt_in_chat_waits_behind_another_processs_run() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"text": "Started."}]),
            json!([{"text": "Slow"}, {"delay_ms": 2500}, {"text": " done."}]),
            json!([{"text": "Third answer."}]),
        ],
    );
    let out = dir
        .command()
        .current_dir(&ws)
        .args(["run", "--script", &path(&script), "start"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let session = session_ids(&dir).remove(0);
    let mut slow = dir
        .command()
        .current_dir(&ws)
        .args([
            "run",
            "--session",
            &session,
            "--script",
            &path(&script),
            "slow one",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + WAIT;
    while !dir.show_session(&session)["runs"]
        .as_array()
        .is_some_and(|runs| runs.iter().any(|r| r["state"] == "running"))
    {
        assert!(Instant::now() < deadline, "the slow run never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let chat = Tmux::start(
        &dir,
        &ws,
        &["chat", "--session", &session, "--script", &path(&script)],
        &[],
    );
    chat.wait_prompt();
    chat.line("next");
    chat.wait_for("is running this session");
    chat.wait_for("Third answer.");
    assert!(slow.wait().unwrap().success());
    assert_eq!(
        user_prompts(&dir, &session),
        vec!["start".to_owned(), "slow one".to_owned(), "next".to_owned()]
    );
}

/// A slow model: a working indicator with the time shows from Enter until
/// the first token, then the reply's line shows as it comes, before it is
/// complete, and the indicator is gone.
#[test]
fn a_slow_model_shows_a_working_indicator_then_its_line_as_it_comes() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[json!([
            {"delay_ms": 3000},
            {"text": "Hello"},
            {"delay_ms": 1500},
            {"text": " slow"},
            {"delay_ms": 1500},
            {"text": " world.\nSecond line.\n"}
        ])],
    );
    let chat = Tmux::start(&dir, &ws, &["chat", "--script", &path(&script)], &[]);
    chat.wait_prompt();
    let sent = Instant::now();
    chat.line("hi");
    let screen = chat.wait_for("working");
    assert!(
        sent.elapsed() < Duration::from_millis(2500),
        "the indicator came only after {:?}",
        sent.elapsed()
    );
    assert!(!screen.contains("Hello"), "{screen}");
    let screen = chat.wait_for("Hello");
    assert!(
        !screen.contains("world."),
        "the line showed only once complete: {screen}"
    );
    assert!(!screen.contains("working"), "{screen}");
    let screen = chat.wait_for("Second line.");
    assert!(screen.contains("Hello slow world."), "{screen}");
    assert_eq!(screen.matches("Hello").count(), 1, "{screen}");
    chat.wait_prompt();
}

/// A shell call's output shows as it comes, under the call; past 20 lines
/// the rest is counted.
#[test]
fn a_shell_calls_output_shows_as_it_comes() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let script = dir.script(
        "s.jsonl",
        &[
            json!([{"tool_call": {"name": "shell", "arguments": {"command": "printf 'line %s\\n' $(seq 1 25)"}}}]),
            json!([{"text": "Printed."}]),
        ],
    );
    let chat = Tmux::start(
        &dir,
        &ws,
        &["chat", "--mode", "full", "--script", &path(&script)],
        &[],
    );
    chat.wait_prompt();
    chat.line("print lines");
    let screen = chat.wait_for("Printed.");
    assert!(screen.contains("  | line 1\n"), "{screen}");
    assert!(screen.contains("  | line 20\n"), "{screen}");
    assert!(!screen.contains("  | line 21\n"), "{screen}");
    assert!(screen.contains("(25 lines of output in all)"), "{screen}");
}

/// An OpenAI-compatible model server on loopback, answering each request in
/// turn with `replies` (the last one again past the end).
fn slow_server(replies: Vec<Reply>) -> Loopback {
    Loopback::model(move |_, n| replies[n.min(replies.len() - 1)].clone())
}

fn openai_env(server: &Loopback) -> Vec<(&'static str, String)> {
    vec![("OPENAI_BASE_URL", format!("{}/v1", server.url))]
}

fn env_refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The user messages of a chat completions request, in order.
fn user_texts(request: &Request) -> Vec<String> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            let content = &m["content"];
            content.as_str().map_or_else(
                || {
                    content
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|p| p["text"].as_str())
                        .collect()
                },
                str::to_owned,
            )
        })
        .collect()
}

/// A slow model server (first token after 3 s, then a chunk every 500 ms):
/// the indicator shows at once, the line in progress before it completes; a
/// line typed meanwhile steers the run (the model's next turn reads it) and
/// is not echoed into the reply; what is half typed as the run ends waits at
/// the next prompt.
#[test]
fn a_slow_model_server_shows_work_and_keeps_what_is_typed_meanwhile() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let pause = Duration::from_millis(500);
    let server = slow_server(vec![
        Reply::paced(vec![
            (
                Duration::from_secs(3),
                openai::chunk(json!({"content": "Hello"}), Value::Null),
            ),
            (
                pause,
                openai::chunk(json!({"content": " slow"}), Value::Null),
            ),
            (
                pause,
                openai::chunk(json!({"content": " world."}), Value::Null),
            ),
            (
                pause,
                openai::chunk(json!({"content": "\nSecond line.\n"}), Value::Null),
            ),
            (pause, openai::chunk(json!({}), json!("stop"))),
            (pause, "data: [DONE]\n\n".to_owned()),
        ]),
        openai::text_reply("Steered answer."),
        openai::text_reply("Third answer."),
    ]);
    let env = openai_env(&server);
    let chat = Tmux::start(
        &dir,
        &ws,
        &["chat", "--provider", "openai", "--model", "slow-model"],
        &env_refs(&env),
    );
    chat.wait_prompt();
    let sent = Instant::now();
    chat.line("hi");
    chat.wait_for("working 0s");
    let shown_after = sent.elapsed();
    // Generous for a loaded CI machine; the figure itself is in
    // docs/benchmarks.md ("Terminal chat: Enter to the working indicator").
    assert!(
        shown_after < Duration::from_millis(1500),
        "the indicator came only after {shown_after:?}"
    );
    let screen = chat.wait_for("Hello");
    assert!(
        !screen.contains("world."),
        "the line showed only once complete: {screen}"
    );
    // Typed while the model streams: taken as steering, not lost, not echoed
    // into the reply.
    chat.line("also mention the tests");
    chat.wait_for("(steering: the model reads it at its next turn)");
    chat.tmux(&["send-keys", "-l", "half typ"]);
    let screen = chat.wait_for("Steered answer.");
    assert!(screen.contains("Hello slow world."), "{screen}");
    assert_eq!(
        screen.matches("also mention the tests").count(),
        1,
        "{screen}"
    );
    // Not echoed into the reply while the run works.
    let during = screen.split("Steered answer.").next().unwrap();
    assert!(!during.contains("half typ"), "{screen}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(
        user_texts(&requests[1]),
        vec!["hi".to_owned(), "also mention the tests".to_owned()]
    );
    // The half-typed line is at the next prompt, still being typed.
    chat.wait("the half-typed line at the prompt", |screen| {
        screen.trim_end().lines().last() == Some("> half typ")
    });
    chat.line("ed");
    chat.wait_for("Third answer.");
    assert_eq!(
        user_texts(&server.requests()[2]).last().map(String::as_str),
        Some("half typed")
    );
}

/// A model server that rate-limits the first try: one status line with the
/// reason and the wait, on the indicator's line, then the reply; no log lines
/// on the screen or in stderr.
#[test]
fn a_retry_shows_as_one_status_line() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let server = slow_server(vec![
        Reply::json(
            429,
            &json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
        .header("retry-after", "2"),
        openai::text_reply("After the wait."),
    ]);
    let env = openai_env(&server);
    let chat = Tmux::start(
        &dir,
        &ws,
        &["chat", "--provider", "openai", "--model", "limited"],
        &env_refs(&env),
    );
    chat.wait_prompt();
    chat.line("hi");
    let screen = chat.wait_for("(429 Too Many Requests), 2 of 3");
    assert!(screen.contains("retrying in "), "{screen}");
    let screen = chat.wait_for("After the wait.");
    assert!(
        !screen.contains("retrying"),
        "the status line stays: {screen}"
    );
    assert!(!screen.contains("WARN"), "{screen}");
    assert!(!chat.stderr().contains("WARN"), "{}", chat.stderr());
}

/// `pincer chat` on the PostgreSQL store (`docs/scale-out.md`): the
/// conversation is kept there, and nothing in the data directory's SQLite.
#[test]
fn chat_keeps_its_conversation_on_postgres() {
    let dir = TestDir::new();
    let ws = dir.workspace();
    let url = crate::support::postgres::shared().fresh_database();
    let script = dir.script("s.jsonl", &[json!([{"text": "Kept on PostgreSQL."}])]);
    let tmux = Tmux::start(
        &dir,
        &ws,
        &["chat", "--script", &path(&script)],
        &[("PINCER_STORE_URL", url.as_str())],
    );
    tmux.wait_prompt();
    tmux.line("hello");
    tmux.wait_for("Kept on PostgreSQL.");
    tmux.wait_prompt();
    tmux.keys(&["C-d"]);
    tmux.wait_for("EXITED=0");
    let out = dir
        .command()
        .env("PINCER_STORE_URL", &url)
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("\"origin\":\"terminal\""), "{listed}");
    assert!(
        !dir.data_dir().join("pincer.db").exists(),
        "SQLite was used"
    );
}
