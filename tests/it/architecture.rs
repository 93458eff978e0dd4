//! Architecture invariants, checked on the source tree:
//! the core knows no face, no part imports a face, only the ACP face knows
//! ACP types, only the store knows SQL, and nothing but the protocol writer
//! touches stdout. Every line of every file under `src/` is read but for
//! the `#[cfg(test)]` items and the modules declared only for tests.

use std::path::{Path, PathBuf};

fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The code of a file without comments, line by line with numbers. Every
/// line is read, but for the items under `#[cfg(test)]` (see [`test_items`]);
/// a file that is a test-only module ([`test_only`]) has no code.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    if test_only(path) {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    without_tests(&text)
}

/// `text` without its comments and its `#[cfg(test)]` items, line by line
/// with numbers (what is left out stays as blanks, so lines keep theirs).
fn without_tests(text: &str) -> Vec<(usize, String)> {
    let (mut chars, literal) = lex(text);
    for (start, end, _) in test_items(&chars, &literal) {
        for c in &mut chars[start..end] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    }
    let code: String = chars.into_iter().collect();
    code.lines()
        .enumerate()
        .map(|(index, line)| (index + 1, line.to_owned()))
        .collect()
}

/// A text's characters with its comments blanked (newlines kept), and for
/// each whether it is inside a string or character literal, where braces
/// and attributes mean nothing.
fn lex(text: &str) -> (Vec<char>, Vec<bool>) {
    let mut chars: Vec<char> = text.chars().collect();
    let mut literal = vec![false; chars.len()];
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut at = 0;
    while at < chars.len() {
        let next = chars.get(at + 1).copied();
        match chars[at] {
            '/' if next == Some('/') => {
                while at < chars.len() && chars[at] != '\n' {
                    chars[at] = ' ';
                    at += 1;
                }
            }
            '/' if next == Some('*') => {
                let mut depth = 0;
                while at < chars.len() {
                    let pair = (chars[at], chars.get(at + 1).copied());
                    let width = match pair {
                        ('/', Some('*')) => {
                            depth += 1;
                            2
                        }
                        ('*', Some('/')) => {
                            depth -= 1;
                            2
                        }
                        _ => 1,
                    };
                    for c in &mut chars[at..(at + width).min(literal.len())] {
                        if *c != '\n' {
                            *c = ' ';
                        }
                    }
                    at += width;
                    if depth == 0 {
                        break;
                    }
                }
            }
            // A raw string: `r"…"`, `r#"…"#`, also after `b` or `c`.
            'r' if !(at > 0
                && ident(chars[at - 1])
                && !(matches!(chars[at - 1], 'b' | 'c') && (at < 2 || !ident(chars[at - 2])))) =>
            {
                let hashes = chars[at + 1..].iter().take_while(|c| **c == '#').count();
                if chars.get(at + 1 + hashes) != Some(&'"') {
                    at += 1;
                    continue;
                }
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                let body = at + 2 + hashes;
                let end = (body..chars.len())
                    .find(|i| chars[*i..].starts_with(&close))
                    .map_or(chars.len(), |i| i + close.len());
                literal[at..end].fill(true);
                at = end;
            }
            '"' => {
                let start = at;
                at += 1;
                while at < chars.len() && chars[at] != '"' {
                    at += if chars[at] == '\\' { 2 } else { 1 };
                }
                let end = (at + 1).min(chars.len());
                literal[start..end].fill(true);
                at = end;
            }
            // A character literal (`'{'`, `'\''`), not a lifetime (`'a`).
            '\'' => {
                let end = if next == Some('\\') {
                    // The escaped character, then the closing quote
                    // (`'\''`, `'\\'`, `'\u{7f}'`).
                    (at + 3..chars.len().min(at + 12))
                        .find(|i| chars[*i] == '\'')
                        .map(|i| i + 1)
                } else if chars.get(at + 2) == Some(&'\'') {
                    Some(at + 3)
                } else {
                    None
                };
                match end {
                    Some(end) => {
                        literal[at..end].fill(true);
                        at = end;
                    }
                    None => at += 1,
                }
            }
            _ => at += 1,
        }
    }
    (chars, literal)
}

