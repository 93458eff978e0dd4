//! Shell line analysis: every command a shell line would run, for the policy.
//!
//! The policy matches rules against each simple command, so a rule for `rm`
//! must see the `rm` in `ls && sudo rm -rf ~` or in `echo $(rm x)`. brush-parser
//! does the parsing; this module walks its tree, re-parses code that only
//! exists as text (substitutions, `bash -c`, `eval`) and unwraps launchers
//! such as `sudo` or `xargs`. Whatever cannot be known statically is marked
//! dynamic or refused, so uncertainty always means "ask a person".

use brush_parser::ast::{
    self, CompoundCommand, CompoundList, ExtendedTestExpr, IoFileRedirectKind,
    IoFileRedirectTarget, IoRedirect,
};
use brush_parser::word::{self as bword, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions};
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
    /// In the order bash starts them: a substitution before the command using
    /// its output, a launcher (`sudo`, `bash -c`) before what it launches.
    pub commands: Vec<Command>,
    pub redirects: Vec<Redirect>,
}

#[derive(Debug, Clone, Error, PartialEq, Eq)]
#[error("cannot analyze the shell line: {0}")]
pub struct ShellParseError(pub String);

type Result<T> = std::result::Result<T, ShellParseError>;

fn fail(message: impl Into<String>) -> ShellParseError {
    ShellParseError(message.into())
}

/// How many times code may nest inside code (`$(...)`, `bash -c`, `eval`,
/// wrappers); real lines stay far below, hostile ones are cut off early.
const MAX_DEPTH: usize = 16;
/// brush-parser recurses once per nesting construct and cannot be told to
/// stop, so lines are charged for every character or keyword that could open
/// a level before brush sees them; the stack below is sized for this budget.
const MAX_NESTING: usize = 2000;
const STACK_BYTES: usize = 128 << 20;

/// Analyzes `line` as `bash -c line` would run it.
///
/// Runs on a stack segment of its own: brush-parser recursion is bounded only
/// by the nesting budget, which needs more stack than an async worker has
/// (`stacker` maps it for the call, far cheaper than a thread), and a panic
/// inside brush-parser becomes an error rather than taking the caller down.
pub fn analyze(line: &str) -> std::result::Result<ShellLine, ShellParseError> {
    if line.trim().is_empty() {
        return Err(fail("empty command line"));
    }
    let analyze = || {
        let mut analyzer = Analyzer::default();
        analyzer.code(line)?;
        let mut out = analyzer.out;
        if analyzer.hijacked {
            out.commands.iter_mut().for_each(|c| c.dynamic = true);
        }
        Ok(out)
    };
    stacker::grow(STACK_BYTES, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(analyze))
            .unwrap_or_else(|_| Err(fail("the shell parser failed on this line")))
    })
}

/// A word after quote removal.
#[derive(Debug, Clone)]
struct Word {
    /// The value when `literal`, the word as written otherwise.
    text: String,
    /// Whether `text` is exactly what the command receives (a leading `~` aside).
    literal: bool,
}

/// What a command runs besides itself.
enum Inner {
    /// Shell code given as text (`bash -c`, `eval`, `trap`, `alias`).
    Code(String),
    /// A command given as words (`sudo rm`, `xargs rm`, `find -exec rm`).
    Run(Vec<Word>),
    /// Code that is only known at run time.
    Unknown(String),
}

#[derive(Default)]
struct Analyzer {
    out: ShellLine,
    depth: usize,
    nesting: usize,
    /// Whether the line sets a variable that changes which program a name
    /// runs (`PATH=/tmp/x:$PATH ls`): then no command name means what it says.
    hijacked: bool,
}

/// Variables that decide what a command name runs or make bash run more code.
const HIJACKING_VARIABLES: &[&str] = &[
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_ENV",
    "ENV",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
];

fn hijacks(variable: &str) -> bool {
    HIJACKING_VARIABLES.contains(&variable) || variable.starts_with("BASH_FUNC_")
}

fn options() -> ParserOptions {
    ParserOptions::default()
}

