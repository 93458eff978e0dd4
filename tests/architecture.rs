#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failed test
//! Architecture invariants, checked on the source tree:
//! the core knows no face, only the ACP face knows ACP types, only the store
//! knows SQL, and nothing but the protocol writer touches stdout.

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

/// The code of a file without comments, line by line with numbers. Test modules
/// (`#[cfg(test)]` to the end of the file) are skipped.
fn code_lines(path: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            Some(pos) => &line[..pos],
            None => line,
        };
        lines.push((index + 1, code.to_owned()));
    }
    lines
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
        "crate::config",
        "crate::tools",
        "crate::sandbox",
    ]);
    let found = violations(&module_files("core"), &forbidden);
    assert!(
        found.is_empty(),
        "the core must not know faces, providers, tools, the sandbox or SQL:\n{}",
        found.join("\n")
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
    let found = violations(&others, &["rusqlite"]);
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
    // The webhook channel serves its own signed endpoint with axum.
    let webhook = src().join("channels").join("webhook.rs");
    let others: Vec<PathBuf> = others.into_iter().filter(|f| *f != webhook).collect();
    let found = violations(&others, &["axum"]);
    assert!(
        found.is_empty(),
        "axum outside src/http, src/serve.rs and the webhook channel:\n{}",
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
    std::fs::write(&file, "use crate::acp::peer;\nfn f() { println!(\"x\"); }\n// println!(\"in a comment\")\n#[cfg(test)]\nmod tests { fn g() { println!(); } }\n").unwrap();
    let found = violations(std::slice::from_ref(&file), &["crate::acp", "println!"]);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(!contains_word("eprintln!(\"x\")", "println!"));
    assert!(contains_word("x; println!(\"x\")", "println!"));
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

/// The documents a person reads: every relative link points at a file in the
/// repository that exists, and none reaches outside it (a fresh clone has
/// nothing beside it).
#[test]
fn documentation_links_stay_inside_the_repository_and_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md"), root.join("schema/README.md")];
    for dir in ["docs", "editors/neovim", "editors/zed", "editors/vscode"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let code_span = regex::Regex::new(r"`[^`]*`").unwrap();
    let mut bad = Vec::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        let shown = file.strip_prefix(root).unwrap().display().to_string();
        if text.contains("../shared") {
            bad.push(format!("{shown}: names ../shared, outside the repository"));
        }
        // Links in prose only: not in code blocks or code spans.
        let mut in_fence = false;
        let prose: String = text
            .lines()
            .filter(|line| {
                if line.trim_start().starts_with("```") {
                    in_fence = !in_fence;
                    return false;
                }
                !in_fence
            })
            .map(|line| code_span.replace_all(line, "").into_owned() + "\n")
            .collect();
        for found in link.captures_iter(&prose) {
            let target = &found[1];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap();
            let resolved = file.parent().unwrap().join(path);
            match resolved.canonicalize() {
                Ok(real) if real.starts_with(root.canonicalize().unwrap()) => {}
                Ok(_) => bad.push(format!("{shown}: {target} is outside the repository")),
                Err(_) => bad.push(format!("{shown}: {target} does not exist")),
            }
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