/// The items under `#[cfg(test)]` in lexed code, each as the range from
/// the attribute to the item's end and, for a module, its name. An item
/// ends with a `;` or its outermost `{…}` block (`mod tests { … }`, `fn`,
/// `impl`), and one that is not an item (a field, an argument, an arm)
/// also at a `,`; it never reaches past the block around it.
fn test_items(chars: &[char], literal: &[bool]) -> Vec<(usize, usize, Option<String>)> {
    let code = |at: usize| (!literal[at]).then_some(chars[at]);
    let skip_space = |mut at: usize| {
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        at
    };
    // `#[cfg(test)]` at `at`, spaces allowed between its tokens: its end.
    let cfg_test = |at: usize| {
        let mut at = at;
        for token in ["#", "[", "cfg", "(", "test", ")", "]"] {
            at = skip_space(at);
            let token: Vec<char> = token.chars().collect();
            if !chars[at..].starts_with(&token) || literal[at] {
                return None;
            }
            at += token.len();
        }
        Some(at)
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        let Some(mut end) = code(at).filter(|c| *c == '#').and_then(|_| cfg_test(at)) else {
            at += 1;
            continue;
        };
        // Other outer attributes of the item.
        loop {
            let next = skip_space(end);
            if next >= chars.len() || code(next) != Some('#') {
                break;
            }
            let open = skip_space(next + 1);
            if chars.get(open) != Some(&'[') {
                break;
            }
            let mut depth = 0;
            end = open;
            while end < chars.len() {
                match code(end) {
                    Some('[') => depth += 1,
                    Some(']') => {
                        depth -= 1;
                        if depth == 0 {
                            end += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                end += 1;
            }
        }
        let start = skip_space(end);
        let head: String = chars[start..chars.len().min(start + 200)].iter().collect();
        let words: Vec<&str> = head
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .collect();
        let mut keywords = words.iter().skip_while(|w| {
            matches!(
                **w,
                "pub" | "crate" | "super" | "self" | "in" | "async" | "unsafe" | "extern"
            )
        });
        let first = keywords.next().copied().unwrap_or_default();
        let item = matches!(
            first,
            "mod"
                | "fn"
                | "impl"
                | "struct"
                | "enum"
                | "union"
                | "trait"
                | "use"
                | "const"
                | "static"
                | "type"
                | "macro_rules"
                | "let"
        );
        let module = (first == "mod").then(|| keywords.next().unwrap_or(&"").to_string());
        let mut depth = 0_i32;
        end = start;
        while end < chars.len() {
            match code(end) {
                Some('(' | '[' | '{') => depth += 1,
                Some(')' | ']' | '}') if depth == 0 => break,
                Some(')' | ']') => depth -= 1,
                Some('}') => {
                    depth -= 1;
                    if depth == 0 {
                        end += 1;
                        break;
                    }
                }
                Some(';') if depth == 0 => {
                    end += 1;
                    break;
                }
                Some(',') if depth == 0 && !item => {
                    end += 1;
                    break;
                }
                _ => {}
            }
            end += 1;
        }
        found.push((at, end, module));
        at = end;
    }
    found
}

/// Whether a source file is a module compiled for tests only: declared
/// `#[cfg(test)] mod name;` (or inside such a module) by the module above
/// it, whichever file that is (`a.rs` or `a/mod.rs` for `a/name.rs`; an
/// inline module is looked for in the file above it).
fn test_only(file: &Path) -> bool {
    let stem = file.file_stem().unwrap_or_default().to_string_lossy();
    let dir = file.parent().unwrap_or(Path::new(""));
    if stem == "lib" || stem == "main" {
        return false;
    }
    if stem == "mod" {
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        return declared_for_tests(dir.parent().unwrap_or(Path::new("")), &name);
    }
    declared_for_tests(dir, &stem)
}

/// Whether the module `name` whose files are in `dir` is declared under
/// `#[cfg(test)]`, or is inside a module that is.
fn declared_for_tests(dir: &Path, name: &str) -> bool {
    let above = [
        dir.with_extension("rs"),
        dir.join("mod.rs"),
        dir.join("lib.rs"),
        dir.join("main.rs"),
    ];
    let mut found = false;
    for file in above.iter().filter(|f| f.is_file()) {
        found = true;
        let text = std::fs::read_to_string(file).unwrap();
        let (chars, literal) = lex(&text);
        if test_items(&chars, &literal)
            .iter()
            .any(|(_, _, module)| module.as_deref() == Some(name))
        {
            return true;
        }
    }
    if found {
        // The module above is a file: it is for tests if it is declared so.
        return above[..2]
            .iter()
            .find(|f| f.is_file())
            .is_some_and(|f| test_only(f));
    }
    // No file above: `dir` is an inline module of the file above it (or no
    // module at all).
    match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(inline)) if !parent.as_os_str().is_empty() => {
            declared_for_tests(parent, &inline.to_string_lossy())
        }
        _ => false,
    }
}

/// Files under `module` (the file `src/module.rs` and the folder `src/module/`).
fn module_files(module: &str) -> Vec<PathBuf> {
    let mut files = vec![src().join(format!("{module}.rs"))];
    let dir = src().join(module);
    if dir.is_dir() {
        files.extend(sources(&dir));
    }
    files.into_iter().filter(|f| f.exists()).collect()
}

/// Whether `needle` occurs in `line` not as the tail of a longer name
/// (`println!` must not match `eprintln!`).
fn contains_word(line: &str, needle: &str) -> bool {
    line.match_indices(needle).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

fn violations(files: &[PathBuf], forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        for (number, line) in code_lines(file) {
            for needle in forbidden {
                if contains_word(&line, needle) {
                    found.push(format!(
                        "{}:{number}: `{needle}` in {}",
                        file.display(),
                        line.trim()
                    ));
                }
            }
        }
    }
    found
}

/// Names that mean "depends on a face".
const FACES: &[&str] = &[
    "crate::acp",
    "crate::headless",
    "crate::cli",
    "crate::http",
    "crate::channels",
    "crate::stdout",
    "agent_client_protocol",
    "axum",
    "jsonrpsee",
];

#[test]
fn core_imports_no_face_and_no_provider_implementation() {
    let mut forbidden = FACES.to_vec();
    forbidden.extend([
        "crate::providers",
        "rusqlite",
        "crate::store",
        "crate::app",
        "crate::config",
        "crate::tools",
        "crate::sandbox",
    ]);
    let found = violations(&module_files("core"), &forbidden);
    assert!(
        found.is_empty(),
        "the core must not know faces, providers, tools, the sandbox, the store or SQL:\n{}",
        found.join("\n")
    );
}

/// Tools plan and execute; what a call is judged by and leaves behind
/// (approvals, pending answers, receipts, events) is the gate's.
#[test]
fn tools_know_nothing_of_approvals_receipts_or_events() {
    let root = src();
    let gate_only = ["approval", "pending", "receipt", "event", "emitter", "gate"];
    let mut found = Vec::new();
    for file in module_files("tools") {
        let module = module_path(&root, &file);
        let code: String = code_lines(&file)
            .into_iter()
            .map(|(_, line)| line + "\n")
            .collect();
        for path in named_paths(&module, &code) {
            if path.len() > 1 && path[0] == "core" && gate_only.contains(&path[1].as_str()) {
                found.push(format!("{}: crate::{}", file.display(), path.join("::")));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tools must not know approvals, receipts or events:\n{}",
        found.join("\n")
    );
    // The check sees a grouped import.
    let grouped = named_paths(
        &["tools".to_owned(), "x".to_owned()],
        "use crate::core::{event::Event, tool::Tool};",
    );
    assert!(
        grouped.iter().any(|p| p[..2] == ["core", "event"]),
        "{grouped:?}"
    );
}

#[test]
fn store_and_providers_import_no_face() {
    let mut files = module_files("store");
    files.extend(module_files("providers"));
    let found = violations(&files, FACES);
    assert!(
        found.is_empty(),
        "store and providers must not know faces:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_acp_face_knows_acp_types_and_only_the_store_knows_sql() {
    let acp: Vec<PathBuf> = module_files("acp");
    let store: Vec<PathBuf> = module_files("store");
    let others: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| !acp.contains(f))
        .collect();
    let found = violations(&others, &["agent_client_protocol"]);
    assert!(
        found.is_empty(),
        "ACP types outside src/acp:\n{}",
        found.join("\n")
    );
    let others: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| !store.contains(f))
        .collect();
    let found = violations(
        &others,
        &["rusqlite", "tokio_postgres", "deadpool_postgres"],
    );
    assert!(
        found.is_empty(),
        "SQL outside src/store:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_mcp_client_knows_rmcp_and_the_core_knows_no_mcp() {
    let mcp: Vec<PathBuf> = module_files("mcp");
    assert!(mcp.len() >= 2, "src/mcp.rs and src/mcp/ are expected");
    let others: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| !mcp.contains(f))
        .collect();
    let found = violations(&others, &["rmcp"]);
    assert!(
        found.is_empty(),
        "rmcp outside src/mcp:\n{}",
        found.join("\n")
    );
    let found = violations(&module_files("core"), &["crate::mcp"]);
    assert!(
        found.is_empty(),
        "the core must not know the MCP client (it sees `SessionTools`):\n{}",
        found.join("\n")
    );
    // The MCP client knows no face either.
    let found = violations(&mcp, FACES);
    assert!(
        found.is_empty(),
        "the MCP client must not know faces:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_http_face_knows_no_other_face_and_only_it_knows_axum_and_jsonrpsee() {
    let mut http = module_files("http");
    http.push(src().join("serve.rs"));
    let found = violations(
        &module_files("http"),
        &[
            "crate::acp",
            "crate::headless",
            "crate::channels",
            "crate::stdout",
            "agent_client_protocol",
        ],
    );
    assert!(
        found.is_empty(),
        "the HTTP face must not know other faces or ACP types:\n{}",
        found.join("\n")
    );
    let others: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| !http.contains(f))
        .collect();
    let found = violations(&others, &["jsonrpsee", "tower_http", "prometheus_client"]);
    assert!(
        found.is_empty(),
        "HTTP types outside src/http and src/serve.rs:\n{}",
        found.join("\n")
    );
    // Channels that receive HTTP do it through the HTTP face's listener.
    let found = violations(&others, &["axum"]);
    assert!(
        found.is_empty(),
        "axum outside src/http and src/serve.rs:\n{}",
        found.join("\n")
    );
}

#[test]
fn channel_adapters_know_only_platforms_and_the_hub() {
    let found = violations(
        &module_files("channels"),
        &[
            "crate::acp",
            "crate::http",
            "crate::headless",
            "crate::stdout",
        ],
    );
    assert!(
        found.is_empty(),
        "the channel face must not know other faces:\n{}",
        found.join("\n")
    );
    let adapters = [
        src().join("channels").join("telegram.rs"),
        src().join("channels").join("webhook.rs"),
        src().join("channels").join("irc.rs"),
        src().join("channels").join("matrix.rs"),
        src().join("channels").join("email.rs"),
        src().join("channels").join("irc").join("proto.rs"),
        src().join("channels").join("slack.rs"),
        src().join("channels").join("slack").join("socket.rs"),
        src().join("channels").join("slack").join("events.rs"),
        src().join("channels").join("slack").join("mrkdwn.rs"),
    ];
    let found = violations(
        &adapters,
        &[
            "crate::store",
            "crate::core::runtime",
            "crate::core::session::Session",
        ],
    );
    assert!(
        found.is_empty(),
        "adapters translate; sessions, runs and the store are the hub's:\n{}",
        found.join("\n")
    );
}

#[test]
fn nothing_but_the_protocol_writer_touches_stdout() {
    let writer = src().join("stdout.rs");
    let files: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| *f != writer)
        .collect();
    let found = violations(
        &files,
        &[
            "println!",
            "print!(",
            "stdout()",
            "io::stdout",
            "Stdout",
            "dbg!(",
            "libc::STDOUT",
            "from_raw_fd(1)",
        ],
    );
    assert!(
        found.is_empty(),
        "stdout is the protocol writer's (src/stdout.rs):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_checks_catch_what_they_look_for() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.rs");
    std::fs::write(&file, "use crate::acp::peer;\nfn f() { println!(\"x\"); }\n// println!(\"in a comment\")\n#[cfg(test)]\nmod tests { fn g() { println!(); } }\nfn h() { println!(\"after the tests\"); }\n").unwrap();
    let found = violations(std::slice::from_ref(&file), &["crate::acp", "println!"]);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[2].contains(":6: `println!`"), "{found:?}");
    assert!(!contains_word("eprintln!(\"x\")", "println!"));
    assert!(contains_word("x; println!(\"x\")", "println!"));
}

