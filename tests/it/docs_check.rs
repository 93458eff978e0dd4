//! The docs checker: what README.md, the documents in `docs/` and the
//! editors' and schema's READMEs name exists. Every `pincer …` command line
//! (code blocks, code spans, an editor entry's `"args"`) is checked against
//! the real binary's `-h`, subcommand by subcommand and flag by flag, with
//! the values a flag lists; every HTTP route (`GET /v1/runs/{run_id}`, a URL
//! on port 8787, a bare `/v1/…` path) against the server's route table; every
//! slash command against the faces' command tables; every relative link
//! against the files, and its `#fragment` against the target's headings as
//! GitHub makes anchors; a crate's version against `Cargo.lock`. Prose is
//! read loosely (placeholders such as `ID`, `ses_…`, `$RUN`, `{id}`,
//! `[--json]` and `a|b` alternatives are understood); whatever does not
//! exist is reported with its file and line.
//! `checker_reports_what_does_not_exist` proves it on a made-up document.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::LazyLock;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
use regex::Regex;

use crate::support::BIN;

/// Something a document names that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    file: String,
    line: usize,
    what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The documents a person reads: the READMEs and `docs/*.md`.
fn documents() -> Vec<PathBuf> {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("schema/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    let mut editors: Vec<PathBuf> = std::fs::read_dir(root.join("editors"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("README.md"))
        .filter(|path| path.exists())
        .collect();
    editors.sort();
    files.extend(editors);
    files
}

// ---------------------------------------------------------------------------
// The command line, as the binary's `-h` describes it.

/// What `pincer PATH -h` says a command takes.
#[derive(Debug, Default)]
struct Help {
    subcommands: Vec<String>,
    options: Vec<Opt>,
    positionals: Vec<Positional>,
}

#[derive(Debug)]
struct Opt {
    long: Option<String>,
    short: Option<char>,
    takes: Takes,
    /// `[possible values: …]`, when the help lists them.
    possible: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    Value,
    /// `--http [<ADDR>]`: a value when one follows.
    MaybeValue,
}

#[derive(Debug)]
struct Positional {
    variadic: bool,
    possible: Vec<String>,
}

static POSSIBLE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\[possible values: ([^\]]+)\]").unwrap());
static OPTION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\s+(?:-(?P<short>\w))?(?:, )?(?:--(?P<long>[A-Za-z0-9][\w-]*))?(?:\.\.\.)?(?P<value> \[?<)?")
        .unwrap()
});
static ARGUMENT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^  [<\[][\w-]+[>\]](?P<variadic>\.\.\.)?").unwrap());