impl Analyzer {
    fn deeper(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        if self.depth >= MAX_DEPTH {
            return Err(fail(format!(
                "commands nested more than {MAX_DEPTH} levels deep"
            )));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// Parses and walks shell code; code inside words goes through here again.
    fn code(&mut self, src: &str) -> Result<()> {
        self.nesting += nesting_cost(src);
        if self.nesting > MAX_NESTING {
            return Err(fail(format!(
                "more than {MAX_NESTING} nested constructs to analyze"
            )));
        }
        let program = Parser::new(src.as_bytes(), &options())
            .parse_program()
            .map_err(|e| fail(format!("syntax error: {e}")))?;
        program
            .complete_commands
            .iter()
            .try_for_each(|list| self.list(list))
    }

    fn list(&mut self, list: &CompoundList) -> Result<()> {
        for item in &list.0 {
            for (_, pipeline) in item.0.iter() {
                for command in &pipeline.seq {
                    self.command(command)?;
                }
            }
        }
        Ok(())
    }

    fn command(&mut self, command: &ast::Command) -> Result<()> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                self.compound(compound)?;
                self.redirects(redirects.as_ref())
            }
            // A body runs whenever the name is called, possibly as a later
            // command that looks harmless: count it as run.
            ast::Command::Function(function) => {
                self.compound(&function.body.0)?;
                self.redirects(function.body.1.as_ref())
            }
            ast::Command::ExtendedTest(test, redirects) => {
                self.test(&test.expr)?;
                self.redirects(redirects.as_ref())
            }
        }
    }

    fn compound(&mut self, compound: &CompoundCommand) -> Result<()> {
        match compound {
            CompoundCommand::Arithmetic(arith) => self.scan(&arith.expr.value),
            CompoundCommand::ArithmeticForClause(clause) => {
                let parts = [&clause.initializer, &clause.condition, &clause.updater];
                for expr in parts.into_iter().flatten() {
                    self.scan(&expr.value)?;
                }
                self.list(&clause.body.list)
            }
            CompoundCommand::BraceGroup(group) => self.list(&group.list),
            CompoundCommand::Subshell(subshell) => self.list(&subshell.list),
            CompoundCommand::ForClause(clause) => {
                for value in clause.values.iter().flatten() {
                    self.word(&value.value)?;
                }
                self.list(&clause.body.list)
            }
            CompoundCommand::CaseClause(clause) => {
                self.word(&clause.value.value)?;
                for case in &clause.cases {
                    for pattern in &case.patterns {
                        self.word(&pattern.value)?;
                    }
                    if let Some(list) = &case.cmd {
                        self.list(list)?;
                    }
                }
                Ok(())
            }
            CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition)?;
                self.list(&clause.then)?;
                for branch in clause.elses.iter().flatten() {
                    if let Some(condition) = &branch.condition {
                        self.list(condition)?;
                    }
                    self.list(&branch.body)?;
                }
                Ok(())
            }
            CompoundCommand::WhileClause(clause) | CompoundCommand::UntilClause(clause) => {
                self.list(&clause.0)?;
                self.list(&clause.1.list)
            }
            CompoundCommand::Coprocess(coproc) => self.command(&coproc.body),
        }
    }

    fn test(&mut self, expr: &ExtendedTestExpr) -> Result<()> {
        match expr {
            ExtendedTestExpr::And(a, b) | ExtendedTestExpr::Or(a, b) => {
                self.test(a)?;
                self.test(b)
            }
            ExtendedTestExpr::Not(e) | ExtendedTestExpr::Parenthesized(e) => self.test(e),
            ExtendedTestExpr::UnaryTest(_, w) => self.word(&w.value).map(drop),
            ExtendedTestExpr::BinaryTest(_, a, b) => {
                self.word(&a.value)?;
                self.word(&b.value).map(drop)
            }
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand) -> Result<()> {
        use ast::CommandPrefixOrSuffixItem as Item;
        let prefix = simple.prefix.iter().flat_map(|p| &p.0);
        let suffix = simple.suffix.iter().flat_map(|s| &s.0);
        let mut words = Vec::new();
        for item in prefix.clone() {
            // Leading assignments are not words, but `X=$(cmd)` runs cmd.
            if let Item::AssignmentWord(assignment, w) = item {
                let (ast::AssignmentName::VariableName(name)
                | ast::AssignmentName::ArrayElementName(name, _)) = &assignment.name;
                self.hijacked |= hijacks(name);
                self.word(&w.value)?;
            } else {
                self.item(item, &mut words)?;
            }
        }
        if let Some(name) = &simple.word_or_name {
            words.push(self.word(&name.value)?);
        }
        for item in suffix {
            if let Item::AssignmentWord(_, w) = item {
                words.push(self.word(&w.value)?);
            } else {
                self.item(item, &mut words)?;
            }
        }
        self.run(words)
    }

    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, words: &mut Vec<Word>) -> Result<()> {
        use ast::CommandPrefixOrSuffixItem as Item;
        match item {
            Item::IoRedirect(redirect) => self.redirect(redirect),
            Item::Word(w) | Item::AssignmentWord(_, w) => {
                words.push(self.word(&w.value)?);
                Ok(())
            }
            Item::ProcessSubstitution(kind, subshell) => {
                words.push(Word {
                    text: format!("{kind}({})", subshell.list),
                    literal: false,
                });
                self.deeper(|a| a.list(&subshell.list))
            }
        }
    }

    fn redirects(&mut self, list: Option<&ast::RedirectList>) -> Result<()> {
        list.iter()
            .flat_map(|l| &l.0)
            .try_for_each(|redirect| self.redirect(redirect))
    }

    fn redirect(&mut self, redirect: &IoRedirect) -> Result<()> {
        let (word, writes) = match redirect {
            IoRedirect::File(_, kind, target) => {
                let writes = !matches!(
                    kind,
                    IoFileRedirectKind::Read | IoFileRedirectKind::DuplicateInput
                );
                match target {
                    IoFileRedirectTarget::Filename(w) => (self.word(&w.value)?, writes),
                    IoFileRedirectTarget::Fd(_) => return Ok(()),
                    IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                        return self.deeper(|a| a.list(&subshell.list));
                    }
                    // `>&2` duplicates a descriptor, but `>&file` writes a file.
                    IoFileRedirectTarget::Duplicate(w) => {
                        let word = self.word(&w.value)?;
                        if word.literal && is_fd(&word.text) {
                            return Ok(());
                        }
                        (word, writes)
                    }
                }
            }
            IoRedirect::OutputAndError(w, _) => (self.word(&w.value)?, true),
            IoRedirect::HereString(_, w) => return self.word(&w.value).map(drop),
            IoRedirect::HereDocument(_, doc) => {
                if !doc.requires_expansion {
                    return Ok(());
                }
                let pieces = bword::parse_heredoc(&doc.doc.value, &options())
                    .map_err(|e| fail(format!("cannot parse a here-document: {e}")))?;
                return self.pieces(&doc.doc.value, &pieces, true, &mut Value::default());
            }
        };
        self.out.redirects.push(Redirect {
            target: word.text,
            writes,
        });
        Ok(())
    }

    /// Quote removal, and analysis of every substitution inside the word.
    fn word(&mut self, raw: &str) -> Result<Word> {
        let pieces = bword::parse(raw, &options())
            .map_err(|e| fail(format!("cannot parse the word {raw:?}: {e}")))?;
        let mut value = Value::default();
        self.pieces(raw, &pieces, false, &mut value)?;
        let literal = !value.expanded && !expands(&value.unquoted);
        let text = if literal { value.text } else { raw.to_owned() };
        Ok(Word { text, literal })
    }

    /// Finds substitutions in text that is expanded but is not a plain word
    /// (arithmetic, the inside of `${...}`). Quotes count as plain characters,
    /// which can only find more substitutions than bash would run.
    fn scan(&mut self, text: &str) -> Result<()> {
        if !text.contains(['$', '`']) {
            return Ok(());
        }
        let pieces = bword::parse_heredoc(text, &options())
            .map_err(|e| fail(format!("cannot parse the expansion {text:?}: {e}")))?;
        self.deeper(|a| a.pieces(text, &pieces, true, &mut Value::default()))
    }

    fn pieces(
        &mut self,
        src: &str,
        pieces: &[WordPieceWithSource],
        quoted: bool,
        value: &mut Value,
    ) -> Result<()> {
        for piece in pieces {
            let raw = src.get(piece.start_index..piece.end_index).unwrap_or("");
            match &piece.piece {
                WordPiece::Text(s) => {
                    value.text.push_str(s);
                    if !quoted {
                        value.unquoted.push_str(s);
                    }
                }
                WordPiece::SingleQuotedText(s) => value.text.push_str(s),
                WordPiece::AnsiCQuotedText(s) => {
                    value.expanded |= s.contains('\\');
                    value.text.push_str(s);
                }
                WordPiece::DoubleQuotedSequence(inner)
                | WordPiece::GettextDoubleQuotedSequence(inner) => {
                    self.pieces(src, inner, true, value)?;
                }
                WordPiece::TildeExpansion(_) => value.text.push_str(raw),
                WordPiece::EscapeSequence(s) => {
                    value.text.extend(s.chars().skip(1).filter(|c| *c != '\n'));
                }
                WordPiece::ParameterExpansion(_) => {
                    value.expanded = true;
                    if let Some(inner) = raw.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
                        self.scan(inner)?;
                    }
                }
                WordPiece::CommandSubstitution(code) => {
                    value.expanded = true;
                    self.nested(code)?;
                }
                WordPiece::BackquotedCommandSubstitution(_) => {
                    value.expanded = true;
                    let inner = raw.strip_prefix('`').and_then(|r| r.strip_suffix('`'));
                    self.nested(&unescape_backquoted(inner.unwrap_or("")))?;
                }
                WordPiece::ArithmeticExpression(expr) => {
                    value.expanded = true;
                    self.scan(&expr.value)?;
                }
            }
        }
        Ok(())
    }

    fn nested(&mut self, code: &str) -> Result<()> {
        if code.trim().is_empty() {
            return Ok(());
        }
        self.deeper(|a| a.code(code))
    }

    /// Records a command and what it runs in turn.
    fn run(&mut self, words: Vec<Word>) -> Result<()> {
        let Some(name) = words.first() else {
            return Ok(());
        };
        let args = &words[1..];
        // `env PATH=...`, `export LD_PRELOAD=...`, `declare BASH_ENV=...`
        let assigns = |w: &Word| w.text.split_once('=').is_some_and(|(v, _)| hijacks(v));
        self.hijacked |= args.iter().any(assigns);
        let mut dynamic = !name.literal;
        let mut inner = Vec::new();
        if name.literal {
            match basename(&name.text) {
                "eval" if args.iter().all(|w| w.literal) => inner.push(Inner::Code(join(args))),
                "eval" => dynamic = true,
                "source" | "." => dynamic = args.first().is_some_and(|w| !w.literal),
                "bash" | "sh" | "zsh" | "dash" | "ksh" => inner.extend(shell_code(args)),
                "trap" => match args.iter().find(|w| w.text != "--") {
                    Some(w) if !w.literal => dynamic = true,
                    Some(w) if !w.text.starts_with('-') && args.len() > 1 => {
                        inner.push(Inner::Code(w.text.clone()));
                    }
                    _ => {}
                },
                "alias" => {
                    for arg in args {
                        match arg.text.split_once('=') {
                            _ if !arg.literal => dynamic = true,
                            Some((_, code)) => inner.push(Inner::Code(code.to_owned())),
                            None => {}
                        }
                    }
                }
                "find" => inner.extend(find_exec(args)),
                other => inner.extend(wrapped(other, args)),
            }
        }
        let words = words.iter().map(|w| w.text.clone()).collect();
        self.out.commands.push(Command { words, dynamic });
        for run in inner {
            match run {
                Inner::Code(code) => self.nested(&code)?,
                Inner::Run(words) => self.deeper(|a| a.run(words))?,
                Inner::Unknown(text) => self.out.commands.push(Command {
                    words: vec![text],
                    dynamic: true,
                }),
            }
        }
        Ok(())
    }
}