/// The skipper leaves out `#[cfg(test)]` items only: what follows a test
/// module is code, braces in literals and comments do not end a block, and
/// a file declared for tests only has no code.
#[test]
fn test_items_are_skipped_and_the_code_after_them_is_seen() {
    let sample = r####"use crate::core::x;
#[cfg(test)]
mod contract;
#[cfg(test)]
#[allow(dead_code)]
mod tests {
    fn f() { let s = "}"; let c = '}'; let r = r#"} "{ "#; /* } /* } */ */ // }
        println!("hidden {s}"); }
    const Q: char = '\'';
    const B: char = '\\';
    fn lifetime<'a>(x: &'a str) -> &'a str { x }
}
fn real() { println!("seen"); } // crate::acp in a comment
#[cfg(test)]
fn helper() -> [u8; 2] { crate::acp::x(); [0; 2] }
struct S {
    a: u8,
    #[cfg(test)]
    b: crate::acp::Peer,
    c: u8,
}
impl<'a> S { fn g(&'a self) { crate::headless::run(); } }
"####;
    let seen: Vec<(usize, String)> = without_tests(sample)
        .into_iter()
        .map(|(number, line)| (number, line.trim().to_owned()))
        .filter(|(_, line)| !line.is_empty())
        .collect();
    let expected = [
        (1, "use crate::core::x;"),
        (13, "fn real() { println!(\"seen\"); }"),
        (16, "struct S {"),
        (17, "a: u8,"),
        (20, "c: u8,"),
        (21, "}"),
        (
            22,
            "impl<'a> S { fn g(&'a self) { crate::headless::run(); } }",
        ),
    ];
    let expected: Vec<(usize, String)> = expected
        .into_iter()
        .map(|(number, line)| (number, line.to_owned()))
        .collect();
    assert_eq!(seen, expected);

    // Files: a module declared for tests, what is inside it, and the rest.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for folder in ["a/contract", "a/tests", "b"] {
        std::fs::create_dir_all(root.join(folder)).unwrap();
    }
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        (
            "a.rs",
            "#[cfg(test)]\npub mod contract;\n#[cfg(test)]\nmod tests { mod helper; }\nmod real;\n",
        ),
        ("a/contract.rs", "mod deep;\nuse crate::acp::Peer;\n"),
        ("a/contract/deep.rs", "use crate::acp::Peer;\n"),
        ("a/tests/helper.rs", "use crate::acp::Peer;\n"),
        ("a/real.rs", "use crate::acp::Peer;\n"),
        (
            "b/mod.rs",
            "#[cfg(test)]\npub(crate) mod fixture;\npub mod live;\n",
        ),
        ("b/fixture.rs", "use crate::acp::Peer;\n"),
        ("b/live.rs", "use crate::acp::Peer;\n"),
    ];
    for (name, text) in files {
        std::fs::write(root.join(name), text).unwrap();
    }
    let mut found: Vec<String> = violations(&sources(root), &["crate::acp"])
        .into_iter()
        .map(|v| {
            let path = v.split(':').next().unwrap().to_owned();
            Path::new(&path)
                .strip_prefix(root)
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    found.sort();
    assert_eq!(found, ["a/real.rs", "b/live.rs"]);
}

#[test]
fn no_test_is_ignored() {
    let mut files = sources(&src());
    files.extend(sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
    ));
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains(concat!("#[", "ignore")) {
                found.push(format!("{}:{}", file.display(), number + 1));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tests must run or probe and skip, never be ignored:\n{}",
        found.join("\n")
    );
}

