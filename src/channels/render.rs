//! The platform kit's rendering: the parts every adapter builds its own
//! rendering from (`Adapter::render`, `docs/channels.md`, "Adding a
//! platform"). A reply is Markdown (CommonMark with tables, strikethrough
//! and task lists, parsed by `pulldown-cmark`):
//!
//! - [`chunk`] cuts it into pieces that each fit one platform message,
//!   measured in the platform's own unit (characters, UTF-16 code units,
//!   bytes) by a function the adapter gives: at block boundaries first (a
//!   paragraph, a list, a whole code block), a block longer than a message at
//!   line ends (a code block's parts fenced again), then at spaces, then
//!   anywhere — never inside a UTF-8 character;
//! - [`plain`] is a piece as readable plain text (IRC lines, a fallback);
//! - [`html`] is a piece in one of two HTML dialects: Telegram's few tags, or
//!   the common subset Matrix's `formatted_body` and an email's HTML part
//!   take.
//!
//! Whatever the model wrote is text, never markup: raw HTML in the Markdown is
//! escaped, and a link whose address is not `http`, `https` or `mailto`
//! (`javascript:` …) is shown as text without a link.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Characters: a platform that counts Unicode scalar values.
pub fn chars(text: &str) -> usize {
    text.chars().count()
}

/// UTF-16 code units: what Telegram counts.
pub fn utf16(text: &str) -> usize {
    text.encode_utf16().count()
}

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

/// One top-level block of a reply: its source (up to the next block, so a
/// link reference definition stays with the block before it) and, for a
/// fenced code block, its opening fence line.
struct Block<'a> {
    text: &'a str,
    fence: Option<&'a str>,
}

/// The top-level blocks of `markdown`, in order.
fn blocks(markdown: &str) -> Vec<Block<'_>> {
    let mut starts: Vec<(usize, bool)> = Vec::new();
    let mut depth = 0usize;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        if let Event::Start(tag) = &event {
            if depth == 0 {
                let fenced = matches!(tag, Tag::CodeBlock(CodeBlockKind::Fenced(_)));
                starts.push((range.start, fenced));
            }
            depth += 1;
        } else if let Event::End(_) = event {
            depth = depth.saturating_sub(1);
        } else if depth == 0 {
            // A block without a start and an end: a rule.
            starts.push((range.start, false));
        }
    }
    let mut out = Vec::new();
    for (i, &(start, fenced)) in starts.iter().enumerate() {
        // The first block also takes what came before it (definitions).
        let from = if i == 0 { 0 } else { start };
        let to = starts.get(i + 1).map_or(markdown.len(), |next| next.0);
        let text = markdown[from..to].trim_end();
        if text.trim().is_empty() {
            continue;
        }
        let fence = fenced.then(|| markdown[start..to].lines().next().unwrap_or_default());
        out.push(Block { text, fence });
    }
    out
}

