//! Distribution (`docs/release.md`): the published crate carries what building
//! and running Pincer needs and nothing else (`cargo package --list`, no
//! build); `scripts/release.sh` archives the real binary with README and
//! LICENSE and a checksum, byte for byte the same when run again, and writes
//! the ACP Registry entry for what it archived; the entry in
//! `packaging/acp-registry` follows the registry's schema and rules, and names
//! the version, repository and archives the crate and the script do.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

use crate::support::BIN;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn run(command: &mut Command) -> Output {
    command.stdin(Stdio::null()).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn release(args: &[&str]) -> Output {
    run(Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .args(args)
        .current_dir(root()))
}

/// Every file the published crate would hold, as `cargo package --list` says.
fn packaged_files() -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = run(Command::new(cargo)
        .args([
            "package",
            "--list",
            "--locked",
            "--allow-dirty",
            "--offline",
        ])
        .current_dir(root()));
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output).lines().map(str::to_owned).collect()
}

/// The files `include_str!` / `include_bytes!` in `src/` name, from the root.
fn included_by_sources(dir: &Path, found: &mut BTreeSet<String>) {
    let include = regex::Regex::new(r#"include_(?:str|bytes)!\(\s*"([^"]+)""#).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            included_by_sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            for capture in include.captures_iter(&text) {
                let file = path
                    .parent()
                    .unwrap()
                    .join(&capture[1])
                    .canonicalize()
                    .unwrap();
                let relative = file.strip_prefix(root().canonicalize().unwrap()).unwrap();
                found.insert(relative.to_string_lossy().into_owned());
            }
        }
    }
}

