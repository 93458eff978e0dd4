//! Markdown for the terminal, rendered as it streams in.
//!
//! A reply arrives in small chunks, so rendering works line by line: a chunk
//! is added to the unfinished line, and each line that a chunk completes is
//! rendered once and never again (the cost of a reply is linear in its
//! length, whatever its chunking). Fenced code blocks are the only structure
//! that spans lines and are tracked here; within a line, `pulldown-cmark`
//! parses headings, list items, quotes, emphasis, inline code and links.
//! Emphasis split over two lines stays as written.
//!
//! Control characters in the text are shown as `?`: a model's reply must not
//! drive the terminal (move the cursor, retitle the window).

use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

const RESET: &str = "\x1b[0m";
const BOLD: &str = "\x1b[1m";
const DIM: &str = "\x1b[2m";
const ITALIC: &str = "\x1b[3m";
const UNDERLINE: &str = "\x1b[4m";
const CODE: &str = "\x1b[36m";

/// Renders a streamed Markdown reply for the terminal.
#[derive(Debug)]
pub struct Markdown {
    /// Whether to use ANSI styles (off for `NO_COLOR` and `TERM=dumb`).
    color: bool,
    /// The line being received: what came after the last newline.
    pending: String,
    /// The fence that opened the code block we are in (its character and
    /// length), if any: lines inside are code, not Markdown.
    fence: Option<(char, usize)>,
}

impl Markdown {
    pub fn new(color: bool) -> Self {
        Self {
            color,
            pending: String::new(),
            fence: None,
        }
    }

    /// Adds a chunk of the reply and renders the lines it completes into `out`.
    pub fn push(&mut self, chunk: &str, out: &mut String) {
        self.pending.push_str(chunk);
        if !chunk.contains('\n') {
            return;
        }
        let text = std::mem::take(&mut self.pending);
        let mut lines = text.split('\n');
        let last = lines.next_back().unwrap_or_default();
        for line in lines {
            self.line(line, out);
        }
        self.pending.push_str(last);
    }