/// A word's value as quote removal builds it.
#[derive(Default)]
struct Value {
    text: String,
    /// Whether some piece is only known at run time.
    expanded: bool,
    /// The unquoted text, where globs and braces would expand.
    unquoted: String,
}

/// Whether unquoted text would go through pathname or brace expansion.
fn expands(unquoted: &str) -> bool {
    let glob = unquoted.contains(['*', '?', '('])
        || unquoted
            .find('[')
            .is_some_and(|i| unquoted[i..].contains(']'));
    let brace = unquoted.contains('{')
        && unquoted.contains('}')
        && (unquoted.contains(',') || unquoted.contains(".."));
    glob || brace
}

fn is_fd(text: &str) -> bool {
    let digits = text.strip_suffix('-').unwrap_or(text);
    digits.chars().all(|c| c.is_ascii_digit())
}

fn basename(name: &str) -> &str {
    name.rsplit_once('/').map_or(name, |(_, base)| base)
}

/// Inside backquotes a backslash only escapes `$`, `` ` `` and `\`.
fn unescape_backquoted(inner: &str) -> String {
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match chars.peek() {
            Some(&next @ ('$' | '`' | '\\')) if c == '\\' => {
                out.push(next);
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

const NESTING_KEYWORDS: &[&str] = &[
    "if", "while", "until", "for", "case", "select", "function", "coproc", "time",
];

/// An upper bound of how deep brush-parser may recurse on `src`: every level
/// needs an opening bracket, a backquote, `!`, `&&`/`||` or a compound keyword.
fn nesting_cost(src: &str) -> usize {
    let joined = src.replace("\\\n", "");
    let brackets = joined
        .chars()
        .filter(|c| matches!(c, '(' | '{' | '[' | '`' | '!'))
        .count();
    let logic = joined.matches("&&").count() + joined.matches("||").count();
    let keywords = joined
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .filter(|w| NESTING_KEYWORDS.contains(w))
        .count();
    brackets + logic + keywords
}

/// The code of `bash -c CODE`, unknown when it is not literal or comes from
/// standard input (`curl ... | sh`); none for a script file.
fn shell_code(args: &[Word]) -> Option<Inner> {
    let (mut command, mut stdin, mut i) = (false, false, 0);
    while let Some(t) = args.get(i).filter(|w| w.literal).map(|w| w.text.as_str()) {
        if t == "--" || t == "-" {
            i += 1;
            break;
        } else if t.starts_with("--") {
            i += 1 + usize::from(matches!(t, "--rcfile" | "--init-file"));
        } else if t.len() > 1 && t.starts_with(['-', '+']) {
            command |= t.contains('c');
            stdin |= t.contains('s');
            i += 1 + usize::from(t.contains(['o', 'O']));
        } else {
            break;
        }
    }
    match args.get(i) {
        Some(code) if command && code.literal => Some(Inner::Code(code.text.clone())),
        Some(code) if command => Some(Inner::Unknown(code.text.clone())),
        None if command => None,
        Some(_) if !stdin => None,
        _ => Some(Inner::Unknown("<standard input>".into())),
    }
}

/// The commands of `find ... -exec CMD ;`.
fn find_exec(args: &[Word]) -> Vec<Inner> {
    let mut runs = Vec::new();
    let mut rest = args;
    while let Some(start) = rest.iter().position(|w| {
        w.literal && matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir")
    }) {
        rest = &rest[start + 1..];
        let end = rest
            .iter()
            .position(|w| w.literal && matches!(w.text.as_str(), ";" | "+"))
            .unwrap_or(rest.len());
        runs.push(Inner::Run(rest[..end].to_vec()));
        rest = &rest[end..];
    }
    runs
}

/// Commands that run the command in their remaining words: name, short
/// options taking a value, long options taking a separate value, whether
/// `NAME=value` words may come first, operands before the command.
#[rustfmt::skip]
const LAUNCHERS: &[(&str, &str, &str, bool, usize)] = &[
    ("sudo", "aCcDgpRrTtUu", "user group chdir prompt role type other-user close-from", true, 0),
    ("doas", "uC", "", false, 0),
    ("env", "uCS", "unset chdir split-string", true, 0),
    ("nice", "n", "adjustment", false, 0),
    ("timeout", "sk", "signal kill-after", false, 1),
    ("time", "fo", "format output", false, 0),
    ("exec", "a", "", false, 0),
    ("xargs", "adEILnPs", "arg-file delimiter max-lines max-args max-procs max-chars", false, 0),
    ("stdbuf", "ioe", "input output error", false, 0),
    ("nohup", "", "", false, 0),
    ("command", "", "", false, 0),
    ("builtin", "", "", false, 0),
];

/// The command a launcher runs, skipping its options the way getopt would.
fn wrapped(name: &str, args: &[Word]) -> Option<Inner> {
    let &(_, short, long_values, assignments, operands) = LAUNCHERS.iter().find(|l| l.0 == name)?;
    // `env -S STRING` splits STRING into a command line of its own.
    let unknown = || Some(Inner::Unknown(join(args)));
    let mut i = 0;
    while let Some(arg) = args.get(i).filter(|w| w.literal) {
        let t = arg.text.as_str();
        if t == "--" {
            i += 1;
            break;
        } else if let Some(long) = t.strip_prefix("--") {
            if name == "env" && long.starts_with("split-string") {
                return unknown();
            }
            i += 1 + usize::from(long_values.split(' ').any(|v| v == long));
        } else if let Some(cluster) = t.strip_prefix('-').filter(|c| !c.is_empty()) {
            i += 1;
            for (at, c) in cluster.char_indices() {
                if name == "env" && c == 'S' {
                    return unknown();
                }
                if short.contains(c) {
                    i += usize::from(at + c.len_utf8() == cluster.len());
                    break;
                }
            }
        } else if assignments && is_assignment(t) {
            i += 1;
        } else {
            break;
        }
    }
    let rest = args.get(i + operands..).unwrap_or_default();
    (!rest.is_empty()).then(|| Inner::Run(rest.to_vec()))
}

fn join(words: &[Word]) -> String {
    let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    texts.join(" ")
}

/// `env` and `sudo` take any `NAME=value` before the command, even names
/// bash would not accept (`BASH_FUNC_f%%=...`).
fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty())
}

/// A rule such as `git status` or `rm -rf`: matches a command whose words start with its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRule {
    pub words: Vec<String>,
}

