//! Rendering replies for a platform: chunking to its length limit at paragraph
//! and code-block boundaries, and its markup.

/// Splits `text` into pieces of at most `max` characters: at blank lines
/// between paragraphs first, never inside a fenced code block when the block
/// fits a piece (a block longer than a piece is cut at line ends and each part
/// re-fenced), then at line ends, then at spaces, then anywhere.
pub fn chunk(text: &str, max: usize) -> Vec<String> {
    let max = max.max(16);
    let text = text.trim_end();
    if text.chars().count() <= max {
        return if text.is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let mut pieces: Vec<String> = Vec::new();
    let mut current = String::new();
    for block in blocks(text) {
        let block_pieces = if block.chars().count() > max {
            split_block(&block, max)
        } else {
            vec![block]
        };
        for piece in block_pieces {
            let joined = if current.is_empty() {
                piece.clone()
            } else {
                format!("{current}\n\n{piece}")
            };
            if joined.chars().count() <= max {
                current = joined;
            } else {
                if !current.is_empty() {
                    pieces.push(std::mem::take(&mut current));
                }
                current = piece;
            }
        }
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Paragraphs and whole fenced code blocks, in order.
fn blocks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    let mut in_code = false;
    for line in text.lines() {
        let fence = line.trim_start().starts_with("```");
        if in_code {
            current.push(line);
            if fence {
                in_code = false;
                out.push(current.join("\n"));
                current.clear();
            }
            continue;
        }
        if fence {
            if !current.is_empty() {
                out.push(current.join("\n"));
                current.clear();
            }
            in_code = true;
            current.push(line);
        } else if line.trim().is_empty() {
            if !current.is_empty() {
                out.push(current.join("\n"));
                current.clear();
            }
        } else {
            current.push(line);
        }
    }
    if !current.is_empty() {
        out.push(current.join("\n"));
    }
    out
}

/// Cuts one block longer than `max`: a code block into re-fenced parts at line
/// ends, prose at line ends, then spaces, then anywhere.
fn split_block(block: &str, max: usize) -> Vec<String> {
    let lines: Vec<&str> = block.lines().collect();
    let fenced = lines.len() >= 2
        && lines[0].trim_start().starts_with("```")
        && lines[lines.len() - 1].trim_start().starts_with("```");
    if fenced {
        let open = lines[0];
        let inner = &lines[1..lines.len() - 1];
        let room = max.saturating_sub(open.chars().count() + 5).max(8);
        let mut out = Vec::new();
        for part in pack(inner, room) {
            out.push(format!("{open}\n{part}\n```"));
        }
        return out;
    }
    pack(&lines, max)
}

/// Packs lines into pieces of at most `max` characters, cutting long lines.
fn pack(lines: &[&str], max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in lines {
        for part in cut_line(line, max) {
            let len = current.chars().count();
            if current.is_empty() {
                current = part;
            } else if len + 1 + part.chars().count() <= max {
                current.push('\n');
                current.push_str(&part);
            } else {
                out.push(std::mem::replace(&mut current, part));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A line longer than `max`, cut at spaces where possible, else anywhere.
fn cut_line(line: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest: Vec<char> = line.chars().collect();
    while rest.len() > max {
        let window = &rest[..max];
        let cut = window
            .iter()
            .rposition(|c| *c == ' ')
            .filter(|&p| p > max / 2)
            .unwrap_or(max);
        out.push(rest[..cut].iter().collect::<String>().trim_end().to_owned());
        let skip = if cut < rest.len() && rest[cut] == ' ' {
            cut + 1
        } else {
            cut
        };
        rest = rest[skip..].to_vec();
    }
    out.push(rest.into_iter().collect());
    out
}

/// Escapes text for Telegram's HTML parse mode.
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

/// Telegram HTML for one chunk: text escaped, fenced code as `<pre><code>`,
/// inline code as `<code>`, `**bold**` as `<b>`.
pub fn telegram_html(chunk: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    let mut language = String::new();
    let mut code: Vec<&str> = Vec::new();
    let mut prose: Vec<&str> = Vec::new();
    let flush_prose = |prose: &mut Vec<&str>, out: &mut String| {
        if !prose.is_empty() {
            out.push_str(&inline_html(&prose.join("\n")));
            prose.clear();
        }
    };
    for line in chunk.split('\n') {
        let trimmed = line.trim_start();
        if in_code {
            if trimmed.starts_with("```") {
                let class = if language.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"language-{}\"", escape_html(&language))
                };
                out.push_str(&format!(
                    "<pre><code{class}>{}</code></pre>",
                    escape_html(&code.join("\n"))
                ));
                code.clear();
                in_code = false;
            } else {
                code.push(line);
            }
        } else if let Some(rest) = trimmed.strip_prefix("```") {
            flush_prose(&mut prose, &mut out);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            language = rest.trim().to_owned();
            in_code = true;
        } else {
            if prose.is_empty() && out.ends_with("</pre>") {
                out.push('\n');
            }
            prose.push(line);
        }
    }
    if in_code {
        // An unclosed fence: show what there is as code.
        out.push_str(&format!(
            "<pre><code>{}</code></pre>",
            escape_html(&code.join("\n"))
        ));
    }
    flush_prose(&mut prose, &mut out);
    out
}

/// Inline code and bold in a prose run, everything else escaped.
fn inline_html(text: &str) -> String {
    let mut out = String::new();
    for (i, part) in text.split('`').enumerate() {
        // Odd parts sit between backticks (an unpaired last one stays text).
        let between = i % 2 == 1 && text.split('`').count() > i + 1;
        if between {
            out.push_str(&format!("<code>{}</code>", escape_html(part)));
        } else if i % 2 == 1 {
            out.push('`');
            out.push_str(&bold_html(part));
        } else {
            out.push_str(&bold_html(part));
        }
    }
    out
}

fn bold_html(text: &str) -> String {
    let parts: Vec<&str> = text.split("**").collect();
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        let between = i % 2 == 1 && i + 1 < parts.len();
        if between {
            out.push_str(&format!("<b>{}</b>", escape_html(part)));
        } else {
            if i % 2 == 1 {
                out.push_str("**");
            }
            out.push_str(&escape_html(part));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_one_piece_and_empty_text_none() {
        assert_eq!(chunk("hello", 100), vec!["hello"]);
        assert!(chunk("  \n", 100).is_empty());
    }

    #[test]
    fn pieces_break_at_paragraphs_and_respect_the_limit() {
        let para = "word ".repeat(30).trim_end().to_owned(); // 149 chars
        let text = format!("{para}\n\n{para}\n\n{para}");
        let pieces = chunk(&text, 320);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0], format!("{para}\n\n{para}"));
        assert_eq!(pieces[1], para);
        assert!(pieces.iter().all(|p| p.chars().count() <= 320));
    }

    #[test]
    fn a_code_block_that_fits_is_never_split() {
        let code = format!("```rust\n{}\n```", "let x = 1;\n".repeat(8).trim_end());
        let text = format!("{}\n\n{code}\n\nafter", "intro ".repeat(20).trim_end());
        let pieces = chunk(&text, 150);
        assert!(pieces.iter().any(|p| p.contains(&code)), "{pieces:#?}");
        for piece in &pieces {
            assert_eq!(piece.matches("```").count() % 2, 0, "{piece}");
        }
    }

    #[test]
    fn a_long_code_block_is_cut_at_lines_and_refenced() {
        let body: Vec<String> = (0..100).map(|i| format!("line {i:03}")).collect();
        let code = format!("```\n{}\n```", body.join("\n"));
        let pieces = chunk(&code, 200);
        assert!(pieces.len() > 4);
        for piece in &pieces {
            assert!(
                piece.starts_with("```\n") && piece.ends_with("\n```"),
                "{piece}"
            );
            assert!(piece.chars().count() <= 200);
        }
        let rejoined: Vec<String> = pieces
            .iter()
            .flat_map(|p| {
                p.lines()
                    .filter(|l| !l.starts_with("```"))
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(rejoined, body);
    }

    #[test]
    fn one_long_line_is_cut_at_spaces_or_anywhere() {
        let text = "x".repeat(250);
        let pieces = chunk(&text, 100);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces.concat(), text);
        let words = "abc ".repeat(60);
        for piece in chunk(&words, 50) {
            assert!(piece.chars().count() <= 50);
            assert!(!piece.starts_with(' '));
        }
    }

    #[test]
    fn telegram_html_escapes_and_marks_code() {
        assert_eq!(
            telegram_html("a < b & **c** `x<y>`"),
            "a &lt; b &amp; <b>c</b> <code>x&lt;y&gt;</code>"
        );
        assert_eq!(
            telegram_html("see:\n```rust\nif a < b {}\n```\ndone"),
            "see:\n<pre><code class=\"language-rust\">if a &lt; b {}</code></pre>\ndone"
        );
        // Unpaired markers stay text.
        assert_eq!(telegram_html("2 ** 3 and `x"), "2 ** 3 and `x");
    }
}