/// Reads clap's short help (`-h`): its Commands, Arguments and Options.
fn parse_help(text: &str) -> Help {
    #[derive(Clone, Copy, PartialEq)]
    enum Section {
        Other,
        Commands,
        Arguments,
        Options,
    }
    // Each entry with its continuation lines joined, per section.
    let mut entries: Vec<(Section, String)> = Vec::new();
    let mut section = Section::Other;
    for line in text.lines() {
        if !line.starts_with(' ') {
            section = match line {
                "Commands:" => Section::Commands,
                "Arguments:" => Section::Arguments,
                "Options:" => Section::Options,
                _ => Section::Other,
            };
            continue;
        }
        let starts = match section {
            Section::Other => continue,
            Section::Commands | Section::Arguments => {
                line.starts_with("  ") && !line[2..].starts_with(' ')
            }
            Section::Options => line.starts_with("  -") || line.starts_with("      --"),
        };
        match entries.last_mut() {
            Some((_, entry)) if !starts => {
                entry.push(' ');
                entry.push_str(line.trim());
            }
            _ => entries.push((section, line.to_owned())),
        }
    }
    let possible = |entry: &str| -> Vec<String> {
        POSSIBLE
            .captures(entry)
            .map(|c| c[1].split(", ").map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let mut help = Help::default();
    for (section, entry) in entries {
        match section {
            Section::Other => {}
            Section::Commands => {
                let name = entry.split_whitespace().next().unwrap_or_default();
                if name != "help" {
                    help.subcommands.push(name.to_owned());
                }
            }
            Section::Arguments => {
                let found = ARGUMENT
                    .captures(&entry)
                    .unwrap_or_else(|| panic!("an argument clap's help did not show so: {entry}"));
                help.positionals.push(Positional {
                    variadic: found.name("variadic").is_some(),
                    possible: possible(&entry),
                });
            }
            Section::Options => {
                let found = OPTION.captures(&entry).unwrap();
                let takes = match found.name("value").map(|m| m.as_str()) {
                    Some(" [<") => Takes::MaybeValue,
                    Some(_) => Takes::Value,
                    None => Takes::Nothing,
                };
                help.options.push(Opt {
                    long: found.name("long").map(|m| m.as_str().to_owned()),
                    short: found.name("short").and_then(|m| m.as_str().chars().next()),
                    takes,
                    possible: possible(&entry),
                });
            }
        }
    }
    help
}

/// The real binary's command line, read from `pincer … -h` as needed.
struct Cli {
    helps: RefCell<HashMap<Vec<String>, Option<Rc<Help>>>>,
}

impl Cli {
    fn new() -> Self {
        Self {
            helps: RefCell::new(HashMap::new()),
        }
    }

    /// `pincer PATH -h`, read; `None` when there is no such command (hidden
    /// commands, which `-h` does not list, are found so too).
    fn help(&self, path: &[String]) -> Option<Rc<Help>> {
        if let Some(help) = self.helps.borrow().get(path) {
            return help.clone();
        }
        let out = Command::new(BIN).args(path).arg("-h").output().unwrap();
        let help = out
            .status
            .success()
            .then(|| Rc::new(parse_help(&String::from_utf8_lossy(&out.stdout))));
        self.helps.borrow_mut().insert(path.to_vec(), help.clone());
        help
    }

    /// Whether `args` (what follows `pincer`) is a command line the binary
    /// takes; the reason when not.
    fn check(&self, args: &[Word]) -> Result<(), String> {
        let mut path: Vec<String> = Vec::new();
        let mut help = self.help(&path).ok_or("`pincer -h` fails")?;
        let shown = |path: &[String]| {
            std::iter::once("pincer")
                .chain(path.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let mut positionals = 0;
        let mut words = args.iter().peekable();
        while let Some(word) = words.next() {
            let text = word.notation();
            if !word.quoted && text.split('|').all(|a| a.is_empty() || elided(a)) {
                continue;
            }
            // `--tag T …|--no-tags`: what is left out is no alternative.
            let kept: String;
            let text: &str = if word.quoted {
                text
            } else {
                kept = text
                    .split('|')
                    .filter(|a| !a.is_empty() && !elided(a))
                    .collect::<Vec<_>>()
                    .join("|");
                &kept
            };
            if !word.quoted && text == "--" {
                break; // the rest is positional, as the shell gives it
            }
            if !word.quoted && text.starts_with('-') && text.len() > 1 {
                let alternatives: Vec<&str> = text.split('|').collect();
                let mut last = None;
                for alternative in &alternatives {
                    let (name, inline) = match alternative.split_once('=') {
                        Some((name, value)) => (name, Some(value)),
                        None => (*alternative, None),
                    };
                    let options = find_options(&help, name)
                        .map_err(|flag| format!("`{}` has no option {flag}", shown(&path)))?;
                    let option = options.last().copied();
                    if let (Some(value), Some(option)) = (inline, option) {
                        check_one_of(value, &option.possible, name)?;
                    } else {
                        last = option.map(|o| (o, name));
                    }
                }
                if let (Some((option, name)), 1) = (last, alternatives.len()) {
                    let next = words.peek().map(|w| (w.quoted, w.notation()));
                    let consume = match option.takes {
                        Takes::Nothing => false,
                        Takes::Value => next.is_some(),
                        Takes::MaybeValue => {
                            next.is_some_and(|(quoted, t)| quoted || !t.starts_with('-'))
                        }
                    };
                    if consume {
                        let value = words.next().unwrap();
                        if !value.quoted {
                            check_one_of(value.notation(), &option.possible, name)?;
                        }
                    }
                }
                continue;
            }
            if !help.subcommands.is_empty() && help.positionals.is_empty() {
                let alternatives: Vec<&str> = text.split('|').collect();
                for alternative in &alternatives {
                    let mut sub = path.clone();
                    sub.push((*alternative).to_owned());
                    if self.help(&sub).is_none() {
                        return Err(format!(
                            "`{}` has no subcommand {alternative}",
                            shown(&path)
                        ));
                    }
                }
                path.push(alternatives[0].to_owned());
                help = self.help(&path).unwrap();
                continue;
            }
            let slot = help
                .positionals
                .get(positionals)
                .or_else(|| help.positionals.last().filter(|last| last.variadic));
            let Some(slot) = slot else {
                return Err(format!(
                    "`{}` takes {} argument(s); {text:?} is one more",
                    shown(&path),
                    help.positionals.len()
                ));
            };
            if !word.quoted {
                check_one_of(text, &slot.possible, &format!("`{}`", shown(&path)))?;
            }
            positionals += 1;
        }
        Ok(())
    }

    /// Every flag some command takes: `--json`, `-v`.
    fn every_flag(&self) -> BTreeSet<String> {
        let mut flags = BTreeSet::new();
        let mut todo: Vec<Vec<String>> = vec![Vec::new()];
        while let Some(path) = todo.pop() {
            let help = self.help(&path).unwrap();
            for option in &help.options {
                flags.extend(option.long.iter().map(|l| format!("--{l}")));
                flags.extend(option.short.iter().map(|c| format!("-{c}")));
            }
            for sub in &help.subcommands {
                let mut next = path.clone();
                next.push(sub.clone());
                todo.push(next);
            }
        }
        flags
    }
}

/// The options a flag word names: `--json`, or each letter of `-vv`; the
/// unknown flag when one is not there.
fn find_options<'a>(help: &'a Help, flag: &str) -> Result<Vec<&'a Opt>, String> {
    if let Some(long) = flag.strip_prefix("--") {
        return help
            .options
            .iter()
            .find(|o| o.long.as_deref() == Some(long))
            .map(|o| vec![o])
            .ok_or_else(|| flag.to_owned());
    }
    flag.trim_start_matches('-')
        .chars()
        .map(|c| {
            help.options
                .iter()
                .find(|o| o.short == Some(c))
                .ok_or_else(|| format!("-{c}"))
        })
        .collect()
}

/// A literal value (`jsonl`, `never|reads|all`) is one the help lists, when
/// it lists them; a placeholder (`FILE`, `ses_…`) is anything.
fn check_one_of(value: &str, possible: &[String], what: &str) -> Result<(), String> {
    static LITERAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[a-z][a-z0-9_-]*$").unwrap());
    if possible.is_empty() {
        return Ok(());
    }
    for alternative in value.split('|') {
        if LITERAL.is_match(alternative) && !possible.iter().any(|p| p == alternative) {
            return Err(format!(
                "{alternative} is not a value {what} takes ({})",
                possible.join(", ")
            ));
        }
    }
    Ok(())
}

/// `…`, `...`: something left out.
fn elided(text: &str) -> bool {
    !text.is_empty() && text.chars().all(|c| c == '…' || c == '.')
}

/// A word of a command line, as a shell splits it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    /// Some of it was quoted: a value, never a flag or doc notation.
    quoted: bool,
    /// `|`, `&&`, `>` …: what ends a command.
    operator: bool,
}

impl Word {
    /// The word without the brackets of doc notation (`[--json]`, `(ID)`).
    fn notation(&self) -> &str {
        if self.quoted {
            return &self.text;
        }
        self.text
            .trim_start_matches(['[', '('])
            .trim_end_matches([']', ')', ','])
    }
}

/// A line split as a shell would, up to a `#` comment.
fn shell_words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else { break };
        if first == '#' {
            break;
        }
        if "|&;<>".contains(first) {
            let mut text = String::new();
            while let Some(c) = chars.next_if(|c| "|&;<>".contains(*c)) {
                text.push(c);
            }
            words.push(Word {
                text,
                quoted: false,
                operator: true,
            });
            continue;
        }
        let mut word = Word {
            text: String::new(),
            quoted: false,
            operator: false,
        };
        while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
            match c {
                '"' | '\'' => {
                    word.quoted = true;
                    while let Some(inner) = chars.next() {
                        match inner {
                            q if q == c => break,
                            '\\' if c == '"' => word.text.extend(chars.next()),
                            other => word.text.push(other),
                        }
                    }
                }
                '\\' => word.text.extend(chars.next()),
                '>' if word.text.chars().all(|d| d.is_ascii_digit()) && !word.quoted => {
                    // `2>/dev/null`: a redirection, which ends the command.
                    word.operator = true;
                    word.text.push(c);
                }
                other => word.text.push(other),
            }
        }
        words.push(word);
    }
    words
}

