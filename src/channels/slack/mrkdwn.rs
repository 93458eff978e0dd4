//! A reply's Markdown as Slack's `mrkdwn`: `*bold*`, `_italic_`,
//! `~strike~`, `` `code` ``, fenced blocks, `<URL|text>` links, `> ` quotes;
//! headings bold, list items as `•` (or numbered) lines, tables as rows of
//! text. Whatever the model wrote is text, never markup: `&`, `<` and `>`
//! are escaped as Slack asks (so `<!channel>` or `<@U…>` written by the
//! model mentions nobody), and a link to anything but `http`, `https` or
//! `mailto` is shown as text with its address.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// `&`, `<` and `>` as Slack's text takes them.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// One piece of Markdown as `mrkdwn`.
pub fn mrkdwn(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut writer = Writer::default();
    for event in Parser::new_ext(markdown, options) {
        writer.event(event);
    }
    writer.out.trim_end().to_owned()
}

#[derive(Default)]
struct Writer {
    out: String,
    /// Open lists: the next number of an ordered one.
    lists: Vec<Option<u64>>,
    /// Open quotes: their lines start with `> `.
    quotes: usize,
    /// Open links: `None` when shown as a link, else the address to show
    /// after its text.
    links: Vec<Option<String>>,
    /// Just after a list marker or a quote's start: no separation.
    fresh: bool,
}

fn safe_link(address: &str) -> bool {
    let lower = address.trim().to_ascii_lowercase();
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| lower.starts_with(scheme))
        && !address.contains(['|', '<', '>', ' '])
}

impl Writer {
    fn push(&mut self, text: &str) {
        self.fresh = false;
        if self.quotes == 0 {
            self.out.push_str(text);
            return;
        }
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
    }

    fn mark(&mut self, mark: &str) {
        self.fresh = false;
        self.out.push_str(mark);
    }

    /// A new block: a blank line between blocks (one inside a list).
    fn separate(&mut self) {
        if self.out.is_empty() || self.fresh {
            return;
        }
        let newlines = self.out.len() - self.out.trim_end_matches('\n').len();
        let want = if self.lists.is_empty() { 2 } else { 1 };
        for _ in newlines..want {
            self.out.push('\n');
        }
        if self.quotes > 0 {
            self.out.push_str(&"> ".repeat(self.quotes));
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(text) => self.push(&escape(&text)),
            Event::Code(code) => {
                // Slack has no escape for a backtick inside inline code.
                let code = escape(&code).replace('`', "'");
                self.push(&format!("`{code}`"));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => self.push(&escape(&raw)),
            Event::InlineMath(math) | Event::DisplayMath(math) => self.push(&escape(&math)),
            Event::FootnoteReference(name) => self.push(&escape(&format!("[^{name}]"))),
            Event::SoftBreak | Event::HardBreak => self.push("\n"),
            Event::Rule => {
                self.separate();
                self.push("———");
            }
            Event::TaskListMarker(done) => self.push(if done { "☑ " } else { "☐ " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph | Tag::HtmlBlock => self.separate(),
            Tag::Heading { .. } => {
                self.separate();
                self.mark("*");
            }
            Tag::BlockQuote(_) => {
                self.separate();
                if !self.out.is_empty() && !self.out.ends_with('\n') && !self.fresh {
                    self.out.push('\n');
                }
                self.out.push_str("> ");
                self.quotes += 1;
                self.fresh = true;
            }
            Tag::CodeBlock(_) => {
                self.separate();
                self.mark("```\n");
            }
            Tag::List(first) => {
                if self.lists.is_empty() {
                    self.separate();
                }
                self.lists.push(first);
            }
            Tag::Item => {
                if !self.out.is_empty() && !self.out.ends_with('\n') {
                    self.out.push('\n');
                    if self.quotes > 0 {
                        self.out.push_str(&"> ".repeat(self.quotes));
                    }
                }
                let depth = self.lists.len().saturating_sub(1);
                let marker = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let marker = format!("{n}. ");
                        *n += 1;
                        marker
                    }
                    _ => "• ".to_owned(),
                };
                self.mark(&format!("{}{marker}", "    ".repeat(depth)));
                self.fresh = true;
            }
            Tag::Emphasis => self.mark("_"),
            Tag::Strong => self.mark("*"),
            Tag::Strikethrough => self.mark("~"),
            Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                if safe_link(&dest_url) {
                    self.mark("<");
                    self.mark(&escape(&dest_url));
                    self.mark("|");
                    self.links.push(None);
                } else {
                    self.links.push(Some(dest_url.to_string()));
                }
            }
            Tag::Table(_) => self.separate(),
            Tag::TableHead | Tag::TableRow => {
                if !self.out.is_empty() && !self.out.ends_with('\n') {
                    self.out.push('\n');
                }
            }
            Tag::TableCell => {
                if !self.out.ends_with('\n') && !self.out.is_empty() {
                    self.mark(" | ");
                }
            }
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_)
            | Tag::Superscript
            | Tag::Subscript => self.separate(),
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Heading(_) => self.mark("*"),
            TagEnd::BlockQuote(_) => self.quotes = self.quotes.saturating_sub(1),
            TagEnd::CodeBlock => {
                if !self.out.ends_with('\n') {
                    self.out.push('\n');
                }
                self.mark("```");
            }
            TagEnd::List(_) => {
                self.lists.pop();
            }
            TagEnd::Emphasis => self.mark("_"),
            TagEnd::Strong => self.mark("*"),
            TagEnd::Strikethrough => self.mark("~"),
            TagEnd::Link | TagEnd::Image => match self.links.pop() {
                Some(None) => self.mark(">"),
                Some(Some(address)) => {
                    // Not a link Slack should follow: the text, then the address.
                    self.push(&format!(" ({})", escape(&address)));
                }
                None => {}
            },
            TagEnd::Paragraph
            | TagEnd::HtmlBlock
            | TagEnd::Item
            | TagEnd::Table
            | TagEnd::TableHead
            | TagEnd::TableRow
            | TagEnd::TableCell
            | TagEnd::FootnoteDefinition
            | TagEnd::DefinitionList
            | TagEnd::DefinitionListTitle
            | TagEnd::DefinitionListDefinition
            | TagEnd::MetadataBlock(_)
            | TagEnd::Superscript
            | TagEnd::Subscript => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        let cases = [
            (
                "**bold** and _it_ and ~~gone~~",
                "*bold* and _it_ and ~gone~",
            ),
            ("# Title\n\ntext", "*Title*\n\ntext"),
            ("`a<b>`", "`a&lt;b&gt;`"),
            ("```rust\nfn x() {}\n```", "```\nfn x() {}\n```"),
            ("- one\n- two", "• one\n• two"),
            ("1. one\n2. two", "1. one\n2. two"),
            ("> quoted\n> more", "> quoted\n> more"),
            (
                "[site](https://example.org/a?b=1&c=2)",
                "<https://example.org/a?b=1&amp;c=2|site>",
            ),
            ("[x](javascript:alert(1))", "x (javascript:alert(1))"),
            ("<!channel> & <@U1>", "&lt;!channel&gt; &amp; &lt;@U1&gt;"),
            ("| a | b |\n|---|---|\n| 1 | 2 |", "a | b\n1 | 2"),
        ];
        for (markdown, expected) in cases {
            assert_eq!(mrkdwn(markdown), expected, "{markdown:?}");
        }
    }
}