/// The README's documentation index lists every document in `docs/`.
#[test]
fn the_readme_index_lists_every_document() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let index = readme
        .split("\n## Documentation\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("README.md has a Documentation section");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".md") && !index.contains(&format!("- [docs/{name}](docs/{name})")) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "not in README.md's index: {missing:?}");
}

/// The module a source file is, as a path: `src/core/policy/shell.rs` is
/// `core::policy::shell`, `src/core.rs` is `core`; `lib.rs` and `main.rs`
/// are the crate root (empty).
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts
}

/// The paths a piece of code names through `crate::`, `super::` or `self::`,
/// resolved against the module it is in, with `{…}` groups expanded.
fn named_paths(module: &[String], code: &str) -> Vec<Vec<String>> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let bytes: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let rest: String = bytes[at..bytes.len().min(at + 7)].iter().collect();
        let starts = ["crate::", "super::", "self::"]
            .into_iter()
            .find(|p| rest.starts_with(p));
        let preceded = at > 0 && (ident(bytes[at - 1]) || bytes[at - 1] == ':');
        let Some(start) = starts.filter(|_| !preceded) else {
            at += 1;
            continue;
        };
        // Resolve the leading keyword(s) to an absolute prefix.
        let mut prefix: Vec<String> = match start {
            "crate::" => Vec::new(),
            "self::" => module.to_vec(),
            _ => module[..module.len().saturating_sub(1)].to_vec(),
        };
        at += start.len();
        while bytes[at..].starts_with(&['s', 'u', 'p', 'e', 'r', ':', ':']) {
            prefix.pop();
            at += 7;
        }
        let end = expand(&bytes, at, prefix, &mut found);
        at = end.max(at + 1);
    }
    found
}