/// The `pincer` command lines in one line of shell: each one's words after
/// `pincer` (or after `cargo run … --`).
fn invocations(line: &str) -> Vec<Vec<Word>> {
    static ASSIGNMENT: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*=").unwrap());
    let words = shell_words(line);
    let mut found = Vec::new();
    for command in words.split(|w| w.operator) {
        let mut rest = command;
        while let [first, tail @ ..] = rest {
            if !first.quoted && (first.text == "$" || ASSIGNMENT.is_match(&first.text)) {
                rest = tail;
            } else {
                break;
            }
        }
        match rest {
            [program, args @ ..]
                if !program.quoted
                    && (program.text == "pincer"
                        // A path to the binary; `/pincer` alone is Slack's app command.
                        || (program.text.ends_with("/pincer") && program.text != "/pincer")) =>
            {
                found.push(args.to_vec());
            }
            [cargo, run, args @ ..] if cargo.text == "cargo" && run.text == "run" => {
                if let Some(dashes) = args.iter().position(|w| w.text == "--" && !w.quoted) {
                    found.push(args[dashes + 1..].to_vec());
                }
            }
            _ => {}
        }
    }
    found
}

// ---------------------------------------------------------------------------
// HTTP routes.

/// What a document's path meets in the route table.
struct Routes {
    /// (method, template) of every route the server answers.
    table: Vec<(String, &'static str)>,
}

/// Other servers' routes the documents name: the providers Pincer calls
/// (and asks for their context window), a webhook receiver. Not Pincer's,
/// not checked.
const FOREIGN_ROUTES: &[&str] = &[
    "/",                    // a chat channel's webhook receiver (docs/channels.md)
    "/v1",                  // the path OpenAI-compatible base URLs end in
    "/models",              // OpenAI-compatible servers, under the base URL
    "/embeddings",          // OpenAI-compatible servers, under the base URL
    "/v1/models",           // OpenAI-compatible servers, vLLM's `max_model_len`
    "/v1/chat/completions", // OpenAI-compatible servers
    "/v1/embeddings",       // OpenAI-compatible servers
    "/v1/messages",         // Anthropic
    "/props",               // llama.cpp's server: its context size
    "/api/show",            // Ollama: a model's context length
    "/api/ps",              // Ollama: the context a loaded model has
    "/api/v0/models",       // LM Studio: its models' context lengths
];

impl Routes {
    fn new() -> Self {
        Self {
            table: pincer::http::routes::paths()
                .into_iter()
                .chain(pincer::http::console::paths())
                .map(|(method, path)| (method.to_ascii_uppercase(), path))
                .collect(),
        }
    }