fn rust_sources(dir: &Path, found: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_sources(&path, found);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path.strip_prefix(root()).unwrap();
            found.insert(relative.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn the_published_crate_carries_what_it_needs_and_nothing_else() {
    let files = packaged_files();

    let mut needed: BTreeSet<String> = [
        "Cargo.toml",
        "Cargo.lock",
        "README.md",
        "LICENSE",
        "build.rs",
        "src/main.rs",
        "src/lib.rs",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    // Every source file, every file a source includes, every file build.rs reads.
    rust_sources(&root().join("src"), &mut needed);
    included_by_sources(&root().join("src"), &mut needed);
    let build_rs = std::fs::read_to_string(root().join("build.rs")).unwrap();
    let read_by_build = regex::Regex::new(r#""(scripts/[^"]+)""#).unwrap();
    let lists: Vec<String> = read_by_build
        .captures_iter(&build_rs)
        .map(|c| c[1].to_owned())
        .collect();
    assert!(!lists.is_empty(), "build.rs names no file it reads");
    needed.extend(lists);
    assert!(needed.contains("schema/openapi.json"), "{needed:?}");
    let missing: Vec<&String> = needed.difference(&files).collect();
    assert!(missing.is_empty(), "the crate lacks {missing:?}");

    // Nothing else: no tests, fixtures, benches, editors, docs, fuzz, dist.
    let cargo_made = ["Cargo.toml.orig", ".cargo_vcs_info.json"];
    let extra: Vec<&String> = files
        .iter()
        .filter(|f| !needed.contains(*f) && !cargo_made.contains(&f.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "the crate carries what it does not need: {extra:?}"
    );
    for forbidden in [
        "tests/", "benches/", "editors/", "docs/", "fuzz/", "target/", "dist/",
    ] {
        assert!(
            !files.iter().any(|f| f.starts_with(forbidden)),
            "{forbidden} in the crate"
        );
    }
    assert!(!files.iter().any(|f| f.contains("node_modules")));
}

fn registry_schema() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(root().join("schema/acp-registry/agent.schema.json")).unwrap();
    jsonschema::validator_for(&serde_json::from_str::<Value>(&text).unwrap()).unwrap()
}

fn schema_errors(validator: &jsonschema::Validator, entry: &Value) -> Vec<String> {
    validator
        .iter_errors(entry)
        .map(|e| e.to_string())
        .collect()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The registry's own rules beyond its schema (`build_registry.py`): the id
/// is the directory's name, archive URLs name the entry's version and never
/// `/latest/`, archive formats it accepts.
fn registry_rule_errors(entry: &Value, dir_name: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if entry["id"] != dir_name {
        errors.push(format!(
            "id {} is not the directory's name {dir_name}",
            entry["id"]
        ));
    }
    let version = entry["version"].as_str().unwrap_or_default();
    let in_url = regex::Regex::new(r"/(?:download|releases)/v?([\d.]+)/").unwrap();
    for (platform, target) in entry["distribution"]["binary"].as_object().unwrap() {
        let url = target["archive"].as_str().unwrap_or_default();
        if url.contains("/latest/") {
            errors.push(format!("{platform}: /latest/ in {url}"));
        }
        match in_url.captures(url) {
            Some(c) if &c[1] == version => {}
            _ => errors.push(format!("{platform}: {url} does not name version {version}")),
        }
        if ![".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2"]
            .iter()
            .any(|ext| url.ends_with(ext))
        {
            errors.push(format!(
                "{platform}: {url} is not an archive the registry takes"
            ));
        }
    }
    errors
}

/// The registry's icon rules: 16x16, square, monochrome through currentColor,
/// no comments.
fn icon_errors(svg: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if svg.contains("<!--") {
        errors.push("a comment".to_owned());
    }
    let root_tag = regex::Regex::new(r"<svg\b[^>]*>").unwrap();
    let Some(tag) = root_tag.find(svg) else {
        return vec!["no <svg> element".to_owned()];
    };
    let attr = |name: &str| {
        regex::Regex::new(&format!(r#"\s{name}="([^"]*)""#))
            .unwrap()
            .captures(tag.as_str())
            .map(|c| c[1].to_owned())
    };
    if attr("width").as_deref() != Some("16") || attr("height").as_deref() != Some("16") {
        errors.push(format!("not 16x16: {}", tag.as_str()));
    }
    if attr("viewBox").as_deref() != Some("0 0 16 16") {
        errors.push("viewBox is not 0 0 16 16".to_owned());
    }
    let paint = regex::Regex::new(r#"\b(fill|stroke)\s*[=:]\s*"?([^";\s>]+)"#).unwrap();
    let mut current_color = false;
    for c in paint.captures_iter(svg) {
        match c[2].to_ascii_lowercase().as_str() {
            "currentcolor" => current_color = true,
            "none" | "inherit" => {}
            other => errors.push(format!("{}={other} is a fixed color", &c[1])),
        }
    }
    if !current_color {
        errors.push("no currentColor".to_owned());
    }
    errors
}

#[test]
fn the_acp_registry_entry_follows_the_registry_and_names_the_release() {
    let entry = read_json(&root().join("packaging/acp-registry/agent.json"));
    let validator = registry_schema();
    assert_eq!(schema_errors(&validator, &entry), Vec::<String>::new());
    // The registry keeps the entry in a directory named after its id.
    assert_eq!(registry_rule_errors(&entry, "pincer"), Vec::<String>::new());

    let version = env!("CARGO_PKG_VERSION");
    let repository = env!("CARGO_PKG_REPOSITORY");
    assert_eq!(
        entry["version"], version,
        "agent.json's version is not Cargo.toml's"
    );
    assert_eq!(entry["repository"], repository);
    assert_eq!(entry["license"], env!("CARGO_PKG_LICENSE"));
    assert_eq!(entry["icon"], "./icon.svg");

    // Each platform's archive is the one release.sh makes for a target of that
    // platform, where GitHub publishes the release's assets.
    let targets = release(&["targets"]);
    assert!(targets.status.success(), "{}", stderr(&targets));
    let made: Vec<(String, String)> = stdout(&targets)
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(fields.len(), 3, "{line}");
            (fields[0].to_owned(), fields[2].to_owned())
        })
        .collect();
    let binary = entry["distribution"]["binary"].as_object().unwrap();
    assert!(binary.contains_key("linux-x86_64"), "{binary:?}");
    for (platform, target) in binary {
        let url = target["archive"].as_str().unwrap();
        let name = url.rsplit('/').next().unwrap();
        assert!(
            made.contains(&(platform.clone(), name.to_owned())),
            "{platform}: {name} is not an archive release.sh makes for it: {made:?}"
        );
        assert_eq!(
            url,
            format!("{repository}/releases/download/v{version}/{name}")
        );
        assert_eq!(target["cmd"], "./pincer");
        assert_eq!(target["args"], json!(["acp"]));
    }

    let icon = std::fs::read_to_string(root().join("packaging/acp-registry/icon.svg")).unwrap();
    assert_eq!(icon_errors(&icon), Vec::<String>::new());

    // The checks can fail: a platform the registry does not know, a missing
    // command, another version in a URL, a colored icon.
    let mut bad = entry.clone();
    bad["distribution"]["binary"]["linux-riscv64"] =
        bad["distribution"]["binary"]["linux-x86_64"].clone();
    assert!(!schema_errors(&validator, &bad).is_empty());
    let mut bad = entry.clone();
    bad["distribution"]["binary"]["linux-x86_64"]
        .as_object_mut()
        .unwrap()
        .remove("cmd");
    assert!(!schema_errors(&validator, &bad).is_empty());
    let mut bad = entry.clone();
    bad["version"] = json!("9.9.9");
    assert!(!registry_rule_errors(&bad, "pincer").is_empty());
    assert!(!icon_errors(&icon.replace("currentColor", "#ff0000")).is_empty());
    assert!(!icon_errors(&icon.replace("width=\"16\"", "width=\"24\"")).is_empty());
}

fn host_target() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "aarch64-unknown-linux-gnu"
    } else {
        "x86_64-unknown-linux-gnu"
    }
}

fn tar_list(archive: &Path) -> Vec<String> {
    let output = run(Command::new("tar").arg("-tvzf").arg(archive));
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output).lines().map(str::to_owned).collect()
}

#[test]
fn release_archives_hold_the_binary_readme_and_license_with_a_checksum() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();
    let target = host_target();
    let name = format!("pincer-{}-{target}.tar.gz", env!("CARGO_PKG_VERSION"));
    let archive = out.path().join(&name);
    // The test build's binary without its debug information (a fifth of the
    // size, so packing it twice takes seconds), where `strip` is installed.
    let work = tempfile::tempdir().unwrap();
    let built = work.path().join("pincer");
    std::fs::copy(BIN, &built).unwrap();
    let _ = Command::new("strip")
        .arg("--strip-debug")
        .arg(&built)
        .stdin(Stdio::null())
        .status();
    let built = built.to_str().unwrap();

    let packaged = release(&[
        "package", "--target", target, "--binary", built, "--out", out_dir,
    ]);
    assert!(packaged.status.success(), "{}", stderr(&packaged));
    let first = std::fs::read(&archive).unwrap();

    // The checksum file is what `sha256sum` writes and checks.
    let sums = std::fs::read_to_string(out.path().join(format!("{name}.sha256"))).unwrap();
    let digest = sums.split_whitespace().next().unwrap().to_owned();
    assert_eq!(sums, format!("{digest}  {name}\n"));
    let check = run(Command::new("sha256sum")
        .args(["-c", &format!("{name}.sha256")])
        .current_dir(out.path()));
    assert!(
        check.status.success(),
        "{}{}",
        stdout(&check),
        stderr(&check)
    );

    // The three files at the top level, owned by root, the binary executable.
    let listing = tar_list(&archive);
    let names: Vec<&str> = listing
        .iter()
        .map(|l| l.split_whitespace().last().unwrap())
        .collect();
    assert_eq!(names, ["LICENSE", "README.md", "pincer"], "{listing:#?}");
    assert!(listing[2].starts_with("-rwxr-xr-x 0/0"), "{}", listing[2]);
    assert!(listing[0].starts_with("-rw-r--r-- 0/0"), "{}", listing[0]);

    // Extracted, it is the binary that was built, and it runs.
    let unpacked = tempfile::tempdir().unwrap();
    let untar = run(Command::new("tar")
        .arg("-xzf")
        .arg(&archive)
        .arg("-C")
        .arg(unpacked.path()));
    assert!(untar.status.success(), "{}", stderr(&untar));
    let binary = unpacked.path().join("pincer");
    assert!(std::fs::read(&binary).unwrap() == std::fs::read(built).unwrap());
    for file in ["README.md", "LICENSE"] {
        assert_eq!(
            std::fs::read(unpacked.path().join(file)).unwrap(),
            std::fs::read(root().join(file)).unwrap(),
            "{file}"
        );
    }
    let version = run(Command::new("./pincer")
        .arg("--version")
        .current_dir(unpacked.path()));
    assert!(version.status.success(), "{}", stderr(&version));
    assert_eq!(
        stdout(&version).trim(),
        format!("pincer {}", env!("CARGO_PKG_VERSION"))
    );

    // Again: the same bytes.
    let again = release(&[
        "package", "--target", target, "--binary", built, "--out", out_dir,
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        std::fs::read(&archive).unwrap() == first,
        "the archive changed when made again"
    );

    // The registry entry for what is in the directory: this platform only,
    // with the archive's checksum, valid against the registry's schema.
    let manifest = release(&["manifest", "--out", out_dir]);
    assert!(manifest.status.success(), "{}", stderr(&manifest));
    let dir: PathBuf = out.path().join("acp-registry/pincer");
    let entry = read_json(&dir.join("agent.json"));
    assert_eq!(
        schema_errors(&registry_schema(), &entry),
        Vec::<String>::new()
    );
    assert_eq!(registry_rule_errors(&entry, "pincer"), Vec::<String>::new());
    let binary = entry["distribution"]["binary"].as_object().unwrap();
    let platform = if target.starts_with("aarch64") {
        "linux-aarch64"
    } else {
        "linux-x86_64"
    };
    assert_eq!(binary.keys().collect::<Vec<_>>(), [platform], "{entry:#}");
    assert_eq!(binary[platform]["sha256"], digest.as_str());
    assert!(
        binary[platform]["archive"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{name}"))
    );
    assert_eq!(
        std::fs::read(dir.join("icon.svg")).unwrap(),
        std::fs::read(root().join("packaging/acp-registry/icon.svg")).unwrap()
    );

    // What a registry client does with it: run `cmd` with `args` from where it
    // extracted the archive. Pincer answers `initialize` with the
    // authentication methods the registry requires (`docs/acp.md`).
    let cmd = binary[platform]["cmd"].as_str().unwrap();
    let args: Vec<&str> = binary[platform]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let home = tempfile::tempdir().unwrap();
    let mut agent = Command::new(unpacked.path().join(cmd))
        .args(&args)
        .current_dir(unpacked.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = agent.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(agent.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    drop(stdin);
    let status = agent.wait().unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    assert!(
        answer["result"]["authMethods"]
            .as_array()
            .is_some_and(|m| !m.is_empty()),
        "{answer}"
    );
    assert!(status.success(), "{status}");
}

#[test]
fn the_release_script_refuses_clearly() {
    let out = tempfile::tempdir().unwrap();
    let out_dir = out.path().to_str().unwrap();

    let windows = release(&[
        "package",
        "--target",
        "x86_64-pc-windows-msvc",
        "--binary",
        BIN,
        "--out",
        out_dir,
    ]);
    assert!(!windows.status.success());
    assert!(
        stderr(&windows).contains("Linux only"),
        "{}",
        stderr(&windows)
    );

    let missing = out.path().join("nothing");
    let missing = missing.to_str().unwrap();
    let no_binary = release(&[
        "package",
        "--target",
        host_target(),
        "--binary",
        missing,
        "--out",
        out_dir,
    ]);
    assert!(!no_binary.status.success());
    assert!(
        stderr(&no_binary).contains(&format!("{missing} is not an executable file")),
        "{}",
        stderr(&no_binary)
    );

    let empty = release(&["manifest", "--out", out_dir]);
    assert!(!empty.status.success());
    assert!(
        stderr(&empty).contains("none of the archives"),
        "{}",
        stderr(&empty)
    );

    let unknown = release(&["--bogus"]);
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("unknown argument: --bogus"),
        "{}",
        stderr(&unknown)
    );

    let target = release(&[
        "build",
        "--target",
        "riscv64gc-unknown-linux-gnu",
        "--out",
        out_dir,
    ]);
    assert!(!target.status.success());
    assert!(
        stderr(&target).contains("Linux only"),
        "{}",
        stderr(&target)
    );
}
