//! The line editor at the prompt: editing keys, history kept across
//! sessions in a file, multi-line input, completion of slash commands.
//!
//! Built on `rustyline` rather than `reedline`: it reads one line at a time
//! and gives the terminal back in between, which is what a face that prints a
//! streamed reply between prompts needs, with fewer dependencies (no
//! crossterm). Its blocking read runs on the blocking pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use parking_lot::Mutex;
use rustyline::completion::Completer;
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::FileHistory;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{
    Cmd, ConditionalEventHandler, Config, Editor, EventContext, EventHandler, KeyCode, KeyEvent,
    Modifiers, Movement, RepeatCount,
};

use crate::core::skills::{Invocable, InvocableKind};
use crate::core::slash::COMMANDS;

/// Commands only the terminal has, completed like the shared ones.
pub const TERMINAL_COMMANDS: [(&str, &str); 3] = [
    ("new", "Start a fresh session in this workspace"),
    ("quit", "Leave (also /exit, Ctrl-D at an empty prompt)"),
    ("exit", "Leave"),
];

/// What a read at the prompt gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    Line(String),
    /// Ctrl-C.
    Interrupted,
    /// Ctrl-D at an empty line.
    Eof,
}

/// Multi-line input (a line ending in `\` continues) and slash command
/// completion: the built-in commands, this face's, and the skills and
/// custom commands the workspace has (kept fresh by [`LineEditor::offer`]).
#[derive(Default)]
struct Helper {
    invocable: Arc<Mutex<Vec<Invocable>>>,
}

impl Helper {
    /// The completions of `typed` (the line up to the cursor): a command's
    /// name after `/`, or a skill's name after `/skill `.
    fn completions(&self, typed: &str) -> Vec<String> {
        let Some(name) = typed.strip_prefix('/') else {
            return Vec::new();
        };
        let invocable = self.invocable.lock();
        if let Some(skill) = name.strip_prefix("skill ") {
            let skill = skill.trim_start();
            if skill.contains(char::is_whitespace) {
                return Vec::new();
            }
            return invocable
                .iter()
                .filter(|item| item.kind == InvocableKind::Skill && item.name.starts_with(skill))
                .map(|item| format!("/skill {}", item.name))
                .collect();
        }
        if name.contains(char::is_whitespace) {
            return Vec::new();
        }
        let skill = crate::core::slash::skill_command(&invocable).map(|(name, _, _)| name);
        COMMANDS
            .iter()
            .map(|(name, _, _)| *name)
            .chain(TERMINAL_COMMANDS.iter().map(|(name, _)| *name))
            .chain(invocable.iter().map(|item| item.name.as_str()))
            .chain(skill)
            .filter(|n| n.starts_with(name))
            .map(|n| format!("/{n}"))
            .collect()
    }
}

impl Completer for Helper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok((0, self.completions(&line[..pos])))
    }
}

impl Hinter for Helper {
    type Hint = String;
}

impl Highlighter for Helper {}

impl Validator for Helper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl rustyline::Helper for Helper {}

/// Ctrl-C clears a line being typed, and leaves at an empty prompt.
struct ClearOrInterrupt;

impl ConditionalEventHandler for ClearOrInterrupt {
    fn handle(
        &self,
        _event: &rustyline::Event,
        _n: RepeatCount,
        _positive: bool,
        ctx: &EventContext<'_>,
    ) -> Option<Cmd> {
        Some(if ctx.line().is_empty() {
            Cmd::Interrupt
        } else {
            Cmd::Kill(Movement::WholeBuffer)
        })
    }
}

/// The text typed, with each line-ending `\` that asked for another line removed.
pub fn joined(input: &str) -> String {
    input.replace("\\\n", "\n")
}

/// The prompt's editor and its history file.
pub struct LineEditor {
    /// `None` only while a read is under way on the blocking pool.
    editor: Option<Editor<Helper, FileHistory>>,
    /// Where the history is kept (`DATA_DIR/chat-history`).
    history: PathBuf,
    /// The skills and custom commands completed, shared with the helper.
    invocable: Arc<Mutex<Vec<Invocable>>>,
}

impl LineEditor {
    pub fn open(history: PathBuf) -> anyhow::Result<Self> {
        let config = Config::builder()
            .auto_add_history(false)
            .history_ignore_space(true)
            .history_ignore_dups(true)
            .context("cannot configure the line editor")?
            .max_history_size(1000)
            .context("cannot configure the line editor")?
            .build();
        let mut editor: Editor<Helper, FileHistory> =
            Editor::with_config(config).context("cannot open the terminal for line editing")?;
        let helper = Helper::default();
        let invocable = helper.invocable.clone();
        editor.set_helper(Some(helper));
        editor.bind_sequence(KeyEvent(KeyCode::Enter, Modifiers::ALT), Cmd::Newline);
        editor.bind_sequence(
            KeyEvent::ctrl('C'),
            EventHandler::Conditional(Box::new(ClearOrInterrupt)),
        );
        if history.exists()
            && let Err(err) = editor.load_history(&history)
        {
            tracing::warn!(path = %history.display(), error = %err, "cannot read the chat history");
        }
        Ok(Self {
            editor: Some(editor),
            history,
            invocable,
        })
    }

    /// The skills and custom commands Tab completes from now on.
    pub fn offer(&self, invocable: Vec<Invocable>) {
        *self.invocable.lock() = invocable;
    }