    /// Whether `path` (a document's spelling) is a route, with `method` when
    /// given; the reason when not.
    fn check(&self, method: Option<&str>, path: &str) -> Result<(), String> {
        let path = normalize_route(path);
        if FOREIGN_ROUTES.contains(&path.as_str()) {
            return Ok(());
        }
        let matching: Vec<&(String, &str)> = self
            .table
            .iter()
            .filter(|(_, template)| route_matches(template, &path))
            .collect();
        if matching.is_empty() {
            return Err(format!("no route {path}"));
        }
        match method {
            Some(method) if !matching.iter().any(|(m, _)| m == method) => {
                let methods: Vec<&str> = matching.iter().map(|(m, _)| m.as_str()).collect();
                Err(format!(
                    "{method} {path}: the route answers {}",
                    methods.join(", ")
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A path as the route table spells it: no query, no trailing punctuation.
fn normalize_route(path: &str) -> String {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let path = path.trim_end_matches(['.', ',', ':', ';', '*', '`']);
    if path.len() > 1 {
        path.trim_end_matches('/').to_owned()
    } else {
        path.to_owned()
    }
}

/// A document's path against a template: literal segments equal, a
/// `{param}` taken by a placeholder in any spelling (`{id}`, `:id`, `$RUN`,
/// `SESSION`, `ses_…`, `run_01H…`), never by a plain word.
fn route_matches(template: &str, path: &str) -> bool {
    static PLACEHOLDER: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(\{[^}]+\}|:\w+|\$\{?\w+\}?|[A-Z][A-Z0-9_]*|[a-z]+_\S+|.*(…|\.\.\.).*)$")
            .unwrap()
    });
    let template: Vec<&str> = template.split('/').collect();
    let path: Vec<&str> = path.split('/').collect();
    template.len() == path.len()
        && template.iter().zip(&path).all(|(t, p)| {
            if t.starts_with('{') {
                PLACEHOLDER.is_match(p)
            } else {
                t == p
            }
        })
}

static ROUTE_WITH_METHOD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b(GET|POST|PUT|PATCH|DELETE|HEAD)\s+`?(/[^\s`'"),\]]*)"#).unwrap()
});
static URL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\b(?:https?|wss?)://([^/\s`'"),\]]+)(/[^\s`'"),\]]*)?"#).unwrap()
});
static BARE_ROUTE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?:^|[\s`(\"'])(/v1/[^\s`'"),\]]*)"#).unwrap());

/// The routes one line names: `METHOD /path`, a URL of Pincer's default
/// address (port 8787) and a bare `/v1/…` path; each with its method when
/// named.
fn routes_in(line: &str) -> Vec<(Option<String>, String)> {
    let mut found = Vec::new();
    let mut taken: Vec<Range<usize>> = Vec::new();
    for c in ROUTE_WITH_METHOD.captures_iter(line) {
        let path = c.get(2).unwrap();
        taken.push(path.range());
        found.push((Some(c[1].to_owned()), path.as_str().to_owned()));
    }
    for c in URL.captures_iter(line) {
        let whole = c.get(0).unwrap();
        taken.push(whole.range());
        if c[1].ends_with(":8787") {
            let path = c.get(2).map_or("/", |m| m.as_str());
            found.push((None, path.to_owned()));
        }
    }
    for c in BARE_ROUTE.captures_iter(line) {
        let path = c.get(1).unwrap();
        if !taken.iter().any(|t| t.contains(&path.start())) {
            found.push((None, path.as_str().to_owned()));
        }
    }
    found
}

// ---------------------------------------------------------------------------
// Slash commands.

/// The slash commands each face takes: the ACP face those `core::slash`
/// lists; the terminal those and its own (`src/terminal/editor.rs`); the chat
/// channels theirs (`src/channels/hub/commands.rs`) and the session commands. The
/// terminal's and the channels' tables are private: read from their sources.
struct SlashCommands {
    acp: BTreeSet<String>,
    terminal: BTreeSet<String>,
    channels: BTreeSet<String>,
}

impl SlashCommands {
    fn new() -> Self {
        let acp: BTreeSet<String> = pincer::core::slash::COMMANDS
            .iter()
            .map(|(name, _, _)| (*name).to_owned())
            .collect();
        let source = std::fs::read_to_string(root().join("src/terminal/editor.rs")).unwrap();
        let table = source
            .split("TERMINAL_COMMANDS")
            .nth(1)
            .and_then(|rest| rest.split("];").next())
            .expect("src/terminal/editor.rs has TERMINAL_COMMANDS");
        let entry = Regex::new(r#"\("(\w+)","#).unwrap();
        let mut terminal = acp.clone();
        terminal.extend(entry.captures_iter(table).map(|c| c[1].to_owned()));
        let hub = std::fs::read_to_string(root().join("src/channels/hub/commands.rs")).unwrap();
        let arm = Regex::new(r#""/(\w+)"\s*(?:\||=>)"#).unwrap();
        let mut channels: BTreeSet<String> =
            arm.captures_iter(&hub).map(|c| c[1].to_owned()).collect();
        channels.extend(
            acp.iter()
                .filter(|name| {
                    matches!(
                        pincer::core::slash::parse_text(&format!("/{name}")),
                        Some(pincer::core::slash::SlashCommand::Queued(_))
                    )
                })
                .cloned(),
        );
        assert!(
            terminal.contains("quit") && channels.contains("pair") && channels.contains("undo"),
            "the slash command tables moved: {terminal:?} {channels:?}"
        );
        Self {
            acp,
            terminal,
            channels,
        }
    }

    fn all(&self) -> BTreeSet<String> {
        let mut all = self.terminal.clone();
        all.extend(self.channels.iter().cloned());
        all
    }
}

/// The `/name`s a section's table rows start with.
fn table_commands(text: &str, heading: &str) -> BTreeSet<String> {
    let section = text
        .split(&format!("\n{heading}\n"))
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or_else(|| panic!("no section {heading}"));
    let first = Regex::new(r"^\| `/(\w+)").unwrap();
    let more = Regex::new(r"`/(\w+)").unwrap();
    let mut names = BTreeSet::new();
    for line in section.lines() {
        if first.is_match(line) {
            // The first cell: `/quit`, `/exit`; `/help` (`/start`).
            let cell = line.split(" | ").next().unwrap_or_default();
            names.extend(more.captures_iter(cell).map(|c| c[1].to_owned()));
        }
    }
    names
}

/// Names written `/name` in a code span that are no slash command of
/// Pincer's, no route and no system directory.
const OTHER_SLASHES: &[&str] = &[
    "resume", // CodeCompanion.nvim's own command (docs/editors.md)
    "name",   // a placeholder: "an unknown `/name`"
    "skill",  // the runtime's `/skill NAME` in every face (docs/skills.md)
    "pincer", // Slack's app command `/pincer TEXT` (src/channels/slack/commands.rs)
];

/// Top-level directories of a Linux file system (`/tmp`), and the
/// `/nonexistent` of an example.
const SYSTEM_DIRECTORIES: &[&str] = &[
    "bin",
    "boot",
    "dev",
    "etc",
    "home",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "media",
    "mnt",
    "nix",
    "nonexistent",
    "opt",
    "proc",
    "root",
    "run",
    "sbin",
    "snap",
    "srv",
    "sys",
    "tmp",
    "usr",
    "var",
];

// ---------------------------------------------------------------------------
// Flags named alone.

/// Other programs' flags the documents name alone, in a code span: not
/// Pincer's, and not in `scripts/` or `benches/` (whose own flags are found
/// there).
const OTHER_FLAGS: &[&str] = &[
    "--jinja",                   // llama.cpp's server (docs/providers.md)
    "-c",                        // llama.cpp's server: its context size
    "--parallel",                // llama.cpp's server: slots sharing it
    "--enable-auto-tool-choice", // vLLM
    "--max-model-len",           // vLLM
    "--release",                 // cargo
    "--target-dir",              // cargo
    "--timings",                 // cargo
    "-merge",                    // libFuzzer (docs/fuzzing.md)
    "-wal",                      // SQLite's files beside the database
    "-shm",                      // SQLite's files beside the database
    "-mini",                     // a model name's end (`gpt-4.1-mini`)
];

/// The flags named alone in code spans (`--no-wait`, `-vv`, `--output
/// jsonl`) are flags of some command, of a script in `scripts/` or a bench
/// in `benches/`, or other programs' that the documents name.
struct Flags {
    pincer: BTreeSet<String>,
    /// The text of every file in `scripts/` and `benches/`.
    scripts: String,
}

impl Flags {
    fn new(cli: &Cli) -> Self {
        let mut scripts = String::new();
        let mut todo = vec![root().join("scripts"), root().join("benches")];
        while let Some(dir) = todo.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    todo.push(path);
                } else if let Ok(text) = std::fs::read_to_string(&path) {
                    scripts.push_str(&text);
                }
            }
        }
        Self {
            pincer: cli.every_flag(),
            scripts,
        }
    }

    /// The reason when a code span that starts with a flag names one nobody
    /// takes.
    fn check(&self, code: &str) -> Option<String> {
        static FLAG: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"^(--?[A-Za-z][\w-]*)(?:[=\s]|$)").unwrap());
        let flag = &FLAG.captures(code.trim())?[1];
        if OTHER_FLAGS.contains(&flag) || self.pincer.contains(flag) {
            return None;
        }
        // `-vv`: each letter a flag.
        if !flag.starts_with("--")
            && flag[1..]
                .chars()
                .all(|c| self.pincer.contains(&format!("-{c}")))
        {
            return None;
        }
        let word = Regex::new(&format!(r"(^|[^\w-]){}($|[^\w-])", regex::escape(flag))).unwrap();
        (!word.is_match(&self.scripts)).then(|| format!("no command takes {flag}"))
    }
}

