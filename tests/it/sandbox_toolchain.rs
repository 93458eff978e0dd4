//! The agent's shell runs the person's toolchain: `pincer run` with a scripted
//! model calling the `shell` tool, in the sandbox, with pincer's own HOME and
//! config in a temporary directory and the real toolchain found through
//! `CARGO_HOME`, `RUSTUP_HOME`, `PYENV_ROOT`, `NVM_DIR` and `PATH`, as a
//! person's environment gives them. Secrets and writes outside the workspace
//! stay out of reach. Without Landlock the test says so and checks only what
//! holds without it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::TestDir;
use serde_json::{Value, json};

/// The test process's real home (cargo runs tests with the person's env).
fn real_home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").expect("HOME"))
}

/// A variable's value, or the default place under the real home, if it exists.
fn toolchain_dir(name: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| real_home().join(default));
    path.is_dir().then_some(path)
}

/// Whether `program` is on `PATH`.
fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// A version of `itoa` unpacked under `$CARGO_HOME/registry/src` whose
/// `.crate` is in the registry cache too.
fn unpacked_itoa(cargo_home: &Path) -> Option<String> {
    let registry = cargo_home.join("registry");
    for index in std::fs::read_dir(registry.join("src")).ok()?.flatten() {
        for entry in std::fs::read_dir(index.path()).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(version) = name.strip_prefix("itoa-") else {
                continue;
            };
            let packed = registry
                .join("cache")
                .join(index.file_name())
                .join(format!("{name}.crate"));
            if packed.is_file() && entry.path().join("Cargo.toml").is_file() {
                return Some(version.to_owned());
            }
        }
    }
    None
}

struct Call {
    label: &'static str,
    command: String,
}

/// Runs every command as one shell call of one `pincer run` and returns the
/// `tool_result` of each, in order.
fn run_calls(
    dir: &TestDir,
    ws: &Path,
    env: &[(String, PathBuf)],
    config: Option<&str>,
    calls: &[Call],
) -> Vec<Value> {
    let mut turns: Vec<Value> = calls
        .iter()
        .map(|call| {
            json!([{"tool_call": {"name": "shell", "arguments": {
                "command": call.command, "timeout_secs": 300
            }}}])
        })
        .collect();
    turns.push(json!([{"text": "done"}]));
    let script = dir.script("toolchain.jsonl", &turns);
    let mut command = dir.command();
    if let Some(text) = config {
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        command.arg("--config").arg(path);
    }
    command
        .args(["run", "--output", "jsonl", "--cwd", ws.to_str().unwrap()])
        .args(["--mode", "full", "--approve", "all", "--script"])
        .arg(&script)
        .arg("run the toolchain")
        .stdin(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let results: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|event| event["type"] == "tool_result")
        .collect();
    assert_eq!(results.len(), calls.len(), "{stderr}");
    results
}

fn output(result: &Value) -> String {
    let output = &result["output"];
    output
        .as_str()
        .map_or_else(|| output.to_string(), str::to_owned)
}

