//! Shell line analysis: every command a shell line would run, for the policy.

use thiserror::Error;

/// One simple command the line would run, after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The words, quotes removed. A word whose value is only known at run time
    /// (`$VAR`, `$(...)`, globs) is kept as written.
    pub words: Vec<String>,
    /// Whether the command name itself is only known at run time (`$cmd args`,
    /// `eval`, `exec` of a variable...): such a command matches no rule.
    pub dynamic: bool,
}

/// A file redirection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redirect {
    /// The target as written (quotes removed).
    pub target: String,
    /// `>`, `>>`, `&>`, `>|`, `<>`: the target is written.
    pub writes: bool,
}

/// Everything a line would run and every file it redirects to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellLine {
    pub commands: Vec<Command>,
    pub redirects: Vec<Redirect>,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("cannot analyze the shell line: {0}")]
pub struct ShellParseError(pub String);

/// Analyzes a line. Not yet implemented: every line is unparseable.
pub fn analyze(line: &str) -> Result<ShellLine, ShellParseError> {
    Err(ShellParseError(format!(
        "shell analysis is not available for {line:?}"
    )))
}

/// A rule such as `git status` or `rm -rf`: matches a command whose words start with its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRule {
    pub words: Vec<String>,
}

impl CommandRule {
    pub fn parse(rule: &str) -> Result<Self, ShellParseError> {
        let words: Vec<String> = rule.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(ShellParseError("an empty command rule".into()));
        }
        Ok(Self { words })
    }

    pub fn matches(&self, command: &Command) -> bool {
        !command.dynamic
            && command.words.len() >= self.words.len()
            && self.words.iter().zip(&command.words).all(|(a, b)| a == b)
    }
}