/// Cuts `markdown` into pieces for which `measure` is at most `max` (see the
/// module's comment for where it cuts). An empty reply is no piece.
pub fn chunk(markdown: &str, max: usize, measure: &dyn Fn(&str) -> usize) -> Vec<String> {
    let max = max.max(16);
    let text = markdown.trim_end();
    if text.trim().is_empty() {
        return Vec::new();
    }
    if measure(text) <= max {
        return vec![text.to_owned()];
    }
    let fits = |piece: &str| measure(piece) <= max;
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        let parts = if fits(block.text) {
            vec![block.text.to_owned()]
        } else {
            split_block(&block, &fits)
        };
        for part in parts {
            if current.is_empty() {
                current = part;
                continue;
            }
            let joined = format!("{current}\n\n{part}");
            if fits(&joined) {
                current = joined;
            } else {
                pieces.push(std::mem::replace(&mut current, part));
            }
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Cuts one block that does not fit: a fenced code block into parts fenced
/// again, anything else at line ends, spaces, or anywhere.
fn split_block(block: &Block<'_>, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    let lines: Vec<&str> = block.text.lines().collect();
    let Some(open) = block.fence else {
        return pack(&lines, fits);
    };
    let marker: String = open
        .trim_start()
        .chars()
        .take_while(|c| *c == '`' || *c == '~')
        .collect();
    let closed = lines.len() >= 2
        && lines
            .last()
            .is_some_and(|l| l.trim_start().starts_with(marker.as_str()));
    let inner = &lines[1.min(lines.len())..lines.len() - usize::from(closed)];
    let fenced = |part: &str| format!("{open}\n{part}\n{marker}");
    pack(inner, &|part: &str| fits(&fenced(part)))
        .iter()
        .map(|part| fenced(part))
        .collect()
}

/// Packs lines into as few pieces as `fits` allows, cutting lines that do
/// not fit alone.
fn pack(lines: &[&str], fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in lines {
        for part in cut_line(line, fits) {
            current = Some(match current.take() {
                None => part,
                Some(held) => {
                    let joined = format!("{held}\n{part}");
                    if fits(&joined) {
                        joined
                    } else {
                        out.push(held);
                        part
                    }
                }
            });
        }
    }
    out.extend(current);
    out
}

/// A line that does not fit, cut at the last space of the longest prefix
/// that fits (when that space is past its middle), else at that prefix's
/// end; never inside a character. A piece is at least one character.
fn cut_line(line: &str, fits: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while !fits(rest) {
        let bounds: Vec<usize> = rest
            .char_indices()
            .map(|(i, _)| i)
            .skip(1)
            .chain([rest.len()])
            .collect();
        // The longest prefix that fits: binary search over char boundaries.
        let (mut lo, mut hi) = (0usize, bounds.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if fits(&rest[..bounds[mid]]) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let end = bounds[lo.saturating_sub(1)];
        let cut = rest[..end]
            .rfind(' ')
            .filter(|&space| space > end / 2)
            .unwrap_or(end);
        out.push(rest[..cut].trim_end().to_owned());
        rest = rest[cut..].strip_prefix(' ').unwrap_or(&rest[cut..]);
        if rest.is_empty() {
            return out;
        }
    }
    out.push(rest.to_owned());
    out
}

/// Escapes text for HTML (both dialects).
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// Whether a link's address may be a link: `http`, `https`, `mailto`.
fn safe_url(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
}

/// The HTML a platform takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// Telegram's parse mode: `b i s u code pre a blockquote`, newlines as
    /// written; headings bold, lists as `•` lines, tables as text.
    Telegram,
    /// The common subset of Matrix's `formatted_body` and email: paragraphs,
    /// headings, lists, quotes, code, links, tables, rules.
    Common,
}

/// One piece of Markdown as plain text: emphasis marks dropped, inline code
/// kept in backticks, code blocks without their fences, list items as `-` or
/// `1.` lines, links as `text (address)`, quotes as `> ` lines.
pub fn plain(markdown: &str) -> String {
    Writer::new(Style::Plain).run(markdown)
}

/// One piece of Markdown as HTML in `dialect`.
pub fn html(markdown: &str, dialect: Dialect) -> String {
    let style = match dialect {
        Dialect::Telegram => Style::Telegram,
        Dialect::Common => Style::Common,
    };
    Writer::new(style).run(markdown)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    Plain,
    Telegram,
    Common,
}

/// Walks a piece's events into text of one style.
struct Writer {
    style: Style,
    out: String,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Open quotes (plain text prefixes their lines with `> `).
    quotes: usize,
    /// Open links: their address, when shown as a link.
    links: Vec<(String, usize)>,
    /// Inside a code block (text is escaped, not marked).
    code: bool,
    /// Inside a table's head row (common HTML: `th`).
    head: bool,
    /// Just after a list item's marker or a quote's start: the next block
    /// is not separated from it.
    fresh: bool,
}

impl Writer {
    fn new(style: Style) -> Self {
        Self {
            style,
            out: String::new(),
            lists: Vec::new(),
            quotes: 0,
            links: Vec::new(),
            code: false,
            head: false,
            fresh: false,
        }
    }

    fn run(mut self, markdown: &str) -> String {
        for event in Parser::new_ext(markdown, options()) {
            self.event(event);
        }
        let trimmed = self.out.trim_end().len();
        self.out.truncate(trimmed);
        self.out
    }

    fn html(&self) -> bool {
        self.style != Style::Plain
    }

    /// Text as it goes out: escaped for HTML, quote-prefixed in plain text.
    fn text(&mut self, text: &str) {
        self.fresh = false;
        if self.html() {
            self.out.push_str(&escape_html(text));
        } else if self.quotes > 0 {
            let prefix = "> ".repeat(self.quotes);
            let mut lines = text.split('\n');
            if let Some(first) = lines.next() {
                self.out.push_str(first);
            }
            for line in lines {
                self.out.push('\n');
                self.out.push_str(&prefix);
                self.out.push_str(line);
            }
        } else {
            self.out.push_str(text);
        }
    }

    fn tag(&mut self, tag: &str) {
        self.fresh = false;
        self.out.push_str(tag);
    }

    /// Starts a block where text blocks are separated by a blank line
    /// (plain text and Telegram; common HTML has elements).
    fn separate(&mut self) {
        if self.style == Style::Common || self.out.is_empty() {
            return;
        }
        // A list item's or a quote's first block follows its marker.
        if self.fresh {
            return;
        }
        let newlines = self.out.len() - self.out.trim_end_matches('\n').len();
        let want = if self.lists.is_empty() { 2 } else { 1 };
        for _ in newlines..want {
            self.out.push('\n');
        }
        if self.style == Style::Plain && self.quotes > 0 {
            self.out.push_str(&"> ".repeat(self.quotes));
        }
    }

    fn line_break(&mut self) {
        match self.style {
            Style::Common => self.tag("<br>\n"),
            Style::Plain | Style::Telegram => self.text("\n"),
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.text(&text),
            Event::Code(code) => match self.style {
                Style::Plain => self.text(&format!("`{code}`")),
                Style::Telegram | Style::Common => {
                    self.tag("<code>");
                    self.text(&code);
                    self.tag("</code>");
                }
            },
            // The model's raw HTML is text.
            Event::Html(raw) | Event::InlineHtml(raw) => self.text(&raw),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.text(&math),
            Event::FootnoteReference(name) => self.text(&format!("[^{name}]")),
            Event::SoftBreak => self.text("\n"),
            Event::HardBreak => self.line_break(),
            Event::Rule => match self.style {
                Style::Common => self.tag("<hr>\n"),
                Style::Plain | Style::Telegram => {
                    self.separate();
                    self.text("———");
                }
            },
            Event::TaskListMarker(done) => self.text(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        let style = self.style;
        match tag {
            Tag::Paragraph => match style {
                Style::Common => self.tag("<p>"),
                Style::Plain | Style::Telegram => self.separate(),
            },
            Tag::Heading { level, .. } => match style {
                Style::Common => self.tag(&format!("<{}>", heading(level))),
                Style::Telegram => {
                    self.separate();
                    self.tag("<b>");
                }
                Style::Plain => self.separate(),
            },
            Tag::BlockQuote(_) => {
                self.separate();
                match style {
                    Style::Common => self.tag("<blockquote>\n"),
                    Style::Telegram => self.tag("<blockquote>"),
                    Style::Plain => {
                        if !self.out.is_empty() && !self.out.ends_with('\n') {
                            self.out.push('\n');
                        }
                        self.out.push_str("> ");
                    }
                }
                self.quotes += 1;
                self.fresh = true;
            }
            Tag::CodeBlock(kind) => {
                self.code = true;
                let language = match &kind {
                    CodeBlockKind::Fenced(info) => info
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                    CodeBlockKind::Indented => String::new(),
                };
                match style {
                    Style::Plain => self.separate(),
                    Style::Telegram | Style::Common => {
                        self.separate();
                        let class = if language.is_empty() {
                            String::new()
                        } else {
                            format!(" class=\"language-{}\"", escape_html(&language))
                        };
                        self.tag(&format!("<pre><code{class}>"));
                    }
                }
            }
            Tag::HtmlBlock => self.separate(),
            Tag::List(first) => {
                if style == Style::Common {
                    match first {
                        Some(1) => self.tag("<ol>\n"),
                        Some(n) => self.tag(&format!("<ol start=\"{n}\">\n")),
                        None => self.tag("<ul>\n"),
                    }
                } else if self.lists.is_empty() {
                    self.separate();
                }
                self.lists.push(first);
            }
            Tag::Item => {
                if style == Style::Common {
                    self.tag("<li>");
                    return;
                }
                if !self.out.is_empty() && !self.out.ends_with('\n') {
                    self.text("\n");
                }
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ if style == Style::Telegram => "• ".to_owned(),
                    _ => "- ".to_owned(),
                };
                self.text(&format!("{}{marker}", "  ".repeat(depth)));
                self.fresh = true;
            }
            Tag::Table(_) => match style {
                Style::Common => self.tag("<table>\n"),
                Style::Plain | Style::Telegram => self.separate(),
            },
            Tag::TableHead => {
                self.head = true;
                if style == Style::Common {
                    self.tag("<thead><tr>");
                }
            }
            Tag::TableRow => {
                if style == Style::Common {
                    self.tag("<tr>");
                } else if !self.out.ends_with('\n') {
                    self.text("\n");
                }
            }
            Tag::TableCell => match style {
                Style::Common => self.tag(if self.head { "<th>" } else { "<td>" }),
                Style::Plain | Style::Telegram => {
                    if !self.out.ends_with('\n') && !self.out.is_empty() {
                        self.text(" | ");
                    }
                }
            },
            Tag::Emphasis => self.mark("<i>", "<em>"),
            Tag::Strong => self.mark("<b>", "<strong>"),
            Tag::Strikethrough => self.mark("<s>", "<del>"),
            Tag::Superscript | Tag::Subscript => {}
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                let url = dest_url.to_string();
                let at = self.out.len();
                if self.html() && safe_url(&url) {
                    self.tag(&format!("<a href=\"{}\">", escape_html(&url)));
                }
                self.links.push((url, at));
            }
            Tag::FootnoteDefinition(name) => {
                self.separate();
                self.text(&format!("[^{name}]: "));
            }
            Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => self.separate(),
        }
    }

    /// An inline mark: Telegram's tag, or the common one; none in plain text.
    fn mark(&mut self, telegram: &str, common: &str) {
        match self.style {
            Style::Telegram => self.tag(telegram),
            Style::Common => self.tag(common),
            Style::Plain => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        let style = self.style;
        match tag {
            TagEnd::Paragraph => {
                if style == Style::Common {
                    self.tag("</p>\n");
                }
            }
            TagEnd::Heading(level) => match style {
                Style::Common => self.tag(&format!("</{}>\n", heading(level))),
                Style::Telegram => self.tag("</b>"),
                Style::Plain => {}
            },
            TagEnd::BlockQuote(_) => {
                self.quotes = self.quotes.saturating_sub(1);
                match style {
                    Style::Common => self.tag("</blockquote>\n"),
                    Style::Telegram => {
                        let trimmed = self.out.trim_end_matches('\n').len();
                        self.out.truncate(trimmed);
                        self.tag("</blockquote>");
                    }
                    Style::Plain => {}
                }
            }
            TagEnd::CodeBlock => {
                self.code = false;
                match style {
                    Style::Plain => {
                        let trimmed = self.out.trim_end_matches('\n').len();
                        self.out.truncate(trimmed);
                    }
                    Style::Telegram | Style::Common => {
                        // The code's last newline is the block's end, not code.
                        if self.out.ends_with('\n') {
                            self.out.pop();
                        }
                        self.tag("</code></pre>");
                        if style == Style::Common {
                            self.tag("\n");
                        }
                    }
                }
            }
            TagEnd::List(ordered) => {
                self.lists.pop();
                if style == Style::Common {
                    self.tag(if ordered { "</ol>\n" } else { "</ul>\n" });
                }
            }
            TagEnd::Item => {
                if style == Style::Common {
                    self.tag("</li>\n");
                }
            }
            TagEnd::Table => {
                if style == Style::Common {
                    self.tag("</tbody></table>\n");
                }
            }
            TagEnd::TableHead => {
                self.head = false;
                match style {
                    Style::Common => self.tag("</tr></thead><tbody>\n"),
                    Style::Plain | Style::Telegram => self.text("\n"),
                }
            }
            TagEnd::TableRow => {
                if style == Style::Common {
                    self.tag("</tr>\n");
                }
            }
            TagEnd::TableCell => {
                if style == Style::Common {
                    self.tag(if self.head { "</th>" } else { "</td>" });
                }
            }
            TagEnd::Emphasis => self.mark("</i>", "</em>"),
            TagEnd::Strong => self.mark("</b>", "</strong>"),
            TagEnd::Strikethrough => self.mark("</s>", "</del>"),
            TagEnd::Link | TagEnd::Image => {
                let Some((url, at)) = self.links.pop() else {
                    return;
                };
                if self.html() && safe_url(&url) {
                    self.tag("</a>");
                    return;
                }
                let shown = self.out.get(at..).unwrap_or_default().to_owned();
                if !url.is_empty() && shown.trim() != url && shown.trim() != escape_html(&url) {
                    self.text(&format!(" ({url})"));
                }
            }
            TagEnd::FootnoteDefinition
            | TagEnd::HtmlBlock
            | TagEnd::Superscript
            | TagEnd::Subscript
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_) => {}
        }
    }
}

fn heading(level: HeadingLevel) -> &'static str {
    match level {
        HeadingLevel::H1 => "h1",
        HeadingLevel::H2 => "h2",
        HeadingLevel::H3 => "h3",
        HeadingLevel::H4 => "h4",
        HeadingLevel::H5 => "h5",
        HeadingLevel::H6 => "h6",
    }
}

/// Splits one line of plain text into parts of at most `max` bytes, at
/// spaces where possible (the last space past the middle), never inside a
/// UTF-8 character: IRC's lines.
pub fn split_bytes(line: &str, max: usize) -> Vec<String> {
    let max = max.max(4);
    cut_line(line, &|part: &str| part.len() <= max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_chars(max: usize) -> impl Fn(&str) -> Vec<String> {
        move |text| chunk(text, max, &chars)
    }

    #[test]
    fn short_text_is_one_piece_and_empty_text_none() {
        assert_eq!(by_chars(100)("hello"), vec!["hello"]);
        assert!(by_chars(100)("  \n").is_empty());
    }

    #[test]
    fn pieces_break_at_paragraphs_and_respect_the_limit() {
        let para = "word ".repeat(30).trim_end().to_owned(); // 149 chars
        let text = format!("{para}\n\n{para}\n\n{para}");
        let pieces = by_chars(320)(&text);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0], format!("{para}\n\n{para}"));
        assert_eq!(pieces[1], para);
    }

    #[test]
    fn a_code_block_that_fits_is_never_split() {
        let code = format!("```rust\n{}\n```", "let x = 1;\n".repeat(8).trim_end());
        let text = format!("{}\n\n{code}\n\nafter", "intro ".repeat(20).trim_end());
        let pieces = by_chars(150)(&text);
        assert!(pieces.iter().any(|p| p.contains(&code)), "{pieces:#?}");
        for piece in &pieces {
            assert_eq!(piece.matches("```").count() % 2, 0, "{piece}");
        }
    }

    #[test]
    fn a_long_code_block_is_cut_at_lines_and_fenced_again() {
        let body: Vec<String> = (0..100).map(|i| format!("line {i:03}")).collect();
        let code = format!("~~~python\n{}\n~~~", body.join("\n"));
        let pieces = by_chars(200)(&code);
        assert!(pieces.len() > 4);
        for piece in &pieces {
            assert!(
                piece.starts_with("~~~python\n") && piece.ends_with("\n~~~"),
                "{piece}"
            );
            assert!(piece.chars().count() <= 200);
        }
        let rejoined: Vec<String> = pieces
            .iter()
            .flat_map(|p| {
                p.lines()
                    .filter(|l| !l.starts_with("~~~"))
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(rejoined, body);
    }

    #[test]
    fn one_long_line_is_cut_at_spaces_or_anywhere() {
        let text = "x".repeat(250);
        let pieces = by_chars(100)(&text);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), text);
        let words = "abc ".repeat(60);
        for piece in by_chars(50)(&words) {
            assert!(piece.chars().count() <= 50);
            assert!(!piece.starts_with(' '));
        }
    }

    #[test]
    fn the_limit_is_in_the_platforms_unit() {
        // 😀 is one character, two UTF-16 units, four bytes.
        let text = "😀".repeat(30);
        assert!(chunk(&text, 40, &chars).len() == 1);
        assert_eq!(chunk(&text, 40, &utf16).len(), 2);
        let pieces = chunk(&text, 40, &|s: &str| s.len());
        assert_eq!(pieces.len(), 3);
        assert!(pieces.iter().all(|p| p.len() <= 40));
        assert_eq!(pieces.concat(), text);
    }

    #[test]
    fn bytes_split_on_words_and_characters() {
        let line = "grüße aus köln ".repeat(20);
        let parts = split_bytes(line.trim_end(), 50);
        assert!(parts.iter().all(|p| p.len() <= 50), "{parts:?}");
        assert!(
            parts
                .iter()
                .all(|p| !p.starts_with(' ') && !p.ends_with(' '))
        );
        assert_eq!(parts.join(" "), line.trim_end());
        let cjk = "漢".repeat(40); // 3 bytes each, no spaces
        let parts = split_bytes(&cjk, 10);
        assert!(parts.iter().all(|p| p.len() <= 10), "{parts:?}");
        assert!(parts[..parts.len() - 1].iter().all(|p| p.len() == 9));
        assert_eq!(parts.concat(), cjk);
    }

    #[test]
    fn telegram_html_escapes_and_marks() {
        assert_eq!(
            html("a < b & **c** `x<y>` *i* ~~s~~", Dialect::Telegram),
            "a &lt; b &amp; <b>c</b> <code>x&lt;y&gt;</code> <i>i</i> <s>s</s>"
        );
        assert_eq!(
            html("see:\n```rust\nif a < b {}\n```\ndone", Dialect::Telegram),
            "see:\n\n<pre><code class=\"language-rust\">if a &lt; b {}</code></pre>\n\ndone"
        );
        assert_eq!(
            html("# Title\n\n- one\n- two\n\n1. first", Dialect::Telegram),
            "<b>Title</b>\n\n• one\n• two\n\n1. first"
        );
        assert_eq!(
            html("> quoted\n\n- loose\n\n- items", Dialect::Telegram),
            "<blockquote>quoted</blockquote>\n\n• loose\n• items"
        );
        // Unpaired markers stay text.
        assert_eq!(html("2 ** 3 and `x", Dialect::Telegram), "2 ** 3 and `x");
    }

    #[test]
    fn what_the_model_wrote_never_becomes_markup() {
        let reply = "<script>window.x=1</script>\n\n[click](javascript:alert(1)) and <b>hi</b>";
        for dialect in [Dialect::Telegram, Dialect::Common] {
            let out = html(reply, dialect);
            assert!(!out.contains("<script"), "{out}");
            assert!(!out.contains("<b>hi"), "{out}");
            assert!(!out.contains("href=\"javascript"), "{out}");
            assert!(out.contains("click (javascript:alert(1))"), "{out}");
        }
        let linked = html("[docs](https://x.example/?a=1&b=\"2\")", Dialect::Common);
        assert_eq!(
            linked,
            "<p><a href=\"https://x.example/?a=1&amp;b=&quot;2&quot;\">docs</a></p>"
        );
    }

    #[test]
    fn common_html_has_elements() {
        let out = html(
            "## Plan\n\nDo **this**:\n\n3. a\n4. b\n\n> quoted\n\n| k | v |\n|---|---|\n| a | 1 |",
            Dialect::Common,
        );
        assert_eq!(
            out,
            "<h2>Plan</h2>\n<p>Do <strong>this</strong>:</p>\n<ol start=\"3\">\n<li>a</li>\n<li>b</li>\n</ol>\n\
             <blockquote>\n<p>quoted</p>\n</blockquote>\n\
             <table>\n<thead><tr><th>k</th><th>v</th></tr></thead><tbody>\n<tr><td>a</td><td>1</td></tr>\n</tbody></table>"
        );
    }

    #[test]
    fn plain_text_reads_as_written() {
        assert_eq!(
            plain(
                "# Done\n\nI changed **two** files, see [the PR](https://x.example/1):\n\n- `a.rs`\n  - nested\n- b.rs\n\n```sh\ncargo test\n```\n\n> a quote\n> two lines"
            ),
            "Done\n\nI changed two files, see the PR (https://x.example/1):\n\n- `a.rs`\n  - nested\n- b.rs\n\ncargo test\n\n> a quote\n> two lines"
        );
        assert_eq!(plain("<https://x.example>"), "https://x.example");
    }
}