#[test]
#[allow(clippy::too_many_lines, reason = "one scenario, read top to bottom")]
fn the_shell_runs_the_persons_toolchain_but_not_their_secrets() {
    let confined = crate::support::landlock("checking only what holds without it");
    let dir = TestDir::new();
    let ws = dir.workspace();

    // pincer's HOME is the test's; a fake key sits in it.
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "FAKE-SSH-KEY-CONTENT\n").unwrap();

    // The real toolchain, found the way a person's environment finds it.
    let mut env: Vec<(String, PathBuf)> = Vec::new();
    for (name, default) in [
        ("CARGO_HOME", ".cargo"),
        ("RUSTUP_HOME", ".rustup"),
        ("PYENV_ROOT", ".pyenv"),
        ("NVM_DIR", ".nvm"),
    ] {
        if let Some(path) = toolchain_dir(name, default) {
            env.push((name.to_owned(), path));
        }
    }
    let cargo_home = env
        .iter()
        .find(|(name, _)| name == "CARGO_HOME")
        .map(|(_, path)| path.clone());

    // A tiny crate with one test and no dependencies.
    let krate = ws.join("tiny");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(
        krate.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\n",
    )
    .unwrap();
    std::fs::write(
        krate.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 2), 4); }\n}\n",
    )
    .unwrap();

    // A crate with a dependency Cargo has already fetched and unpacked, when
    // this machine has one (pinned to the unpacked version).
    let fetched = cargo_home.as_deref().and_then(unpacked_itoa);
    if let Some(version) = &fetched {
        let with_dep = ws.join("with-dep");
        std::fs::create_dir_all(with_dep.join("src")).unwrap();
        std::fs::write(
            with_dep.join("Cargo.toml"),
            format!(
                "[package]\nname = \"with-dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nitoa = \"={version}\"\n"
            ),
        )
        .unwrap();
        std::fs::write(
            with_dep.join("src/lib.rs"),
            "#[test]\nfn formats() { assert_eq!(itoa::Buffer::new().format(42u8), \"42\"); }\n",
        )
        .unwrap();
    } else {
        eprintln!(
            "no unpacked `itoa` under $CARGO_HOME/registry/src: skipping the crate with a fetched dependency"
        );
    }

    let git = installed("git");
    if git {
        let init = Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap();
        assert!(init.success());
    } else {
        eprintln!("git is not installed: skipping `git status`");
    }

    let mut calls = vec![
        Call {
            label: "cargo --version",
            command: "cargo --version".to_owned(),
        },
        Call {
            label: "cargo test",
            command: "cd tiny && cargo test --offline 2>&1".to_owned(),
        },
    ];
    if fetched.is_some() {
        calls.push(Call {
            label: "cargo test with a fetched dependency",
            command: "cd with-dep && cargo test --offline 2>&1".to_owned(),
        });
    }
    if installed("python3") {
        calls.push(Call {
            label: "python3",
            command: "python3 -c 'print(1+1)'".to_owned(),
        });
    } else {
        eprintln!("python3 is not installed: skipping it");
    }
    if installed("node") {
        calls.push(Call {
            label: "node -v",
            command: "node -v".to_owned(),
        });
    } else {
        eprintln!("node is not installed: skipping `node -v`");
    }
    if git {
        calls.push(Call {
            label: "git status",
            command: "git status".to_owned(),
        });
    }
    let expect_ok = calls.len();
    // What must fail. The gate may refuse the plain `cat ~/.ssh/...` before it
    // runs; the spelled-around one reaches the sandbox.
    calls.push(Call {
        label: "cat ~/.ssh/id_rsa",
        command: "cat ~/.ssh/id_rsa".to_owned(),
    });
    calls.push(Call {
        label: "cat the key, spelled around the gate",
        command: "d=.ss; cat \"$HOME/${d}h/id_rsa\"".to_owned(),
    });
    calls.push(Call {
        label: "touch $HOME/outside",
        command: "touch \"$HOME/outside\"".to_owned(),
    });
    if confined {
        calls.push(Call {
            label: "touch /usr",
            command: "touch /usr/pincer-sandbox-probe".to_owned(),
        });
        if cargo_home.is_some() {
            calls.push(Call {
                label: "touch $CARGO_HOME",
                command: "touch \"$CARGO_HOME/pincer-sandbox-probe\"".to_owned(),
            });
        }
    }

    let results = run_calls(&dir, &ws, &env, None, &calls);
    for (call, result) in calls.iter().zip(&results).take(expect_ok) {
        assert_eq!(
            result["is_error"],
            false,
            "{}: {}",
            call.label,
            output(result)
        );
    }
    let text = |label: &str| {
        let index = calls.iter().position(|c| c.label == label).unwrap();
        (output(&results[index]), &results[index])
    };
    assert!(text("cargo --version").0.starts_with("cargo "));
    let (cargo_test, _) = text("cargo test");
    assert!(
        cargo_test.contains("test tests::adds ... ok")
            && cargo_test.contains("test result: ok. 1 passed"),
        "{cargo_test}"
    );
    assert!(
        krate.join("target").is_dir(),
        "the build lands in the workspace"
    );
    if fetched.is_some() {
        let (with_dep, _) = text("cargo test with a fetched dependency");
        assert!(
            with_dep.contains("Compiling itoa") && with_dep.contains("test result: ok. 1 passed"),
            "{with_dep}"
        );
    }
    if installed("python3") {
        assert!(text("python3").0.starts_with("2\n"));
    }
    if installed("node") {
        assert!(text("node -v").0.starts_with('v'));
    }
    if git {
        let (status, _) = text("git status");
        assert!(status.contains("tiny/"), "{status}");
    }

    let (plain, plain_result) = text("cat ~/.ssh/id_rsa");
    let (around, around_result) = text("cat the key, spelled around the gate");
    let (outside, outside_result) = text("touch $HOME/outside");
    if confined {
        for (label, text, result) in [
            ("cat ~/.ssh/id_rsa", &plain, plain_result),
            ("cat around", &around, around_result),
            ("touch $HOME/outside", &outside, outside_result),
        ] {
            assert_eq!(result["is_error"], true, "{label}: {text}");
            assert!(!text.contains("FAKE-SSH-KEY-CONTENT"), "{label}: {text}");
        }
        // The sandbox, not the gate, stopped these.
        assert!(around.contains("Permission denied"), "{around}");
        assert!(outside.contains("Permission denied"), "{outside}");
        assert!(!home.join("outside").exists());
        let (usr, usr_result) = text("touch /usr");
        assert_eq!(usr_result["is_error"], true, "{usr}");
        assert!(!Path::new("/usr/pincer-sandbox-probe").exists());
        if let Some(cargo_home) = &cargo_home {
            let (probe, probe_result) = text("touch $CARGO_HOME");
            assert_eq!(probe_result["is_error"], true, "{probe}");
            assert!(probe.contains("Permission denied"), "{probe}");
            assert!(!cargo_home.join("pincer-sandbox-probe").exists());
        }
    } else {
        // Without Landlock only the gate stands: the plain form must not
        // leak the key, and the results say the command was not sandboxed.
        assert!(!plain.contains("FAKE-SSH-KEY-CONTENT"), "{plain}");
        assert!(around.contains("[not sandboxed: "), "{around}");
        let _ = std::fs::remove_file(home.join("outside"));
    }
}