    /// Reads a line at `prompt`; the terminal is the editor's until it returns.
    pub async fn read(&mut self, prompt: &str) -> anyhow::Result<Read> {
        let mut editor = self
            .editor
            .take()
            .context("the line editor is busy with another read")?;
        let prompt = prompt.to_owned();
        let (editor, read) = tokio::task::spawn_blocking(move || {
            let read = editor.readline(&prompt);
            (editor, read)
        })
        .await
        .context("the line editor stopped")?;
        self.editor = Some(editor);
        match read {
            Ok(line) => Ok(Read::Line(line)),
            Err(ReadlineError::Interrupted) => Ok(Read::Interrupted),
            Err(ReadlineError::Eof) => Ok(Read::Eof),
            Err(err) => Err(err).context("cannot read from the terminal"),
        }
    }

    /// Remembers a prompt in the history and writes the history file.
    pub fn remember(&mut self, line: &str) {
        let Some(editor) = self.editor.as_mut() else {
            return;
        };
        if let Err(err) = editor.add_history_entry(line) {
            tracing::warn!(error = %err, "cannot add to the chat history");
            return;
        }
        if let Err(err) = save(editor, &self.history) {
            tracing::warn!(path = %self.history.display(), error = %format!("{err:#}"), "cannot write the chat history");
        }
    }
}

fn save(editor: &mut Editor<Helper, FileHistory>, path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    editor.append_history(path).context("cannot append")?;
    Ok(())
}

/// What is typed while a run works (type-ahead). Echo is off meanwhile, so
/// the keys do not land in the middle of the reply; each line entered is read
/// whole as it comes (the terminal still collects lines itself), and what is
/// half typed when the run ends stays in the terminal's buffer, so it shows
/// at the next prompt, still being typed. A no-op when standard input is not
/// a terminal: then nothing is read ahead of the prompt.
pub struct TypeAhead {
    /// The terminal's settings before, put back when the run ends.
    saved: Option<nix::sys::termios::Termios>,
    /// Bytes of a line read without its end yet.
    partial: Vec<u8>,
}

impl TypeAhead {
    pub fn start() -> Self {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        if !std::io::IsTerminal::is_terminal(&stdin) {
            return Self {
                saved: None,
                partial: Vec::new(),
            };
        }
        let saved = tcgetattr(&stdin).ok().filter(|saved| {
            let mut quiet = saved.clone();
            quiet
                .local_flags
                .remove(LocalFlags::ECHO | LocalFlags::ECHONL);
            // Whole lines only: a line being typed is the terminal's until Enter.
            quiet.local_flags.insert(LocalFlags::ICANON);
            tcsetattr(&stdin, SetArg::TCSANOW, &quiet).is_ok()
        });
        Self {
            saved,
            partial: Vec::new(),
        }
    }

    /// Whether lines are read ahead (standard input is a terminal).
    pub fn is_active(&self) -> bool {
        self.saved.is_some()
    }

    /// The lines entered since the last call, without their line ends.
    pub fn lines(&mut self) -> Vec<String> {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        use std::os::fd::AsFd as _;
        let mut lines = Vec::new();
        if self.saved.is_none() {
            return lines;
        }
        let stdin = std::io::stdin();
        let mut buffer = [0u8; 4096];
        loop {
            let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::ZERO) {
                Ok(n) if n > 0 => {}
                _ => break,
            }
            // With a whole line waiting (the terminal is in line mode), one
            // read returns at most that line and never blocks.
            match nix::unistd::read(stdin.as_fd(), &mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.partial.extend_from_slice(&buffer[..n]),
            }
            while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.partial.drain(..=end).collect();
                let line = String::from_utf8_lossy(&line[..end]);
                lines.push(line.trim_end_matches('\r').to_owned());
            }
        }
        lines
    }
}

impl Drop for TypeAhead {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                &saved,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, kind: InvocableKind) -> Invocable {
        Invocable {
            name: name.into(),
            description: format!("does {name}"),
            hint: None,
            kind,
        }
    }

    #[test]
    fn skills_and_custom_commands_complete_beside_the_built_in_commands() {
        let helper = Helper::default();
        assert_eq!(helper.completions("/he"), ["/help"]);
        assert!(helper.completions("/sk").is_empty(), "no skill, no /skill");
        *helper.invocable.lock() = vec![
            item("pdf", InvocableKind::Skill),
            item("pr-review", InvocableKind::Command),
            item("skill-creator", InvocableKind::Skill),
        ];
        assert_eq!(helper.completions("/p"), ["/pdf", "/pr-review"]);
        assert_eq!(helper.completions("/sk"), ["/skill-creator", "/skill"]);
        // After `/skill `, the skills' names only.
        assert_eq!(
            helper.completions("/skill "),
            ["/skill pdf", "/skill skill-creator"]
        );
        assert_eq!(helper.completions("/skill p"), ["/skill pdf"]);
        assert!(helper.completions("/skill pdf now").is_empty());
        assert!(helper.completions("/pdf x").is_empty());
        assert!(helper.completions("pdf").is_empty());
    }

    #[test]
    fn a_trailing_backslash_joins_lines() {
        assert_eq!(joined("one\\\ntwo"), "one\ntwo");
        assert_eq!(joined("a\\b"), "a\\b");
    }
}