// ---------------------------------------------------------------------------
// Links and anchors.

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces
/// as hyphens.
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown text's headings make, duplicates numbered as
/// GitHub numbers them (`-1`, `-2`).
#[allow(
    clippy::wildcard_enum_match_arm,
    reason = "pulldown-cmark's Event: only headings and their text make anchors"
)]
fn anchors(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for event in Parser::new_ext(text, markdown_options()) {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let count = seen.entry(base.clone()).or_insert(0);
                let anchor = if *count == 0 {
                    base.clone()
                } else {
                    format!("{base}-{count}")
                };
                *count += 1;
                found.insert(anchor);
            }
            _ => {}
        }
    }
    found
}

fn markdown_options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

// ---------------------------------------------------------------------------
// The checker.

/// What a document is checked against.
struct Checker {
    cli: Cli,
    routes: Routes,
    slash: BTreeSet<String>,
    flags: Flags,
    /// (name, version) of every package in Cargo.lock.
    locked: BTreeSet<(String, String)>,
    /// How many of each were checked: a checker that finds nothing to
    /// check passes everything.
    seen: RefCell<Seen>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    commands: usize,
    routes: usize,
    slashes: usize,
    links: usize,
}

impl Checker {
    fn new() -> Self {
        let cli = Cli::new();
        Self {
            flags: Flags::new(&cli),
            cli,
            routes: Routes::new(),
            slash: SlashCommands::new().all(),
            locked: locked_packages(),
            seen: RefCell::default(),
        }
    }