#[test]
fn without_toolchains_the_read_only_and_env_lines_grant_them() {
    if !crate::support::landlock("checking only what holds without it") {
        return;
    }
    let (Some(cargo_home), Some(rustup_home)) = (
        toolchain_dir("CARGO_HOME", ".cargo"),
        toolchain_dir("RUSTUP_HOME", ".rustup"),
    ) else {
        eprintln!("no Cargo or rustup directory found: skipping");
        return;
    };
    let dir = TestDir::new();
    let ws = dir.workspace();
    let env = vec![
        ("CARGO_HOME".to_owned(), cargo_home.clone()),
        ("RUSTUP_HOME".to_owned(), rustup_home.clone()),
    ];
    let call = || {
        vec![Call {
            label: "cargo --version",
            command: "cargo --version".to_owned(),
        }]
    };

    let off = "[shell]\ntoolchains = false\n";
    let results = run_calls(&dir, &ws, &env, Some(off), &call());
    let text = output(&results[0]);
    assert_eq!(results[0]["is_error"], true, "{text}");
    // cargo lives in a toolchain tree nothing grants now.
    let cargo_on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| d.join("cargo").starts_with(&cargo_home))
    });
    if cargo_on_path {
        assert!(text.contains("Permission denied"), "{text}");
    }

    let granted = format!(
        "[shell]\ntoolchains = false\nread_only = [{cargo:?}, {rustup:?}]\nenv = [\"CARGO_HOME\", \"RUSTUP_HOME\"]\n",
        cargo = cargo_home.display().to_string(),
        rustup = rustup_home.display().to_string(),
    );
    let results = run_calls(&dir, &ws, &env, Some(&granted), &call());
    let text = output(&results[0]);
    assert_eq!(results[0]["is_error"], false, "{text}");
    assert!(text.starts_with("cargo "), "{text}");
}
