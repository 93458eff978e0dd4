//! `SKILL.md`: YAML frontmatter between `---` lines, then the Markdown body.
//!
//! YAML is read as events (`saphyr-parser`) into a tree of strings, lists
//! and mappings: every scalar stays as written (`name: 12` is the text
//! "12"), as the reference validator's StrictYAML reads it. Two readings:
//! lenient, for discovery (flow style, anchors and tags accepted; the common
//! invalid YAML of skills written for other clients, an unquoted value
//! holding `: `, retried as a block scalar, as the client guide suggests),
//! and strict, for `pincer skills validate` (StrictYAML's refusals: flow
//! style, anchors and aliases, tags, duplicate keys).

use std::collections::BTreeMap;

use saphyr_parser::{Event, Parser};

/// A YAML value with every scalar kept as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Text(String),
    List(Vec<Node>),
    /// Keys in the order written.
    Map(Vec<(String, Node)>),
}

impl Node {
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Node::Text(text) => Some(text),
            Node::List(_) | Node::Map(_) => None,
        }
    }

    /// The value of `key` in a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Node::Text(_) | Node::List(_) => None,
        }
    }
}

/// How strictly YAML is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    Lenient,
    Strict,
}

/// Reads one YAML document as a [`Node`]; an empty document is an empty
/// text. The error is the parser's message with its line.
pub fn load(yaml: &str, reading: Reading) -> Result<Node, String> {
    let mut chars: Option<Vec<char>> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: BTreeMap<usize, Node> = BTreeMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    let strict = reading == Reading::Strict;
    for event in Parser::new_from_str(yaml) {
        let (event, span) = event.map_err(|err| {
            format!(
                "{} (line {}, column {})",
                err.info(),
                err.marker().line(),
                err.marker().col() + 1
            )
        })?;
        let at = span.start.line();
        let node = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(format!("expected a single document (line {at})"));
                }
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
            Event::Alias(id) => {
                if strict {
                    return Err(format!("aliases are not allowed (line {at})"));
                }
                anchors
                    .get(&id)
                    .cloned()
                    .unwrap_or(Node::Text(String::new()))
            }
            Event::Scalar(text, _, anchor, tag) => {
                if strict {
                    refuse_properties(anchor, tag.is_some(), at)?;
                }
                let node = Node::Text(text.into_owned());
                if anchor != 0 {
                    anchors.insert(anchor, node.clone());
                }
                node
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                if strict {
                    refuse_properties(anchor, tag.is_some(), at)?;
                    let chars = chars.get_or_insert_with(|| yaml.chars().collect());
                    if matches!(chars.get(span.start.index()), Some('[' | '{')) {
                        return Err(format!("flow style is not allowed (line {at})"));
                    }
                }
                stack.push(Frame {
                    anchor,
                    map: matches!(event, Event::MappingStart(..)),
                    items: Vec::new(),
                    key: None,
                    entries: Vec::new(),
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let Some(frame) = stack.pop() else {
                    return Err("unbalanced YAML".into());
                };
                let node = if frame.map {
                    Node::Map(frame.entries)
                } else {
                    Node::List(frame.items)
                };
                if frame.anchor != 0 {
                    anchors.insert(frame.anchor, node.clone());
                }
                node
            }
        };
        match stack.last_mut() {
            None => root = Some(node),
            Some(frame) if !frame.map => frame.items.push(node),
            Some(frame) => match frame.key.take() {
                None => match node {
                    Node::Text(key) => frame.key = Some(key),
                    Node::List(_) | Node::Map(_) => {
                        return Err(format!("a key must be a plain value (line {at})"));
                    }
                },
                Some(key) => {
                    if let Some(held) = frame.entries.iter_mut().find(|(k, _)| *k == key) {
                        if strict {
                            return Err(format!("duplicate key `{key}` (line {at})"));
                        }
                        held.1 = node;
                    } else {
                        frame.entries.push((key, node));
                    }
                }
            },
        }
    }
    Ok(root.unwrap_or(Node::Text(String::new())))
}

fn refuse_properties(anchor: usize, tagged: bool, at: usize) -> Result<(), String> {
    if anchor != 0 {
        return Err(format!("anchors are not allowed (line {at})"));
    }
    if tagged {
        return Err(format!("tags are not allowed (line {at})"));
    }
    Ok(())
}

/// A collection being read.
struct Frame {
    anchor: usize,
    map: bool,
    items: Vec<Node>,
    key: Option<String>,
    entries: Vec<(String, Node)>,
}