/// Reads a path (`a::b::{c, d::e}`) from `at`, pushing every full path
/// it names; returns where it stopped.
fn expand(
    chars: &[char],
    mut at: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    loop {
        while at < chars.len() && chars[at].is_whitespace() {
            at += 1;
        }
        if at < chars.len() && chars[at] == '{' {
            at += 1;
            loop {
                at = expand(chars, at, prefix.clone(), out);
                while at < chars.len() && chars[at].is_whitespace() {
                    at += 1;
                }
                match chars.get(at) {
                    Some(',') => at += 1,
                    Some('}') => return at + 1,
                    _ => return at,
                }
                while at < chars.len() && chars[at].is_whitespace() {
                    at += 1;
                }
                if chars.get(at) == Some(&'}') {
                    return at + 1;
                }
            }
        }
        let start = at;
        while at < chars.len() && ident(chars[at]) {
            at += 1;
        }
        if start == at {
            out.push(prefix);
            return at;
        }
        let name: String = chars[start..at].iter().collect();
        if name != "self" {
            prefix.push(name);
        }
        if chars[at..].starts_with(&[':', ':']) {
            at += 2;
        } else {
            out.push(prefix);
            return at;
        }
    }
}

/// The import graph among the modules directly under `parent` (the crate's
/// top-level modules for `[]`, the core's for `["core"]`): an edge from each
/// module to every sibling its code names. Test modules are left out.
fn import_graph(
    root: &Path,
    parent: &[&str],
) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let depth = parent.len();
    let mut graph: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> =
        Default::default();
    for file in sources(root) {
        let module = module_path(root, &file);
        if module.len() <= depth || module[..depth] != *parent {
            continue;
        }
        let from = module[depth].clone();
        graph.entry(from.clone()).or_default();
        let code: String = code_lines(&file)
            .into_iter()
            .map(|(_, line)| line + "\n")
            .collect();
        for path in named_paths(&module, &code) {
            if path.len() > depth && path[..depth] == *parent && path[depth] != from {
                graph
                    .entry(from.clone())
                    .or_default()
                    .insert(path[depth].clone());
            }
        }
    }
    // Names that are not modules (a type re-exported at the parent) are no edges.
    let modules: std::collections::BTreeSet<String> = graph.keys().cloned().collect();
    for targets in graph.values_mut() {
        targets.retain(|t| modules.contains(t));
    }
    graph
}

