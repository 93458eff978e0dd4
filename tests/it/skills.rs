//! Agent Skills found, listed, shown and validated (`docs/skills.md`),
//! with the six real skills of anthropics/skills (kept beside the
//! repository in `../shared/third_party/agent-skills/`) copied into a
//! temporary project and home: scopes, a collision, an untrusted project
//! and `pincer trust`, lenient discovery of broken copies, `pincer skills
//! validate` against the reference validator (`agentskills validate`, PyPI
//! `skills-ref`, installed by `scripts/test-deps.sh`), and `GET /v1/skills`.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::TestDir;

/// The six skills, as published.
const SIX: [&str; 6] = [
    "algorithmic-art",
    "brand-guidelines",
    "internal-comms",
    "mcp-builder",
    "skill-creator",
    "webapp-testing",
];

fn anthropic_skills() -> PathBuf {
    crate::support::agent_skills()
        .expect("the tests that copy the real skills skip without them")
        .join("anthropic-skills")
}

fn copy_skill(name: &str, into: &Path) {
    crate::support::copy_tree(&anthropic_skills().join(name), &into.join(name));
}

/// A `pincer` command run in the workspace.
fn pincer(dir: &TestDir, args: &[&str]) -> Output {
    dir.command()
        .current_dir(dir.workspace())
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn list_json(dir: &TestDir) -> Value {
    let out = pincer(dir, &["skills", "list", "--json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `(name, scope, offered)` of each skill listed.
fn rows(listing: &Value) -> Vec<(String, String, bool)> {
    listing["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["scope"].as_str().unwrap().to_owned(),
                s["offered"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// The project holds three of the six and a copy of `mcp-builder`; the home
/// holds the other three, `mcp-builder` among them.
fn project_and_home(dir: &TestDir) -> (PathBuf, PathBuf) {
    let project = dir.workspace().join(".agents/skills");
    let home = dir.path().join("home/.claude/skills");
    for name in [
        "algorithmic-art",
        "brand-guidelines",
        "internal-comms",
        "mcp-builder",
    ] {
        copy_skill(name, &project);
    }
    for name in ["mcp-builder", "skill-creator", "webapp-testing"] {
        copy_skill(name, &home);
    }
    (project, home.canonicalize().unwrap())
}

#[test]
fn an_untrusted_projects_skills_are_listed_marked_until_it_is_trusted() {
    if crate::support::agent_skills().is_none() {
        return;
    }
    let dir = TestDir::new();
    let (project, home) = project_and_home(&dir);

    let listing = list_json(&dir);
    assert_eq!(listing["trusted"], false);
    let held_back = |name: &str| (name.to_owned(), "project".to_owned(), false);
    let offered = |name: &str| (name.to_owned(), "user".to_owned(), true);
    assert_eq!(
        rows(&listing),
        [
            held_back("algorithmic-art"),
            held_back("brand-guidelines"),
            held_back("internal-comms"),
            offered("mcp-builder"),
            held_back("mcp-builder"),
            offered("skill-creator"),
            offered("webapp-testing"),
        ]
    );
    // While untrusted, the user's `mcp-builder` is the one offered and is
    // not reported shadowed.
    assert_eq!(listing["diagnostics"], json!([]));
    let text = stdout(&pincer(&dir, &["skills", "list"]));
    assert!(
        text.contains("brand-guidelines  (project, not trusted: run `pincer trust`)  Applies Anthropic's official brand"),
        "{text}"
    );
    assert!(
        text.contains("skill-creator  (user)  Create new skills, modify"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "    {}",
            home.join("webapp-testing/SKILL.md").display()
        )),
        "{text}"
    );

    let out = pincer(&dir, &["trust"]);
    assert!(out.status.success(), "{out:?}");
    let listing = list_json(&dir);
    assert_eq!(listing["trusted"], true);
    let names: Vec<(String, String, bool)> = rows(&listing);
    assert_eq!(
        names,
        [
            ("algorithmic-art".into(), "project".into(), true),
            ("brand-guidelines".into(), "project".into(), true),
            ("internal-comms".into(), "project".into(), true),
            ("mcp-builder".into(), "project".into(), true),
            ("skill-creator".into(), "user".into(), true),
            ("webapp-testing".into(), "user".into(), true),
        ]
    );
    // The collision: the project's wins, the home's is reported.
    let mcp = &listing["skills"][3];
    assert_eq!(
        mcp["location"],
        json!(project.join("mcp-builder/SKILL.md").canonicalize().unwrap())
    );
    let diagnostics = listing["diagnostics"].as_array().unwrap();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(
        diagnostics[0]["location"],
        json!(home.join("mcp-builder/SKILL.md"))
    );
    assert_eq!(diagnostics[0]["skipped"], true);
    assert!(
        diagnostics[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("skill `mcp-builder` is shadowed by "),
        "{diagnostics:?}"
    );
    let text = stdout(&pincer(&dir, &["skills", "list"]));
    assert!(
        text.contains("mcp-builder  (project)  Guide for creating"),
        "{text}"
    );
    assert!(
        text.contains("skipped: ") && text.contains("is shadowed by"),
        "{text}"
    );

    // `show`: the frontmatter and the body, read from the file.
    let out = pincer(&dir, &["skills", "show", "skill-creator", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let file = std::fs::read_to_string(home.join("skill-creator/SKILL.md")).unwrap();
    let body = file.splitn(3, "---\n").nth(2).unwrap().trim();
    assert_eq!(shown["body"], body);
    assert_eq!(shown["scope"], "user");
    assert_eq!(shown["license"], Value::Null);
    let out = pincer(&dir, &["skills", "show", "brand-guidelines"]);
    let text = stdout(&out);
    assert!(
        text.starts_with("name: brand-guidelines\ndescription: Applies")
            && text.contains("license: Complete terms in LICENSE.txt\n\n# Anthropic Brand Styling"),
        "{text}"
    );
    let out = pincer(&dir, &["skills", "show", "absent"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no skill `absent`"),
        "{out:?}"
    );
}

#[test]
fn broken_skills_are_loaded_with_a_warning_or_skipped_with_the_reason() {
    let dir = TestDir::new();
    let root = dir.path().join("home/.agents/skills");
    for (folder, front) in [
        (
            "colons",
            "name: colons\ndescription: Use this skill when: the user asks about colons\n",
        ),
        ("Upper", "name: Upper\ndescription: Capitals.\n"),
        ("elsewhere", "name: other-name\ndescription: Renamed.\n"),
        ("no-description", "name: no-description\n"),
        (
            "flow",
            "name: flow\ndescription: d\nallowed-tools: [Read, Grep]\n",
        ),
        (
            "person",
            "name: person\ndescription: Only by hand.\ndisable-model-invocation: true\n",
        ),
        ("unreadable", "name: [unclosed\n"),
    ] {
        let path = root.join(folder).join("SKILL.md");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("---\n{front}---\nInstructions.\n")).unwrap();
    }
    let listing = list_json(&dir);
    let find = |name: &str| {
        listing["skills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
    };
    assert_eq!(
        find("colons").unwrap()["description"],
        "Use this skill when: the user asks about colons"
    );
    assert!(find("Upper").is_some());
    assert!(find("other-name").is_some());
    assert_eq!(
        find("flow").unwrap()["allowed_tools"],
        json!(["Read", "Grep"])
    );
    assert_eq!(find("person").unwrap()["person_only"], true);
    assert!(find("no-description").is_none());
    assert_eq!(listing["skills"].as_array().unwrap().len(), 5);
    let said: Vec<(bool, String)> = listing["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let at = d["location"].as_str().unwrap();
            let folder = Path::new(at).parent().unwrap().file_name().unwrap();
            (
                d["skipped"].as_bool().unwrap(),
                format!(
                    "{}: {}",
                    folder.to_string_lossy(),
                    d["message"].as_str().unwrap()
                ),
            )
        })
        .collect();
    for (skipped, start) in [
        (false, "colons: frontmatter is not valid YAML"),
        (false, "Upper: name `Upper` breaks the format's rules"),
        (
            false,
            "elsewhere: name `other-name` does not match its folder `elsewhere`",
        ),
        (true, "no-description: no description"),
        (true, "unreadable: invalid YAML in frontmatter"),
    ] {
        assert!(
            said.iter()
                .any(|(s, m)| *s == skipped && m.starts_with(start)),
            "{start}: {said:?}"
        );
    }
    assert_eq!(said.len(), 5, "{said:?}");
}

#[test]
fn skills_are_off_or_hidden_as_configured() {
    if crate::support::agent_skills().is_none() {
        return;
    }
    let dir = TestDir::new();
    let extra = dir.path().join("team");
    copy_skill("internal-comms", &extra);
    copy_skill("brand-guidelines", &dir.path().join("home/.agents/skills"));
    copy_skill("webapp-testing", &dir.path().join("config/pincer/skills"));
    dir.write_config(&format!(
        "[skills]\npaths = [{:?}]\ndisabled = [\"brand-guidelines\"]\n",
        extra.to_str().unwrap()
    ));
    let names: Vec<String> = rows(&list_json(&dir)).into_iter().map(|r| r.0).collect();
    assert_eq!(names, ["internal-comms", "webapp-testing"]);
    let shown = stdout(&pincer(&dir, &["config", "show"]));
    assert!(shown.contains("[skills]"), "{shown}");
    dir.write_config("[skills]\nenabled = false\n");
    assert_eq!(list_json(&dir)["skills"], json!([]));
    dir.write_config("[skills]\ndisabled = [\"\"]\n");
    let out = pincer(&dir, &["skills", "list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("skills.disabled"),
        "{out:?}"
    );
}

/// The reference validator, installed by `scripts/test-deps.sh`.
fn agentskills() -> PathBuf {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/skills-ref/.venv/bin/agentskills");
    assert!(
        bin.exists(),
        "skills-ref is not installed ({} is missing): run `bash scripts/test-deps.sh`",
        bin.display()
    );
    bin
}

/// Copies of `brand-guidelines`, each broken (or not) in one way, by
/// folder name, with the verdict expected.
fn variants(root: &Path) -> Vec<(PathBuf, bool)> {
    let original =
        std::fs::read_to_string(anthropic_skills().join("brand-guidelines/SKILL.md")).unwrap();
    let (_, rest) = original.split_once("---\n").unwrap();
    let (front, body) = rest.split_once("---\n").unwrap();
    let description = front
        .lines()
        .find_map(|l| l.strip_prefix("description: "))
        .unwrap();
    let mut out = Vec::new();
    let mut add = |folder: &str, text: String, valid: bool| {
        let dir = root.join(folder);
        crate::support::copy_tree(&anthropic_skills().join("brand-guidelines"), &dir);
        std::fs::write(dir.join("SKILL.md"), text).unwrap();
        out.push((dir, valid));
    };
    let with = |front: &str| format!("---\n{front}---\n{body}");
    let long = "d".repeat(1100);
    add(
        "bad_name",
        with(&format!("name: bad_name\ndescription: {description}\n")),
        false,
    );
    add(
        "Brand-Guidelines",
        with(&format!(
            "name: Brand-Guidelines\ndescription: {description}\n"
        )),
        false,
    );
    add(
        "too-long",
        with(&format!("name: too-long\ndescription: {long}\n")),
        false,
    );
    add(
        "no-description",
        with("name: no-description\nlicense: MIT\n"),
        false,
    );
    add(
        "empty-description",
        with("name: empty-description\ndescription:\n"),
        false,
    );
    add(
        "unknown-field",
        with(&format!(
            "name: unknown-field\ndescription: {description}\nversion: 1.0\n"
        )),
        false,
    );
    add(
        "renamed",
        with(&format!(
            "name: brand-guidelines\ndescription: {description}\n"
        )),
        false,
    );
    add("no-frontmatter", body.to_owned(), false);
    add(
        "bad-yaml",
        with("name: bad-yaml\ndescription: Use when: the user asks\n"),
        false,
    );
    add(
        "flow-tools",
        with("name: flow-tools\ndescription: d\nallowed-tools: [Read]\n"),
        false,
    );
    add(
        "person-only",
        with("name: person-only\ndescription: d\ndisable-model-invocation: true\n"),
        false,
    );
    add(
        "double--hyphen",
        with("name: double--hyphen\ndescription: d\n"),
        false,
    );
    add(
        "quoted-colon",
        with("name: quoted-colon\ndescription: \"Use when: the user asks\"\n"),
        true,
    );
    add(
        "every-field",
        with(
            "name: every-field\ndescription: d\nlicense: MIT\ncompatibility: Needs git\nmetadata:\n  author: x\n  version: \"1.0\"\nallowed-tools: Bash(git:*) Read\n",
        ),
        true,
    );
    add(
        "block-tools",
        with("name: block-tools\ndescription: d\nallowed-tools:\n  - Read\n  - Grep\n"),
        true,
    );
    add(
        "numeric-7",
        with("name: numeric-7\ndescription: 42\n"),
        true,
    );
    out
}

#[test]
fn validation_agrees_with_the_reference_validator_on_every_folder() {
    if crate::support::agent_skills().is_none() {
        return;
    }
    let reference = agentskills();
    let dir = TestDir::new();
    let root = dir.path().join("skills");
    let mut cases: Vec<(PathBuf, bool)> = SIX
        .iter()
        .map(|name| {
            copy_skill(name, &root);
            (root.join(name), true)
        })
        .collect();
    cases.extend(variants(&root));
    for (folder, valid) in &cases {
        let theirs = std::process::Command::new(&reference)
            .arg("validate")
            .arg(folder)
            .output()
            .unwrap();
        let ours = dir
            .command()
            .args(["skills", "validate"])
            .arg(folder)
            .output()
            .unwrap();
        let show = |o: &Output| {
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        assert_eq!(
            theirs.status.success(),
            *valid,
            "{}: agentskills says\n{}",
            folder.display(),
            show(&theirs)
        );
        assert_eq!(
            ours.status.code(),
            Some(if *valid { 0 } else { 1 }),
            "{}: pincer says\n{}\nagentskills says\n{}",
            folder.display(),
            show(&ours),
            show(&theirs)
        );
        if *valid {
            assert_eq!(
                stdout(&ours),
                format!("Valid skill: {}\n", folder.display())
            );
        } else {
            let err = String::from_utf8_lossy(&ours.stderr);
            assert!(
                err.starts_with(&format!(
                    "Validation failed for {}:\n  - ",
                    folder.display()
                )),
                "{err}"
            );
        }
    }
    // Each problem names its field.
    let err = |folder: &str| {
        let out = dir
            .command()
            .args(["skills", "validate"])
            .arg(root.join(folder))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert!(err("too-long").contains("field 'description' exceeds 1024 characters (1100)"));
    assert!(err("unknown-field").contains("unexpected fields in frontmatter: version"));
    assert!(err("renamed").contains("must match the folder's name `renamed`"));
    assert!(err("Brand-Guidelines").contains("field 'name' `Brand-Guidelines` must be lowercase"));
    // A SKILL.md named directly, and the current directory by default.
    let out = dir
        .command()
        .args(["skills", "validate"])
        .arg(root.join("webapp-testing/SKILL.md"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = dir
        .command()
        .current_dir(root.join("bad-yaml"))
        .args(["skills", "validate"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_face_lists_what_the_command_line_lists() {
    if crate::support::agent_skills().is_none() {
        return;
    }
    const TOKEN: &str = "skills-test-token";
    let dir = TestDir::new();
    project_and_home(&dir);
    let expected = list_json(&dir);
    let script = dir.script("s.jsonl", &[json!([{"text": "hi"}])]);
    let ready = dir.path().join("ready");
    let mut child = dir
        .command()
        .current_dir(dir.workspace())
        .env("PINCER_HTTP_TOKEN", TOKEN)
        .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
        .arg(&ready)
        .arg("--script")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let addr = loop {
        if let Ok(text) = std::fs::read_to_string(&ready)
            && !text.trim().is_empty()
        {
            break text.trim().to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the server did not start"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let get = |path: String| {
        let request = client
            .get(format!("http://{addr}{path}"))
            .bearer_auth(TOKEN);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };
    // The server's current directory is the workspace by default.
    let (status, listed) = get("/v1/skills".into()).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed, expected);
    let workspace = dir.workspace();
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("workspace", workspace.to_str().unwrap())
        .finish();
    let (status, listed) = get(format!("/v1/skills?{query}")).await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed, expected);
    let (status, shown) = get(format!("/v1/skills/webapp-testing?{query}")).await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["name"], "webapp-testing");
    assert!(
        shown["body"]
            .as_str()
            .unwrap()
            .starts_with("# Web Application Testing"),
        "{shown}"
    );
    let (status, missing) = get(format!("/v1/skills/absent?{query}")).await;
    assert_eq!(status, 404, "{missing}");
    let (status, _) = get("/v1/skills?workspace=%2Fno%2Fsuch%2Fdir".into()).await;
    assert_eq!(status, 400);
    child.kill().unwrap();
    child.wait().unwrap();
}