    /// Every problem of one document, `file` being where it lives (links
    /// resolve from there) and `text` what it says.
    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "pulldown-cmark's Event: only the kinds checked here matter"
    )]
    fn check(&self, file: &Path, text: &str) -> Vec<Problem> {
        let shown = file
            .strip_prefix(root())
            .unwrap_or(file)
            .display()
            .to_string();
        let line_starts: Vec<usize> = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        let line_of = |offset: usize| line_starts.partition_point(|&s| s <= offset);
        let mut problems = Vec::new();
        let mut report = |line: usize, what: String| {
            problems.push(Problem {
                file: shown.clone(),
                line,
                what,
            });
        };

        // Command lines and slash commands, from code blocks and code spans;
        // links.
        let mut block: Option<Vec<(usize, String)>> = None;
        for (event, range) in Parser::new_ext(text, markdown_options()).into_offset_iter() {
            match event {
                Event::Start(Tag::CodeBlock(_)) => block = Some(Vec::new()),
                Event::Text(t) if block.is_some() => {
                    let lines = block.as_mut().unwrap();
                    let first = line_of(range.start);
                    for (i, line) in t.lines().enumerate() {
                        lines.push((first + i, line.to_owned()));
                    }
                }
                Event::End(TagEnd::CodeBlock) => {
                    let lines = block.take().unwrap_or_default();
                    // A line ending in `\` continues on the next.
                    let mut joined: Vec<(usize, String)> = Vec::new();
                    let mut continues = false;
                    for (number, line) in lines {
                        match joined.last_mut() {
                            Some((_, last)) if continues => last.push_str(&line),
                            _ => joined.push((number, line.clone())),
                        }
                        continues = line.ends_with('\\');
                        if continues {
                            let last = &mut joined.last_mut().unwrap().1;
                            last.pop();
                        }
                    }
                    for (number, line) in joined {
                        for args in invocations(&line) {
                            self.seen.borrow_mut().commands += 1;
                            if let Err(why) = self.cli.check(&args) {
                                report(number, format!("{why}: {}", line.trim()));
                            }
                        }
                    }
                }
                Event::Code(code) => {
                    let line = line_of(range.start);
                    for args in invocations(&code) {
                        self.seen.borrow_mut().commands += 1;
                        if let Err(why) = self.cli.check(&args) {
                            report(line, format!("{why}: `{code}`"));
                        }
                    }
                    if let Some(why) = self.check_slash(&code) {
                        report(line, format!("{why}: `{code}`"));
                    }
                    if let Some(why) = self.flags.check(&code) {
                        report(line, format!("{why}: `{code}`"));
                    }
                }
                Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                    if !dest_url.contains("://") {
                        self.seen.borrow_mut().links += 1;
                    }
                    if let Some(why) = check_link(file, text, &dest_url) {
                        report(line_of(range.start), format!("{why}: ({dest_url})"));
                    }
                }
                _ => {}
            }
        }

        // An editor entry's arguments: `"args": ["acp", "--mode", "full"]`.
        static ARGS: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r#"(?:"args"\s*:\s*\[|\bargs\s*=\s*\{)([^\]}]*)"#).unwrap()
        });
        static STRING: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#""([^"]*)""#).unwrap());
        for found in ARGS.captures_iter(text) {
            let start = found.get(0).unwrap().start();
            let line = line_of(start);
            let args: Vec<Word> = STRING
                .captures_iter(&found[1])
                .map(|s| Word {
                    text: s[1].to_owned(),
                    quoted: false,
                    operator: false,
                })
                .collect();
            // Pincer's when the entry's command (just before) names it, or,
            // with no command in sight, when it starts with a subcommand.
            static COMMAND: LazyLock<Regex> = LazyLock::new(|| {
                Regex::new(r#"(?:"command"|"cmd"|\bcommand|\bcmd)\s*[:=]\s*"?([^",}\s]*)"#).unwrap()
            });
            let before = &text[line_starts[line.saturating_sub(4)]..start];
            let pincers = match COMMAND.captures_iter(before).last() {
                Some(command) => {
                    let program = &command[1];
                    program == "pincer"
                        || program.ends_with("/pincer")
                        || program == "PATH_OF_THIS_BINARY"
                }
                None => args.first().is_some_and(|first| {
                    self.cli.help(std::slice::from_ref(&first.text)).is_some()
                }),
            };
            if pincers {
                self.seen.borrow_mut().commands += 1;
                if let Err(why) = self.cli.check(&args) {
                    report(line, format!("{why}: {}", found[0].trim()));
                }
            }
        }

        // Routes, anywhere in the text.
        for (number, line) in text.lines().enumerate() {
            for (method, path) in routes_in(line) {
                self.seen.borrow_mut().routes += 1;
                if let Err(why) = self.routes.check(method.as_deref(), &path) {
                    report(number + 1, why);
                }
            }
        }

        // "the `NAME` crate 1.2.3": the version Cargo.lock pins.
        static CRATE: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"`([A-Za-z0-9_-]+)` crate (\d+\.\d+\.\d+)").unwrap());
        for (number, line) in text.lines().enumerate() {
            for found in CRATE.captures_iter(line) {
                if !self
                    .locked
                    .contains(&(found[1].to_owned(), found[2].to_owned()))
                {
                    report(
                        number + 1,
                        format!("Cargo.lock has no {} {}", &found[1], &found[2]),
                    );
                }
            }
        }

        // Anything pointing outside the repository.
        for (number, line) in text.lines().enumerate() {
            if line.contains("../shared") {
                report(
                    number + 1,
                    "names ../shared, outside the repository (a fresh clone has nothing beside it)"
                        .into(),
                );
            }
        }
        problems.sort();
        problems.dedup();
        problems
    }

    /// A code span `/name …` names a slash command, a route or a system
    /// directory; the reason when it names none.
    fn check_slash(&self, code: &str) -> Option<String> {
        static SLASH: LazyLock<Regex> =
            LazyLock::new(|| Regex::new(r"^/([a-z][a-z0-9_-]*)(?:\s|$)").unwrap());
        let name = &SLASH.captures(code.trim())?[1];
        self.seen.borrow_mut().slashes += 1;
        let known = self.slash.contains(name)
            || OTHER_SLASHES.contains(&name)
            || SYSTEM_DIRECTORIES.contains(&name)
            || self.routes.check(None, &format!("/{name}")).is_ok();
        (!known).then(|| format!("no slash command or route /{name}"))
    }
}