/// Why a `SKILL.md` could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("SKILL.md must start with YAML frontmatter (a `---` line)")]
    NoFrontmatter,
    #[error("SKILL.md frontmatter is not closed with a `---` line")]
    Unclosed,
    #[error("invalid YAML in frontmatter: {0}")]
    Yaml(String),
    #[error("SKILL.md frontmatter must be a YAML mapping")]
    NotMapping,
}

/// A `SKILL.md` as discovery reads it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub name: Option<String>,
    pub description: Option<String>,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    /// `metadata`'s text values.
    pub metadata: BTreeMap<String, String>,
    /// `allowed-tools`: a space-separated string (commas accepted too), or
    /// a YAML list.
    pub allowed_tools: Vec<String>,
    /// `disable-model-invocation: true` (Claude Code's).
    pub person_only: bool,
    /// Everything after the closing `---`, trimmed.
    pub body: String,
    /// The frontmatter was not valid YAML and was read with its values
    /// holding `: ` taken as text.
    pub repaired: bool,
}

/// Reads a `SKILL.md` leniently: frontmatter between `---` lines (a BOM and
/// CRLF line ends accepted), YAML retried with values holding `: ` taken as
/// text.
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let (front, body) = split(&text)?;
    let (node, repaired) = match load(front, Reading::Lenient) {
        Ok(node) => (node, false),
        Err(err) => {
            let fixed = repair(front);
            match load(&fixed, Reading::Lenient) {
                Ok(node) if fixed != front => (node, true),
                Ok(_) | Err(_) => return Err(ParseError::Yaml(err)),
            }
        }
    };
    if !matches!(node, Node::Map(_)) {
        return Err(ParseError::NotMapping);
    }
    let text_of = |key: &str| node.get(key).and_then(Node::as_text).map(str::to_owned);
    let metadata = match node.get("metadata") {
        Some(Node::Map(entries)) => entries
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.as_text()?.to_owned())))
            .collect(),
        Some(Node::Text(_) | Node::List(_)) | None => BTreeMap::new(),
    };
    let allowed_tools = allowed_tools(&node);
    Ok(Parsed {
        name: text_of("name").map(|n| n.trim().to_owned()),
        description: text_of("description").map(|d| d.trim().to_owned()),
        license: text_of("license"),
        compatibility: text_of("compatibility"),
        metadata,
        allowed_tools,
        person_only: text_of("disable-model-invocation")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
        body: body.trim().to_owned(),
        repaired,
    })
}

/// A custom command's file (`.claude/commands/NAME.md`) as discovery
/// reads it: frontmatter is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedCommand {
    pub description: Option<String>,
    pub argument_hint: Option<String>,
    pub allowed_tools: Vec<String>,
    pub model: Option<String>,
    /// Everything after the frontmatter (the whole file without one),
    /// trimmed.
    pub body: String,
    /// As for a skill: read with values holding `: ` taken as text.
    pub repaired: bool,
}

/// Reads a custom command leniently: the file is the prompt, after
/// frontmatter between `---` lines when it starts with one; an
/// `argument-hint` is taken as written (`[pr-number] [priority]` is text,
/// not a YAML list).
pub fn parse_command(text: &str) -> Result<ParsedCommand, ParseError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let starts = text
        .lines()
        .next()
        .is_some_and(|line| line.trim_end() == "---");
    if !starts {
        return Ok(ParsedCommand {
            body: text.trim().to_owned(),
            ..ParsedCommand::default()
        });
    }
    let (front, body) = split(&text)?;
    let front = quote_hint(front);
    let (node, repaired) = match load(&front, Reading::Lenient) {
        Ok(node) => (node, false),
        Err(err) => {
            let fixed = repair(&front);
            match load(&fixed, Reading::Lenient) {
                Ok(node) if fixed != front => (node, true),
                Ok(_) | Err(_) => return Err(ParseError::Yaml(err)),
            }
        }
    };
    let node = match node {
        Node::Map(_) => node,
        // `---` alone, then `---`: no fields.
        Node::Text(text) if text.is_empty() => Node::Map(Vec::new()),
        Node::Text(_) | Node::List(_) => return Err(ParseError::NotMapping),
    };
    let text_of = |key: &str| {
        node.get(key)
            .and_then(Node::as_text)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    Ok(ParsedCommand {
        description: text_of("description"),
        argument_hint: text_of("argument-hint"),
        allowed_tools: allowed_tools(&node),
        model: text_of("model"),
        body: body.trim().to_owned(),
        repaired,
    })
}