/// Characters a rule cannot mean: rules compare plain words, so quoting,
/// operators, expansions and globs in a rule could only ever be a
/// misunderstanding that silently never matches.
const RULE_METACHARACTERS: &str = "|&;<>()$`\\\"'*?[]{}#";

impl CommandRule {
    pub fn parse(rule: &str) -> Result<Self> {
        let words: Vec<String> = rule.split_whitespace().map(str::to_owned).collect();
        if words.is_empty() {
            return Err(ShellParseError("an empty command rule".into()));
        }
        if let Some(c) = rule.chars().find(|c| RULE_METACHARACTERS.contains(*c)) {
            return Err(fail(format!(
                "the command rule {rule:?} contains {c:?}; rules match plain words, not shell syntax"
            )));
        }
        Ok(Self { words })
    }

    /// The command name matches by basename (`/usr/bin/rm` is `rm`) unless the
    /// rule names a path itself, which then must be the same path.
    pub fn matches(&self, command: &Command) -> bool {
        let (Some((rule_name, rule_args)), Some((name, args))) =
            (self.words.split_first(), command.words.split_first())
        else {
            return false;
        };
        let same_name = if rule_name.contains('/') {
            rule_name == name
        } else {
            rule_name == basename(name)
        };
        !command.dynamic
            && same_name
            && args.len() >= rule_args.len()
            && rule_args.iter().zip(args).all(|(a, b)| a == b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `words|split|like|this`, with a leading `?` for a dynamic command.
    fn cmd(spec: &str) -> Command {
        let (dynamic, spec) = spec.strip_prefix('?').map_or((false, spec), |s| (true, s));
        Command {
            words: spec.split('|').map(str::to_owned).collect(),
            dynamic,
        }
    }

    /// `>target` for a written file, `<target` for a read one.
    fn redirect(spec: &str) -> Redirect {
        let target = spec.get(1..).unwrap_or_default().to_owned();
        Redirect {
            target,
            writes: spec.starts_with('>'),
        }
    }

    #[test]
    #[allow(clippy::too_many_lines, reason = "a table of cases, one per line")]
    fn finds_every_command_and_redirect() {
        let cases: &[(&str, &[&str], &[&str])] = &[
            ("ls && rm -rf ~", &["ls", "rm|-rf|~"], &[]),
            (
                "cat a | grep b; echo c",
                &["cat|a", "grep|b", "echo|c"],
                &[],
            ),
            (
                "echo $(curl -s http://x) > out.txt",
                &["curl|-s|http://x", "echo|$(curl -s http://x)"],
                &[">out.txt"],
            ),
            ("echo `whoami`", &["whoami", "echo|`whoami`"], &[]),
            ("echo `\\$C x`", &["?$C|x", "echo|`\\$C x`"], &[]),
            ("x $(a $(b))", &["b", "a|$(b)", "x|$(a $(b))"], &[]),
            ("FOO=1 cargo test", &["cargo|test"], &[]),
            ("X=$(id) true", &["id", "true"], &[]),
            ("sudo rm -rf /", &["sudo|rm|-rf|/", "rm|-rf|/"], &[]),
            (
                "sudo -u root -E env A=1 -u B /bin/rm x",
                &[
                    "sudo|-u|root|-E|env|A=1|-u|B|/bin/rm|x",
                    "env|A=1|-u|B|/bin/rm|x",
                    "/bin/rm|x",
                ],
                &[],
            ),
            ("xargs rm < list", &["xargs|rm", "rm"], &["<list"]),
            (
                "xargs -n1 -I {} rm {}",
                &["xargs|-n1|-I|{}|rm|{}", "rm|{}"],
                &[],
            ),
            (
                "timeout -s KILL 5 make",
                &["timeout|-s|KILL|5|make", "make"],
                &[],
            ),
            (
                "nice -n 5 nohup make",
                &["nice|-n|5|nohup|make", "nohup|make", "make"],
                &[],
            ),
            (
                "env -i -S 'rm x' y",
                &["env|-i|-S|rm x|y", "?-i -S rm x y"],
                &[],
            ),
            (
                "find . -name '*.o' -exec rm {} \\;",
                &["find|.|-name|*.o|-exec|rm|{}|;", "rm|{}"],
                &[],
            ),
            (
                "bash -c 'rm -rf /tmp/x > log'",
                &["bash|-c|rm -rf /tmp/x > log", "rm|-rf|/tmp/x"],
                &[">log"],
            ),
            ("sh -ec \"$X\"", &["sh|-ec|\"$X\"", "?\"$X\""], &[]),
            ("curl x | sh", &["curl|x", "sh", "?<standard input>"], &[]),
            ("bash build.sh", &["bash|build.sh"], &[]),
            ("eval \"rm -rf x\"", &["eval|rm -rf x", "rm|-rf|x"], &[]),
            ("eval \"$X\"", &["?eval|\"$X\""], &[]),
            ("source \"$F\"", &["?source|\"$F\""], &[]),
            (
                "trap 'rm -f t' EXIT",
                &["trap|rm -f t|EXIT", "rm|-f|t"],
                &[],
            ),
            ("alias x='rm -rf /'", &["alias|x=rm -rf /", "rm|-rf|/"], &[]),
            ("$CMD arg", &["?$CMD|arg"], &[]),
            (
                "$(which rm) -rf /",
                &["which|rm", "?$(which rm)|-rf|/"],
                &[],
            ),
            ("r* x; {rm,-rf,/}", &["?r*|x", "?{rm,-rf,/}"], &[]),
            ("if true; then rm x; fi", &["true", "rm|x"], &[]),
            (
                "while read l; do echo \"$l\"; done < f",
                &["read|l", "echo|\"$l\""],
                &["<f"],
            ),
            (
                "for f in $(ls); do cat \"$f\"; done",
                &["ls", "cat|\"$f\""],
                &[],
            ),
            (
                "for ((i=0; i<$(nproc); i++)); do :; done",
                &["nproc", ":"],
                &[],
            ),
            ("case $x in a) rm a;; *) ls;; esac", &["rm|a", "ls"], &[]),
            ("(cd x && make)", &["cd|x", "make"], &[]),
            ("{ a; b; } > o", &["a", "b"], &[">o"]),
            ("f() { rm x; }; f", &["rm|x", "f"], &[]),
            ("echo x 2>&1 >/dev/null", &["echo|x"], &[">/dev/null"]),
            (
                "a >> l 2>e &>b >|c <>d >&f <&0",
                &["a"],
                &[">l", ">e", ">b", ">c", ">d", ">f"],
            ),
            ("cat <(ls) > >(wc)", &["ls", "wc", "cat|<(ls)"], &[]),
            ("echo 'a b' \"c d\" \\$x $'e'", &["echo|a b|c d|$x|e"], &[]),
            (
                "echo \"$(date)\" ${X:-$(id)} $((1 + $(nproc)))",
                &[
                    "date",
                    "id",
                    "nproc",
                    "echo|\"$(date)\"|${X:-$(id)}|$((1 + $(nproc)))",
                ],
                &[],
            ),
            (
                "cat <<< \"$(id)\" <<EOF\n$(whoami)\nEOF",
                &["id", "whoami", "cat"],
                &[],
            ),
            ("cat <<'EOF'\n$(whoami)\nEOF", &["cat"], &[]),
            (
                "[[ $x =~ ^[a-z]+$ ]] || [[ -n `id` ]] && (( $(nproc) > 1 ))",
                &["id", "nproc"],
                &[],
            ),
            ("# just a comment", &[], &[]),
            ("PATH=/tmp/x:$PATH ls", &["?ls"], &[]),
            (
                "export LD_PRELOAD=/tmp/x.so; ls",
                &["?export|LD_PRELOAD=/tmp/x.so", "?ls"],
                &[],
            ),
            (
                "env BASH_FUNC_ls%%='() { id; }' bash",
                &[
                    "?env|BASH_FUNC_ls%%=() { id; }|bash",
                    "?bash",
                    "?<standard input>",
                ],
                &[],
            ),
        ];
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|(input, commands, redirects)| {
                let commands = commands.iter().map(|c| cmd(c)).collect();
                let redirects = redirects.iter().map(|r| redirect(r)).collect();
                let want = Ok(ShellLine {
                    commands,
                    redirects,
                });
                let got = analyze(input);
                (got != want).then(|| format!("{input}\n  got {got:?}\n want {want:?}"))
            })
            .collect();
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn refuses_what_it_cannot_analyze() {
        let deep =
            |open: &str, n: usize, close: &str| format!("{}x{}", open.repeat(n), close.repeat(n));
        let cases = [
            (
                "echo \"abc".to_owned(),
                "syntax error: unterminated double quote",
            ),
            ("echo $(ls".to_owned(), "syntax error"),
            ("if true; then".to_owned(), "syntax error"),
            ("bash -c 'echo \"x'".to_owned(), "unterminated double quote"),
            (String::new(), "empty command line"),
            (" \n\t".to_owned(), "empty command line"),
            (deep("echo $(", 20, ")"), "more than 16 levels deep"),
            (deep("echo ${x:-", 20, "}"), "more than 16 levels deep"),
            (deep("sudo ", 40, ""), "more than 16 levels deep"),
            (deep("$(", 100_000, ")"), "more than 2000 nested constructs"),
            (
                deep("if a; then ", 5000, "; fi"),
                "more than 2000 nested constructs",
            ),
        ];
        for (input, message) in cases {
            match analyze(&input) {
                Err(ShellParseError(text)) => {
                    assert!(text.contains(message), "{input:.40}: {text}")
                }
                Ok(parsed) => panic!("{input:.40} analyzed as {parsed:?}"),
            }
        }
    }

    /// The analysis stack must hold whatever the nesting budget lets through.
    #[test]
    fn survives_nesting_up_to_the_budget() {
        let n = MAX_NESTING - 2;
        let lines = [
            format!("{}x{}", "if a; then ".repeat(n), "; fi".repeat(n)),
            format!("{}x{}", "case x in a) ".repeat(n), ";; esac".repeat(n)),
            format!("{}x{}", "{ ".repeat(n), "; }".repeat(n)),
            format!("echo {}x{}", "\"$(".repeat(n), ")\"".repeat(n)),
            format!("echo {}x{}", "${a:-".repeat(n), "}".repeat(n)),
            format!("[[ {}x ]]", "! ".repeat(n)),
        ];
        for input in lines {
            let _ = analyze(&input);
        }
    }

    #[test]
    fn rules_match_by_name_and_leading_words() {
        let cases = [
            ("git status", "git|status|-s", true),
            ("git status", "git|push", false),
            ("git status", "git", false),
            ("rm", "/bin/rm|-rf|x", true),
            ("rm -rf", "rm|-r|x", false),
            ("/bin/rm", "rm|x", false),
            ("/bin/rm", "/bin/rm|x", true),
            ("rm", "?rm|x", false),
            ("ls", "?$CMD", false),
        ];
        for (rule, command, expected) in cases {
            let rule = CommandRule::parse(rule).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                rule.matches(&cmd(command)),
                expected,
                "{rule:?} vs {command}"
            );
        }
    }

    #[test]
    fn rules_refuse_shell_syntax() {
        for rule in [
            "ls | grep",
            "rm *",
            "echo $HOME",
            "git commit -m 'x'",
            "a;b",
            " ",
        ] {
            assert!(CommandRule::parse(rule).is_err(), "{rule}");
        }
        let rule = CommandRule::parse("  cargo   test ").map(|r| r.words);
        assert_eq!(rule, Ok(vec!["cargo".to_owned(), "test".to_owned()]));
    }
}