/// Every cycle of a graph, each as its strongly connected set of nodes.
fn cycles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
) -> Vec<Vec<String>> {
    // Two nodes are in one cycle when each reaches the other.
    let reach = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: std::collections::BTreeMap<&String, _> =
        graph.keys().map(|node| (node, reach(node))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for node in graph.keys() {
        if !reaches[node].contains(node) || found.iter().any(|c| c.contains(node)) {
            continue;
        }
        let set = graph
            .keys()
            .filter(|other| reaches[node].contains(*other) && reaches[*other].contains(node))
            .cloned()
            .collect();
        found.push(set);
    }
    found
}

fn show_cycles(
    graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
    found: &[Vec<String>],
) -> String {
    let mut text = String::new();
    for cycle in found {
        text.push_str(&format!("cycle among {}:\n", cycle.join(", ")));
        for node in cycle {
            let inside: Vec<&String> = graph[node].iter().filter(|t| cycle.contains(t)).collect();
            text.push_str(&format!("  {node} imports {inside:?}\n"));
        }
    }
    text
}

#[test]
fn the_core_s_modules_import_each_other_without_cycles() {
    let graph = import_graph(&src(), &["core"]);
    assert!(
        graph.len() > 20,
        "the core's modules were not found: {graph:?}"
    );
    let found = cycles(&graph);
    assert!(found.is_empty(), "{}", show_cycles(&graph, &found));
}

#[test]
fn the_import_graph_checks_find_paths_and_cycles() {
    let module = ["core".to_owned(), "policy".to_owned(), "shell".to_owned()];
    let code = "use crate::core::{event::{Event, RunState}, ids::RunId};\n\
                use super::super::tool::Tool;\nuse super::Rule;\nfn f() { x::crate::no; crate::store::Store::open(); }";
    let paths: Vec<String> = named_paths(&module, code)
        .into_iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "core::event::Event",
            "core::event::RunState",
            "core::ids::RunId",
            "core::tool::Tool",
            "core::policy::Rule",
            "store::Store::open",
        ]
    );
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("core")).unwrap();
    std::fs::write(root.join("lib.rs"), "pub mod a; pub mod b; pub mod c;").unwrap();
    std::fs::write(root.join("a.rs"), "use crate::b::B;").unwrap();
    std::fs::write(root.join("b.rs"), "use crate::{c::C, core::X};").unwrap();
    std::fs::write(
        root.join("c.rs"),
        "pub fn f() { crate::a::g() }\n#[cfg(test)]\nuse crate::core;",
    )
    .unwrap();
    std::fs::write(root.join("core.rs"), "// use crate::a;").unwrap();
    let graph = import_graph(root, &[]);
    assert_eq!(cycles(&graph), [["a", "b", "c"]]);
    std::fs::write(root.join("c.rs"), "pub fn f() {}").unwrap();
    assert!(cycles(&import_graph(root, &[])).is_empty());
}