/// The frontmatter with an unquoted `argument-hint` value single-quoted,
/// so `[a] [b]` and `<x>: y` stay text.
fn quote_hint(front: &str) -> String {
    let mut out = String::with_capacity(front.len() + 8);
    for line in front.lines() {
        match line.strip_prefix("argument-hint:") {
            Some(value)
                if !value.trim().is_empty()
                    && !value.trim_start().starts_with(['"', '\'', '|', '>']) =>
            {
                out.push_str(&format!(
                    "argument-hint: '{}'",
                    value.trim().replace('\'', "''")
                ));
            }
            Some(_) | None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// `allowed-tools`: a space- or comma-separated string, or a YAML list.
fn allowed_tools(node: &Node) -> Vec<String> {
    match node.get("allowed-tools") {
        Some(Node::Text(text)) => tool_list(text),
        Some(Node::List(items)) => items
            .iter()
            .filter_map(Node::as_text)
            .flat_map(tool_list)
            .collect(),
        Some(Node::Map(_)) | None => Vec::new(),
    }
}

/// The frontmatter and the body: the first line is `---`, the frontmatter
/// runs to the next `---` line.
fn split(text: &str) -> Result<(&str, &str), ParseError> {
    let Some(rest) = text.strip_prefix("---") else {
        return Err(ParseError::NoFrontmatter);
    };
    let Some(newline) = rest.find('\n') else {
        return Err(ParseError::Unclosed);
    };
    if !rest[..newline].trim().is_empty() {
        return Err(ParseError::NoFrontmatter);
    }
    let rest = &rest[newline + 1..];
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    Err(ParseError::Unclosed)
}

/// `allowed-tools` as written: tools separated by spaces or commas, a
/// pattern in parentheses kept whole (`Bash(git add:*)`).
fn tool_list(text: &str) -> Vec<String> {
    let mut tools = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c.is_whitespace() || c == ',') {
            if !current.is_empty() {
                tools.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        tools.push(current);
    }
    tools
}

/// The frontmatter with each top-level `key: value` whose value holds `: `
/// (invalid as a plain scalar) rewritten as a folded block scalar, its
/// continuation lines included.
fn repair(front: &str) -> String {
    let mut out = String::with_capacity(front.len() + 64);
    let mut lines = front.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((key, value)) = top_level_pair(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let value = value.trim();
        let quoted = value.starts_with(['"', '\'', '|', '>', '[', '{', '&', '*', '!']);
        if quoted || !(value.contains(": ") || value.ends_with(':')) {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        out.push_str(key);
        out.push_str(": >-\n  ");
        out.push_str(value);
        out.push('\n');
        while let Some(next) = lines.next_if(|l| l.starts_with([' ', '\t']) || l.is_empty()) {
            out.push_str("  ");
            out.push_str(next.trim());
            out.push('\n');
        }
    }
    out
}

/// `key` and the rest of a line `key: rest` at the left margin.
fn top_level_pair(line: &str) -> Option<(&str, &str)> {
    if line.starts_with([' ', '\t', '#', '-']) {
        return None;
    }
    let (key, value) = line.split_once(": ")?;
    key.chars()
        .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
        .then_some((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Node {
        Node::Text(s.into())
    }

    #[test]
    fn scalars_stay_as_written_and_collections_nest() {
        let node = load(
            "name: 12\ndescription: ~\nempty:\nlist:\n  - a\n  - 'b c'\nmeta:\n  k: \"1.0\"\n",
            Reading::Strict,
        )
        .unwrap();
        assert_eq!(node.get("name"), Some(&text("12")));
        assert_eq!(node.get("description"), Some(&text("~")));
        assert_eq!(node.get("empty"), Some(&text("")));
        assert_eq!(
            node.get("list"),
            Some(&Node::List(vec![text("a"), text("b c")]))
        );
        assert_eq!(
            node.get("meta"),
            Some(&Node::Map(vec![("k".into(), text("1.0"))]))
        );
        assert_eq!(load("", Reading::Strict).unwrap(), text(""));
    }

    #[test]
    fn strict_reading_refuses_what_strictyaml_refuses() {
        for (yaml, expected) in [
            ("tools: [a, b]\n", "flow style"),
            ("meta: {a: b}\n", "flow style"),
            ("name: &x a\n", "anchors"),
            ("name: !!str a\n", "tags"),
            ("name: a\nname: b\n", "duplicate key `name`"),
            ("description: Use when: x\n", "line 1"),
        ] {
            let err = load(yaml, Reading::Strict).unwrap_err();
            assert!(err.contains(expected), "{yaml:?}: {err}");
        }
        // The lenient reading takes the first four.
        let node = load("tools: [a, b]\nn: &x a\nm: *x\n", Reading::Lenient).unwrap();
        assert_eq!(node.get("m"), Some(&text("a")));
        assert_eq!(
            load("name: a\nname: b\n", Reading::Lenient)
                .unwrap()
                .get("name"),
            Some(&text("b"))
        );
    }

    #[test]
    fn a_skill_file_is_read_with_every_field() {
        let parsed = parse(
            "---\nname: pdf\ndescription: Reads PDFs.\nlicense: MIT\ncompatibility: needs qpdf\n\
             metadata:\n  author: x\n  version: \"1.0\"\nallowed-tools: Bash(git add:*) Read, Grep\n\
             disable-model-invocation: true\n---\n\n# Body\n\ntext\n",
        )
        .unwrap();
        assert_eq!(parsed.name.as_deref(), Some("pdf"));
        assert_eq!(parsed.description.as_deref(), Some("Reads PDFs."));
        assert_eq!(parsed.license.as_deref(), Some("MIT"));
        assert_eq!(parsed.compatibility.as_deref(), Some("needs qpdf"));
        assert_eq!(parsed.metadata["version"], "1.0");
        assert_eq!(parsed.allowed_tools, ["Bash(git add:*)", "Read", "Grep"]);
        assert!(parsed.person_only);
        assert_eq!(parsed.body, "# Body\n\ntext");
        assert!(!parsed.repaired);
        let listed =
            parse("---\nname: a\ndescription: d\nallowed-tools:\n  - Read\n  - Write\n---\n")
                .unwrap();
        assert_eq!(listed.allowed_tools, ["Read", "Write"]);
        assert!(!listed.person_only);
    }

    #[test]
    fn a_value_holding_a_colon_is_read_as_text() {
        let parsed = parse(
            "---\r\nname: a\r\ndescription: Use this when: the user asks\r\n  about PDFs: all of them\r\nlicense: MIT\r\n---\r\nbody",
        )
        .unwrap();
        assert!(parsed.repaired);
        assert_eq!(
            parsed.description.as_deref(),
            Some("Use this when: the user asks about PDFs: all of them")
        );
        assert_eq!(parsed.license.as_deref(), Some("MIT"));
        assert_eq!(parsed.body, "body");
    }

    #[test]
    fn a_command_file_is_read_with_or_without_frontmatter() {
        let plain = parse_command("\u{feff}Review the code.\r\n\r\nBe brief.\r\n").unwrap();
        assert_eq!(plain.body, "Review the code.\n\nBe brief.");
        assert_eq!(plain.description, None);
        let full = parse_command(
            "---\ndescription: Fix an issue: the TDD way\nargument-hint: [issue-number] [priority]\n\
             allowed-tools: Bash(gh:*), Read\nmodel: fast\n---\n\nFix issue $1 ($ARGUMENTS).\n",
        )
        .unwrap();
        assert!(full.repaired);
        assert_eq!(
            full.description.as_deref(),
            Some("Fix an issue: the TDD way")
        );
        assert_eq!(
            full.argument_hint.as_deref(),
            Some("[issue-number] [priority]")
        );
        assert_eq!(full.allowed_tools, ["Bash(gh:*)", "Read"]);
        assert_eq!(full.model.as_deref(), Some("fast"));
        assert_eq!(full.body, "Fix issue $1 ($ARGUMENTS).");
        let quoted = parse_command("---\nargument-hint: \"<pr> [it's]\"\n---\nx").unwrap();
        assert_eq!(quoted.argument_hint.as_deref(), Some("<pr> [it's]"));
        let hint = parse_command("---\nargument-hint: it's <a>\n---\nx").unwrap();
        assert_eq!(hint.argument_hint.as_deref(), Some("it's <a>"));
        let empty = parse_command("---\n---\nbody").unwrap();
        assert_eq!(empty.body, "body");
        assert_eq!(parse_command("---\nx: 1\n"), Err(ParseError::Unclosed));
        assert_eq!(
            parse_command("---\n- a\n---\nbody"),
            Err(ParseError::NotMapping)
        );
    }

    #[test]
    fn what_cannot_be_read_says_why() {
        assert_eq!(parse("# no frontmatter\n"), Err(ParseError::NoFrontmatter));
        assert_eq!(parse("---\nname: a\n"), Err(ParseError::Unclosed));
        assert_eq!(parse("---\njust text\n---\n"), Err(ParseError::NotMapping));
        let Err(ParseError::Yaml(message)) = parse("---\nname: [a\n---\n") else {
            panic!("expected a YAML error");
        };
        assert!(message.contains("line"), "{message}");
    }
}