    /// Whether part of a line is waiting for its end.
    /// The line in progress, not yet complete (so not yet rendered).
    pub fn pending(&self) -> &str {
        &self.pending
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Renders the unfinished line, if any, and closes an open code block:
    /// the reply ended (or a tool call comes between two parts of it).
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, out);
        }
        self.fence = None;
    }

    fn line(&mut self, line: &str, out: &mut String) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let safe = sanitize(line);
        let trimmed = safe.trim_start();
        if let Some((mark, length)) = self.fence {
            if fence_of(trimmed).is_some_and(|(m, l)| m == mark && l >= length)
                && trimmed.trim_start_matches(mark).trim().is_empty()
            {
                self.fence = None;
            } else {
                self.code_line(&safe, out);
            }
            return;
        }
        if let Some(fence) = fence_of(trimmed) {
            self.fence = Some(fence);
            return;
        }
        if trimmed.is_empty() {
            out.push('\n');
            return;
        }
        let indent = &safe[..safe.len() - trimmed.len()];
        if indent.chars().count() >= 4 {
            self.code_line(&safe, out);
            return;
        }
        out.push_str(indent);
        Inline::new(self.color, out).render(trimmed);
        out.push('\n');
    }

    fn code_line(&self, line: &str, out: &mut String) {
        out.push_str("    ");
        if self.color {
            out.push_str(CODE);
            out.push_str(line);
            out.push_str(RESET);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
}

/// A code fence opening a line: its character and length.
fn fence_of(trimmed: &str) -> Option<(char, usize)> {
    let mark = trimmed.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let length = trimmed.chars().take_while(|c| *c == mark).count();
    (length >= 3).then_some((mark, length))
}

/// The text with control characters (escape sequences, bells) shown as `?`.
pub fn sanitize(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(|c| c.is_control() && c != '\t') {
        text.chars()
            .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// One line's inline rendering: the styles open at each point.
struct Inline<'a> {
    color: bool,
    out: &'a mut String,
    bold: usize,
    italic: usize,
    underline: usize,
    dim: usize,
    /// Number of the next item of each ordered list open, `None` for bullets.
    lists: Vec<Option<u64>>,
    /// Where each open link points, shown after its text.
    links: Vec<String>,
}

impl<'a> Inline<'a> {
    fn new(color: bool, out: &'a mut String) -> Self {
        Self {
            color,
            out,
            bold: 0,
            italic: 0,
            underline: 0,
            dim: 0,
            lists: Vec::new(),
            links: Vec::new(),
        }
    }

    fn render(mut self, line: &str) {
        for event in Parser::new(line) {
            self.event(event);
        }
        if self.color && self.bold + self.italic + self.underline + self.dim > 0 {
            self.out.push_str(RESET);
        }
    }

    /// Emits the escape codes for the styles now open.
    fn restyle(&mut self) {
        if !self.color {
            return;
        }
        self.out.push_str(RESET);
        for (count, code) in [
            (self.bold, BOLD),
            (self.italic, ITALIC),
            (self.underline, UNDERLINE),
            (self.dim, DIM),
        ] {
            if count > 0 {
                self.out.push_str(code);
            }
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) | Event::Html(text) | Event::InlineHtml(text) => {
                self.out.push_str(text.trim_end_matches('\n'));
            }
            Event::Code(code) => {
                if self.color {
                    self.out.push_str(CODE);
                    self.out.push_str(&code);
                    self.restyle();
                } else {
                    self.out.push('`');
                    self.out.push_str(&code);
                    self.out.push('`');
                }
            }
            Event::InlineMath(text) | Event::DisplayMath(text) => self.out.push_str(&text),
            Event::FootnoteReference(name) => {
                self.out.push_str(&format!("[^{name}]"));
            }
            Event::SoftBreak | Event::HardBreak => self.out.push(' '),
            Event::Rule => self.out.push_str(if self.color {
                "────────────────────────────────"
            } else {
                "--------------------------------"
            }),
            Event::TaskListMarker(done) => self.out.push_str(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Heading { level, .. } => {
                self.bold += 1;
                if level == HeadingLevel::H1 {
                    self.underline += 1;
                }
                self.restyle();
            }
            Tag::Strong => {
                self.bold += 1;
                self.restyle();
            }
            Tag::Emphasis => {
                self.italic += 1;
                self.restyle();
            }
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                self.links.push(dest_url.into_string());
                self.underline += 1;
                self.restyle();
            }
            Tag::BlockQuote(_) => {
                if self.color {
                    self.dim += 1;
                    self.restyle();
                    self.out.push_str("│ ");
                } else {
                    self.out.push_str("> ");
                }
            }
            Tag::List(start) => self.lists.push(start),
            Tag::Item => {
                let bullet = match self.lists.last_mut() {
                    Some(Some(number)) => {
                        let shown = format!("{number}. ");
                        *number += 1;
                        shown
                    }
                    Some(None) | None if self.color => "• ".to_owned(),
                    Some(None) | None => "- ".to_owned(),
                };
                self.out.push_str(&bullet);
            }
            Tag::CodeBlock(_) => self.out.push_str("    "),
            Tag::Paragraph
            | Tag::HtmlBlock
            | Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::Table(_)
            | Tag::TableHead
            | Tag::TableRow
            | Tag::TableCell
            | Tag::Strikethrough
            | Tag::Superscript
            | Tag::Subscript
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(level) => {
                self.bold = self.bold.saturating_sub(1);
                if level == HeadingLevel::H1 {
                    self.underline = self.underline.saturating_sub(1);
                }
                self.restyle();
            }
            TagEnd::Strong => {
                self.bold = self.bold.saturating_sub(1);
                self.restyle();
            }
            TagEnd::Emphasis => {
                self.italic = self.italic.saturating_sub(1);
                self.restyle();
            }
            TagEnd::Link | TagEnd::Image => {
                self.underline = self.underline.saturating_sub(1);
                self.restyle();
                if let Some(url) = self.links.pop()
                    && !url.is_empty()
                    && !self.out.ends_with(url.as_str())
                {
                    self.out.push_str(&format!(" ({url})"));
                }
            }
            TagEnd::BlockQuote(_) => {
                if self.color {
                    self.dim = self.dim.saturating_sub(1);
                    self.restyle();
                }
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Paragraph
            | TagEnd::Item
            | TagEnd::CodeBlock
            | TagEnd::HtmlBlock
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::Strikethrough
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::MetadataBlock(_) => {}
        }
    }
}

/// Text shown dimmed (thoughts), line by line as it streams, without Markdown.
#[derive(Debug)]
pub struct Dimmed {
    color: bool,
    pending: String,
}

impl Dimmed {
    pub fn new(color: bool) -> Self {
        Self {
            color,
            pending: String::new(),
        }
    }

    pub fn push(&mut self, chunk: &str, out: &mut String) {
        self.pending.push_str(chunk);
        if !chunk.contains('\n') {
            return;
        }
        let text = std::mem::take(&mut self.pending);
        let mut lines = text.split('\n');
        let last = lines.next_back().unwrap_or_default();
        for line in lines {
            self.line(line, out);
        }
        self.pending.push_str(last);
    }

    /// The line in progress, not shown yet.
    pub fn pending(&self) -> &str {
        &self.pending
    }

    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, out);
        }
    }

    fn line(&self, line: &str, out: &mut String) {
        let line = sanitize(line.strip_suffix('\r').unwrap_or(line));
        if self.color {
            out.push_str(&format!("{DIM}{ITALIC}  ~ {line}{RESET}\n"));
        } else {
            out.push_str(&format!("  ~ {line}\n"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn render(color: bool, chunks: &[&str]) -> String {
        let mut markdown = Markdown::new(color);
        let mut out = String::new();
        for chunk in chunks {
            markdown.push(chunk, &mut out);
        }
        markdown.finish(&mut out);
        out
    }

    #[test]
    fn plain_output_drops_the_markers_and_keeps_the_words() {
        let text = "# Title\nSome **bold** and *italic* with `code`.\n- one\n- two\n3. three\n> quoted\nSee [docs](https://x.test/d).\n";
        assert_eq!(
            render(false, &[text]),
            "Title\nSome bold and italic with `code`.\n- one\n- two\n3. three\n> quoted\nSee docs (https://x.test/d).\n"
        );
    }

    #[test]
    fn colored_output_styles_bold_headings_and_code() {
        assert_eq!(
            render(true, &["**hi** `x`\n"]),
            format!("{RESET}{BOLD}hi{RESET} {CODE}x{RESET}\n")
        );
        assert_eq!(
            render(true, &["## Part\n"]),
            format!("{RESET}{BOLD}Part{RESET}\n")
        );
    }

    #[test]
    fn any_chunking_renders_the_same() {
        let text = "Intro with **bold**\n\n```rust\nfn main() {}\n```\n1. a `b`\n2. c\nend";
        let whole = render(true, &[text]);
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(render(true, &refs), whole);
        let (a, b) = text.split_at(23);
        assert_eq!(render(true, &[a, b]), whole);
    }

    #[test]
    fn fenced_code_is_indented_and_not_parsed() {
        assert_eq!(
            render(false, &["```\n# not a heading\n**x**\n```\nafter\n"]),
            "    # not a heading\n    **x**\nafter\n"
        );
        // A longer closing fence closes; a shorter one is code.
        assert_eq!(render(false, &["````\n```\n````\n"]), "    ```\n");
    }

    #[test]
    fn a_line_is_rendered_only_once_it_is_complete() {
        let mut markdown = Markdown::new(false);
        let mut out = String::new();
        markdown.push("**bo", &mut out);
        assert_eq!(out, "");
        assert!(markdown.has_pending());
        markdown.push("ld**\nnext", &mut out);
        assert_eq!(out, "bold\n");
        markdown.finish(&mut out);
        assert_eq!(out, "bold\nnext\n");
        assert!(!markdown.has_pending());
    }

    #[test]
    fn control_characters_cannot_reach_the_terminal() {
        assert_eq!(render(false, &["a\x1b]0;title\x07b\n"]), "a?]0;title?b\n");
        let mut dimmed = Dimmed::new(false);
        let mut out = String::new();
        dimmed.push("think\x1b[2J\nmore", &mut out);
        dimmed.finish(&mut out);
        assert_eq!(out, "  ~ think?[2J\n  ~ more\n");
    }

    #[test]
    fn every_split_renders_the_same_and_plain_output_has_no_controls() {
        let samples = [
            "a **b** _c_ `d`\r\n# h\r\n",
            "~~~py\nx = '\x1b[2J'\n~~~\n> q *e*\n1) one\n",
            "[l](u) ![i](p) <b>raw</b> ---\n\n---\n    indented code\n",
            "ünï **cödé** 💥\t\u{7}\n- [ ] task\n```\nunclosed",
        ];
        for text in samples {
            for color in [false, true] {
                let whole = render(color, &[text]);
                for (at, _) in text.char_indices() {
                    let (a, b) = text.split_at(at);
                    assert_eq!(render(color, &[a, b]), whole, "split at {at} of {text:?}");
                }
                let without_styles = whole
                    .replace(RESET, "")
                    .replace(BOLD, "")
                    .replace(DIM, "")
                    .replace(ITALIC, "")
                    .replace(UNDERLINE, "")
                    .replace(CODE, "");
                assert!(
                    !without_styles
                        .chars()
                        .any(|c| c.is_control() && c != '\n' && c != '\t'),
                    "{text:?} -> {whole:?}"
                );
                assert!(whole.ends_with('\n'), "{whole:?}");
            }
        }
    }

    #[test]
    fn nested_list_items_keep_their_indent() {
        assert_eq!(render(false, &["- a\n  - b\n"]), "- a\n  - b\n");
    }
}
