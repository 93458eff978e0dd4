//! A flag beats the environment, which beats the config file: `--script`
//! included, and every flag that sets a config key, through the real binary.

use std::process::{Command, Output, Stdio};

use crate::support::TestDir;
use serde_json::{Value, json};

fn output(mut command: Command) -> Output {
    command.stdin(Stdio::null()).output().unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn hello(dir: &TestDir) -> String {
    let script = dir.script("hello.jsonl", &[json!([{"text": "scripted hello"}])]);
    script.to_str().unwrap().to_owned()
}

/// `pincer run ARGS --output jsonl`: its first line (the session: provider,
/// model) and the session as `pincer sessions show --json` gives it (mode).
fn run_session(dir: &TestDir, mut command: Command) -> (Value, Value) {
    let out = output({
        command.args(["--output", "jsonl", "hi"]);
        command
    });
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let first: Value = stdout(&out)
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no session line in {}", stdout(&out)));
    assert_eq!(first["type"], "session", "{first}");
    let shown = dir.show_session(first["session_id"].as_str().unwrap());
    (first, shown)
}

#[test]
fn script_runs_although_the_config_file_names_another_provider() {
    let dir = TestDir::new();
    dir.write_config("provider = \"openai\"\nmodel = \"gpt-4.1\"\n");
    let script = hello(&dir);
    let mut command = dir.command();
    command.args(["run", "--script", &script, "hi"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "scripted hello\n");
    // The file's model went with its provider; a `--model` flag stays.
    let mut command = dir.command();
    command.args(["run", "--script", &script]);
    let (session, _) = run_session(&dir, command);
    assert_eq!(session["provider"], "scripted", "{session}");
    assert_eq!(session["model"], "script", "{session}");
    let mut command = dir.command();
    command.args(["run", "--script", &script, "--model", "mine"]);
    let (session, _) = run_session(&dir, command);
    assert_eq!(session["model"], "mine", "{session}");
}

#[test]
fn script_runs_although_the_environment_names_another_provider() {
    let dir = TestDir::new();
    let script = hello(&dir);
    let mut command = dir.command();
    command
        .env("PINCER_PROVIDER", "openai")
        .env("PINCER_MODEL", "gpt-4.1")
        .args(["run", "--script", &script, "hi"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "scripted hello\n");
}

#[test]
fn script_with_an_explicit_other_provider_is_refused() {
    let dir = TestDir::new();
    let script = hello(&dir);
    let mut command = dir.command();
    command.args(["run", "--provider", "openai", "--script", &script, "hi"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--script needs --provider scripted, not \"openai\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn script_keeps_a_scripted_provider_table_the_file_names() {
    let dir = TestDir::new();
    let script = hello(&dir);
    let other = dir.script("other.jsonl", &[json!([{"text": "the table's script"}])]);
    dir.write_config(&format!(
        "provider = \"demo\"\n[providers.demo]\nkind = \"scripted\"\nscript = {:?}\nmodels = [\"m1\"]\n",
        other.to_str().unwrap()
    ));
    let mut command = dir.command();
    command.args(["run", "--script", &script]);
    let (session, _) = run_session(&dir, command);
    assert_eq!(session["provider"], "demo", "{session}");
    assert_eq!(session["model"], "m1", "{session}");
    // The flag's script plays, not the table's.
    let mut command = dir.command();
    command.args(["run", "--script", &script, "hi"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stdout(&out), "scripted hello\n");
}

/// Three scripted providers, one per layer: the reply says which one ran.
#[test]
fn provider_flag_beats_the_environment_which_beats_the_file() {
    let dir = TestDir::new();
    let mut config = String::from("provider = \"file\"\n");
    for name in ["file", "env", "flag"] {
        let script = dir.script(
            &format!("{name}.jsonl"),
            &[json!([{ "text": format!("from {name}") }])],
        );
        config.push_str(&format!(
            "[providers.{name}]\nkind = \"scripted\"\nscript = {:?}\n",
            script.to_str().unwrap()
        ));
    }
    dir.write_config(&config);
    let reply = |env: Option<&str>, flag: Option<&str>| {
        let mut command = dir.command();
        if let Some(env) = env {
            command.env("PINCER_PROVIDER", env);
        }
        command.arg("run");
        if let Some(flag) = flag {
            command.args(["--provider", flag]);
        }
        command.arg("hi");
        let out = output(command);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    assert_eq!(reply(None, None), "from file\n");
    assert_eq!(reply(Some("env"), None), "from env\n");
    assert_eq!(reply(Some("env"), Some("flag")), "from flag\n");
}

#[test]
fn model_flag_beats_the_environment_which_beats_the_file() {
    let dir = TestDir::new();
    let script = hello(&dir);
    dir.write_config(&format!(
        "provider = \"demo\"\nmodel = \"file-model\"\n[providers.demo]\nkind = \"scripted\"\nscript = {script:?}\nmodels = [\"file-model\", \"env-model\", \"flag-model\"]\n"
    ));
    let model = |env: bool, flag: bool| {
        let mut command = dir.command();
        if env {
            command.env("PINCER_MODEL", "env-model");
        }
        command.arg("run");
        if flag {
            command.args(["--model", "flag-model"]);
        }
        run_session(&dir, command).0["model"].clone()
    };
    assert_eq!(model(false, false), "file-model");
    assert_eq!(model(true, false), "env-model");
    assert_eq!(model(true, true), "flag-model");
}

#[test]
fn mode_flag_beats_the_environment_which_beats_the_file() {
    let dir = TestDir::new();
    let script = hello(&dir);
    dir.write_config("mode = \"full\"\n");
    let mode = |env: bool, flag: bool| {
        let mut command = dir.command();
        if env {
            command.env("PINCER_MODE", "read_only");
        }
        command.args(["run", "--script", &script]);
        if flag {
            command.args(["--mode", "supervised"]);
        }
        run_session(&dir, command).1["session"]["mode"].clone()
    };
    assert_eq!(mode(false, false), "full");
    assert_eq!(mode(true, false), "read_only");
    assert_eq!(mode(true, true), "supervised");
}

/// A script that asks for a tool call every turn: the run stops at the
/// request budget, and its events count the requests it made.
#[test]
fn max_turn_requests_flag_beats_the_environment_which_beats_the_file() {
    let dir = TestDir::new();
    let turns: Vec<Value> = (0..10)
        .map(|i| json!([{"tool_call": {"id": format!("c{i}"), "name": "list_dir", "arguments": {"path": format!("d{i}")}}}]))
        .collect();
    let script = dir.script("loop.jsonl", &turns);
    let script = script.to_str().unwrap().to_owned();
    dir.write_config("max_turn_requests = 5\n");
    let requests = |env: bool, flag: bool| {
        let mut command = dir.command();
        if env {
            command.env("PINCER_MAX_TURN_REQUESTS", "3");
        }
        command.args(["run", "--script", &script, "--approve", "reads"]);
        command.args(["--cwd", dir.workspace().to_str().unwrap()]);
        if flag {
            command.args(["--max-turn-requests", "2"]);
        }
        command.args(["--output", "jsonl", "hi"]);
        let out = output(command);
        stdout(&out)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["type"] == "model_turn")
            .count()
    };
    assert_eq!(requests(false, false), 5);
    assert_eq!(requests(true, false), 3);
    assert_eq!(requests(true, true), 2);
}

#[test]
fn data_dir_flag_beats_the_environment_which_beats_the_file() {
    let dir = TestDir::new();
    dir.write_config("data_dir = \"from-file\"\n");
    let shown = |env: bool, flag: bool| {
        let mut command = dir.command();
        command.env_remove("PINCER_DATA_DIR");
        if env {
            command.env("PINCER_DATA_DIR", dir.path().join("from-env"));
        }
        if flag {
            command.arg("--data-dir").arg(dir.path().join("from-flag"));
        }
        command.args(["config", "show"]);
        let out = output(command);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .find(|l| l.starts_with("data_dir = "))
            .unwrap()
            .to_owned()
    };
    let file = shown(false, false);
    assert!(
        file.contains("from-file\"") && file.contains("# config file"),
        "{file}"
    );
    let env = shown(true, false);
    assert!(
        env.contains("from-env\"") && env.contains("# environment variable PINCER_DATA_DIR"),
        "{env}"
    );
    let flag = shown(true, true);
    assert!(
        flag.contains("from-flag\"") && flag.contains("# flag --data-dir"),
        "{flag}"
    );
}

#[test]
fn config_flag_beats_the_environment() {
    let dir = TestDir::new();
    let env_file = dir.path().join("env.toml");
    let flag_file = dir.path().join("flag.toml");
    std::fs::write(&env_file, "max_turn_requests = 7\n").unwrap();
    std::fs::write(&flag_file, "max_turn_requests = 8\n").unwrap();
    let mut command = dir.command();
    command
        .env("PINCER_CONFIG", &env_file)
        .arg("--config")
        .arg(&flag_file)
        .args(["config", "show"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("max_turn_requests = 8  # config file"),
        "{}",
        stdout(&out)
    );
    let mut command = dir.command();
    command
        .env("PINCER_CONFIG", &env_file)
        .args(["config", "show"]);
    let out = output(command);
    assert!(
        stdout(&out).contains("max_turn_requests = 7  # config file"),
        "{}",
        stdout(&out)
    );
}

/// `config show` writes every section it has or fails naming the one it
/// cannot write: `[paths] extra_roots` is joined to the config file's
/// directory, and a directory name that is not UTF-8 cannot be TOML (the
/// section was left out without a word).
#[test]
fn config_show_fails_naming_a_section_it_cannot_write() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TestDir::new();
    let odd = dir.path().join(std::ffi::OsStr::from_bytes(b"conf\xff"));
    std::fs::create_dir(&odd).unwrap();
    let file = odd.join("config.toml");
    std::fs::write(&file, "[paths]\nextra_roots = [\"lib\"]\n").unwrap();
    let mut command = dir.command();
    command.arg("--config").arg(&file).args(["config", "show"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("cannot show [paths]: path contains invalid UTF-8 characters"),
        "{}",
        stderr(&out)
    );
    assert_eq!(stdout(&out), "", "nothing half-shown");
    // The same file where the path is UTF-8: the section is shown.
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, "[paths]\nextra_roots = [\"lib\"]\n").unwrap();
    let mut command = dir.command();
    command.arg("--config").arg(&plain).args(["config", "show"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("\n[paths]  # config file "),
        "{}",
        stdout(&out)
    );
}

/// A variable set to the empty string counts as unset (README,
/// "Configuration"): the file's value shows, for every layered setting.
#[test]
fn an_empty_variable_counts_as_unset() {
    let dir = TestDir::new();
    dir.write_config("max_turn_requests = 7\nmode = \"read_only\"\nsandbox = \"required\"\n");
    let mut command = dir.command();
    for name in [
        "PINCER_MAX_TURN_REQUESTS",
        "PINCER_MODE",
        "PINCER_SANDBOX",
        "PINCER_PROVIDER",
        "PINCER_MODEL",
    ] {
        command.env(name, "");
    }
    command.args(["config", "show"]);
    let out = output(command);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let shown = stdout(&out);
    for line in [
        "max_turn_requests = 7  # config file ",
        "mode = \"read_only\"  # config file ",
        "sandbox = \"required\"  # config file ",
        "# provider: none configured",
    ] {
        assert!(shown.contains(line), "{line}: {shown}");
    }
}