#[test]
fn top_level_modules_import_each_other_without_cycles() {
    let graph = import_graph(&src(), &[]);
    let found = cycles(&graph);
    assert!(found.is_empty(), "{}", show_cycles(&graph, &found));
}

/// The parts the composition root assembles; none of them sees the
/// configuration: `app::wiring` hands each its own settings.
const PARTS: &[&str] = &[
    "core",
    "store",
    "tools",
    "providers",
    "mcp",
    "hooks",
    "channels",
    "http",
    "sandbox",
    "signing",
    "credentials",
    "environment",
    "logging",
    "stdout",
    "views",
    "plugins",
];

/// The faces (`docs/architecture.md`): those of the bird's-eye view, which
/// turn a wire protocol into calls on the core — `acp`, `headless`
/// (`pincer run`), `terminal` (`pincer chat`), `http`, `channels` — and the
/// other commands `main.rs` hands to a face of their own — `serve`,
/// `inspect`, `login`, `memory` (`pincer memory`) — with `cli`, the command
/// line they all start from.
const FACE_MODULES: &[&str] = &[
    "acp", "headless", "terminal", "http", "channels", "serve", "inspect", "login", "memory", "cli",
];

/// A part imports no face: the parts of [`PARTS`] name no module of
/// [`FACE_MODULES`] (two parts are faces too, `http` and `channels`: each
/// names no other face). Read from the import graph of the top-level
/// modules, so `crate::`, `super::` and `self::` paths and `{…}` groups
/// all count.
#[test]
fn parts_import_no_face() {
    let graph = import_graph(&src(), &[]);
    let mut found = Vec::new();
    for part in PARTS {
        let Some(imports) = graph.get(*part) else {
            found.push(format!("{part}: not found under src/"));
            continue;
        };
        for face in FACE_MODULES {
            if face != part && imports.contains(*face) {
                found.push(format!("{part} imports the face {face}"));
            }
        }
    }
    for face in FACE_MODULES {
        assert!(graph.contains_key(*face), "{face}: not found under src/");
    }
    assert!(
        found.is_empty(),
        "parts get what faces need from the core or another part, never from a face:\n{}",
        found.join("\n")
    );
}