/// (name, version) of every package Cargo.lock pins.
fn locked_packages() -> BTreeSet<(String, String)> {
    let lock = std::fs::read_to_string(root().join("Cargo.lock")).unwrap();
    let package = Regex::new(r#"name = "([^"]+)"\nversion = "([^"]+)""#).unwrap();
    let found: BTreeSet<(String, String)> = package
        .captures_iter(&lock)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    assert!(found.len() > 100, "Cargo.lock read wrong: {found:?}");
    found
}

/// A relative link resolves to a file in the repository, and its fragment to
/// a heading of that file; the reason when not.
fn check_link(file: &Path, own: &str, target: &str) -> Option<String> {
    static LINE_ANCHOR: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^L\d+(-L\d+)?$").unwrap());
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    let resolved = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent().unwrap().join(path)
    };
    let text = if path.is_empty() {
        Some(own.to_owned())
    } else {
        match resolved.canonicalize() {
            Ok(real) if real.starts_with(root().canonicalize().unwrap()) => {
                std::fs::read_to_string(&real).ok()
            }
            Ok(_) => return Some("outside the repository".into()),
            Err(_) => return Some("no such file".into()),
        }
    };
    let fragment = fragment.filter(|f| !f.is_empty())?;
    if resolved.extension().is_none_or(|e| e != "md") {
        return (!LINE_ANCHOR.is_match(fragment))
            .then(|| "a fragment of a file that is not Markdown".into());
    }
    let anchors = anchors(&text.unwrap_or_default());
    (!anchors.contains(fragment)).then(|| format!("no heading makes the anchor #{fragment}"))
}

/// Every document names only commands, flags, routes, slash commands and
/// links that exist.
#[test]
fn documents_name_only_what_exists() {
    let checker = Checker::new();
    let mut problems = Vec::new();
    for file in documents() {
        let text = std::fs::read_to_string(&file).unwrap();
        problems.extend(checker.check(&file, &text));
    }
    let seen = *checker.seen.borrow();
    assert!(
        seen.commands > 200 && seen.routes > 50 && seen.slashes > 100 && seen.links > 40,
        "the checker found too little to check: {seen:?}"
    );
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    assert!(
        shown.is_empty(),
        "the docs name what does not exist:\n{}",
        shown.join("\n")
    );
}