#[test]
fn only_the_composition_root_reads_the_configuration() {
    let app = module_files("app");
    let config = module_files("config");
    let others: Vec<PathBuf> = sources(&src())
        .into_iter()
        .filter(|f| !app.contains(f) && !config.contains(f))
        .collect();
    let found = violations(&others, &["Config::load"]);
    assert!(
        found.is_empty(),
        "the configuration is loaded in src/app.rs only:\n{}",
        found.join("\n")
    );
    let parts: Vec<PathBuf> = PARTS.iter().flat_map(|m| module_files(m)).collect();
    let found = violations(&parts, &["crate::config"]);
    assert!(
        found.is_empty(),
        "parts get settings from app::wiring, not the configuration:\n{}",
        found.join("\n")
    );
}

/// The faces a command is carried out by; only `main.rs` reaches them.
const LAUNCHERS: &[&str] = &[
    "crate::headless",
    "crate::terminal",
    "crate::serve",
    "crate::inspect",
    "crate::login",
    "acp::run",
    "crate::main",
];

#[test]
fn only_main_names_every_face() {
    let main = src().join("main.rs");
    let library: Vec<PathBuf> = sources(&src()).into_iter().filter(|f| *f != main).collect();
    let found = violations(&library, LAUNCHERS);
    assert!(
        found.is_empty(),
        "the library does not reach the faces that carry out commands; main.rs does:\n{}",
        found.join("\n")
    );
    let text = std::fs::read_to_string(&main).unwrap();
    for face in [
        "acp::run",
        "headless::run",
        "terminal::run",
        "serve::run",
        "inspect::",
        "login::",
    ] {
        assert!(text.contains(face), "main.rs does not dispatch to {face}");
    }
    // And the composition root names no face that carries out a command.
    let found = violations(&module_files("app"), &["crate::acp"]);
    assert!(found.is_empty(), "{}", found.join("\n"));
}