/// The checker is not blind: on a made-up document it reports each wrong
/// subcommand, flag, value, route, method, slash command, link and anchor,
/// and none of the right ones written in the ways the docs write them.
#[test]
fn checker_reports_what_does_not_exist() {
    let doc = "\
# A made-up page

## Right ones

```sh
OPENAI_API_KEY=sk-... pincer run --model m \"Say hello\"   # --frobnicate in a comment
cd ~/src && pincer -vv --log-file /tmp/l chat --resume
git diff | pincer run -
cargo run --release -- sessions show ses_… --json
pincer serve --http 127.0.0.1:9000 --script examples/hello.jsonl & sleep 1
curl -N http://127.0.0.1:8787/v1/runs/$RUN/events
```

`pincer memory list|search` `pincer completions bash|zsh` `pincer sessions rm ID…`
`pincer channels outbox [--status S] [--json]` `pincer run --approve never|reads|all`
`pincer --data-dir DIR doctor --online` `pincer sandbox-exec --spec-file F`
the `agent-client-protocol-schema` crate 1.17.0
`--no-wait`, `-vv`, `--output jsonl`, `--stream-reps` (a script's), `--jinja`
GET /openapi.json, `POST /v1/sessions/{id}/prompt?wait=true`, `/v1/sessions/:id`,
GET /v1/models (a provider's), `/compact`, `/quit`, `/pair CODE`, `/tmp`, `/metrics`.
[this page](#right-ones), [http](http.md#rest), [code](../src/main.rs#L10).
\"args\": [\"acp\", \"--mode\", \"full\"], {\"command\": \"uvx\", \"args\": [\"run\", \"--x\"]}

## Wrong ones

```sh
pincer sesions list
pincer run --frobnicate \"x\"
```

`pincer sessions show --jsn` `pincer run --output yaml` `pincer completions bash|tcsh`
`pincer verify extra` `pincer -q doctor` `--no-waiting`
GET /v1/openapi.json and `DELETE /v1/runs/{run_id}` and `/v1/sessions/events`
`/compactify` and the `agent-client-protocol-schema` crate 1.15.1
[gone](nope.md), [no anchor](http.md#no-such-heading), [here](#wrong-one)
\"args\": [\"acp\", \"--modes\", \"full\"]
";
    let checker = Checker::new();
    let file = root().join("docs/made-up.md");
    let problems = checker.check(&file, doc);
    let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
    pretty_assertions::assert_eq!(
        shown,
        [
            "docs/made-up.md:27: `pincer` has no subcommand sesions: pincer sesions list",
            "docs/made-up.md:28: `pincer run` has no option --frobnicate: pincer run --frobnicate \"x\"",
            "docs/made-up.md:31: `pincer sessions show` has no option --jsn: `pincer sessions show --jsn`",
            "docs/made-up.md:31: tcsh is not a value `pincer completions` takes (bash, elvish, fish, powershell, zsh): `pincer completions bash|tcsh`",
            "docs/made-up.md:31: yaml is not a value --output takes (text, jsonl): `pincer run --output yaml`",
            "docs/made-up.md:32: `pincer verify` takes 0 argument(s); \"extra\" is one more: `pincer verify extra`",
            "docs/made-up.md:32: `pincer` has no option -q: `pincer -q doctor`",
            "docs/made-up.md:32: no command takes --no-waiting: `--no-waiting`",
            "docs/made-up.md:33: DELETE /v1/runs/{run_id}: the route answers GET",
            "docs/made-up.md:33: no route /v1/openapi.json",
            "docs/made-up.md:33: no route /v1/sessions/events",
            "docs/made-up.md:34: Cargo.lock has no agent-client-protocol-schema 1.15.1",
            "docs/made-up.md:34: no slash command or route /compactify: `/compactify`",
            "docs/made-up.md:35: no heading makes the anchor #no-such-heading: (http.md#no-such-heading)",
            "docs/made-up.md:35: no heading makes the anchor #wrong-one: (#wrong-one)",
            "docs/made-up.md:35: no such file: (nope.md)",
            "docs/made-up.md:36: `pincer acp` has no option --modes: \"args\": [\"acp\", \"--modes\", \"full\"",
        ]
    );
}

/// Each face's table of slash commands lists every command that face takes,
/// and no other.
#[test]
fn each_face_documents_its_slash_commands() {
    let commands = SlashCommands::new();
    let read = |name: &str| std::fs::read_to_string(root().join(name)).unwrap();
    for (file, heading, takes) in [
        ("docs/acp.md", "## Slash commands", &commands.acp),
        ("docs/terminal.md", "## Slash commands", &commands.terminal),
        ("docs/channels.md", "## In the chat", &commands.channels),
    ] {
        let listed = table_commands(&read(file), heading);
        let missing: Vec<&String> = takes.difference(&listed).collect();
        let extra: Vec<&String> = listed.difference(takes).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{file}, {heading}: not listed {missing:?}, not taken {extra:?}"
        );
    }
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# Quick start with a real model\n## `pincer run`: exit codes\n## A, b & c\n## Twice\n## Twice\n";
    let found: Vec<String> = anchors(text).into_iter().collect();
    pretty_assertions::assert_eq!(
        found,
        [
            "a-b--c",
            "pincer-run-exit-codes",
            "quick-start-with-a-real-model",
            "twice",
            "twice-1"
        ]
    );
}
