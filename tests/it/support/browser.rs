//! Headless Chromium driven by Playwright, for the web console's tests.
//!
//! A browser test is a plain Node script in `tests/fixtures/browser/` that
//! imports `./harness.mjs` (see the README beside it): it launches Debian's
//! `chromium` through `playwright-core` (the version
//! `tests/fixtures/browser/package-lock.json` pins; no browser is
//! downloaded), watches every page for console errors and warnings,
//! uncaught exceptions, failed requests and CSP violations, keeps a
//! full-page screenshot of each page it is asked to, and ends by printing
//! one JSON line, `{"ok":true,...}` or `{"ok":false,"error":...,"console":[...]}`.
//!
//! [`available`] says whether node, chromium and playwright-core are here
//! (`bash scripts/test-deps.sh` installs them); a test without them skips,
//! saying why, except under `CI=true` or `PINCER_TEST_REQUIRE_BROWSER=1`,
//! where it fails naming what is missing. [`run`] runs a script with the
//! environment given plus `PINCER_ARTIFACTS`, the directory its
//! screenshots go to: `<target dir>/browser-artifacts/<test>/` (`target/`
//! unless `CARGO_TARGET_DIR` moves it; `<test>` is the test's path with
//! `::` as `-`, e.g. `browser_harness-chromium_sees_...`), emptied before
//! each run and kept after it, whether the test passes or fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The fixture directory: `harness.mjs`, the scripts, `node_modules`.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser")
}

/// A script in [`fixtures`].
pub fn script(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The browser the harness launches: `PINCER_CHROMIUM`, else `chromium` on
/// `PATH`, else `/usr/bin/chromium` (as `harness.mjs` chooses it).
pub fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("PINCER_CHROMIUM") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/bin")])
        .map(|dir| dir.join("chromium"))
        .find(|file| file.is_file())
}

/// `node` on `PATH`.
pub fn node() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("node"))
        .find(|file| file.is_file())
}

/// What is missing for browser tests, one entry each; empty when nothing is.
pub fn missing() -> Vec<String> {
    let mut missing = Vec::new();
    if node().is_none() {
        missing.push("node (Node.js) is not on PATH".to_owned());
    }
    if chromium().is_none() {
        missing.push(match std::env::var_os("PINCER_CHROMIUM") {
            Some(path) => format!("PINCER_CHROMIUM={} is not a file", path.display()),
            None => "chromium is not installed (not on PATH nor /usr/bin/chromium)".to_owned(),
        });
    }
    let playwright = fixtures().join("node_modules/playwright-core/package.json");
    if !playwright.is_file() {
        missing.push(format!(
            "playwright-core is not installed ({} is missing)",
            playwright.display()
        ));
    }
    missing
}

/// Whether browser tests can run here. When not, a test returns at once
/// after this has said why on stderr; under `CI=true` (as `.ci/run` sets)
/// or `PINCER_TEST_REQUIRE_BROWSER=1` it panics instead, naming what is
/// missing, so that a green CI run means the browser tests ran.
pub fn available() -> bool {
    let missing = missing();
    if missing.is_empty() {
        return true;
    }
    let required = std::env::var_os("CI").is_some_and(|v| v == "true")
        || std::env::var_os("PINCER_TEST_REQUIRE_BROWSER").is_some_and(|v| v == "1");
    assert!(
        !required,
        "the browser tests cannot run (CI=true or PINCER_TEST_REQUIRE_BROWSER=1): {}; \
         run `bash scripts/test-deps.sh`, which installs them",
        missing.join("; ")
    );
    eprintln!(
        "browser test skipped: {}; run `bash scripts/test-deps.sh` to install what is missing",
        missing.join("; ")
    );
    false
}

/// The directory of a test's screenshots:
/// `<target dir>/browser-artifacts/<test>/`.
pub fn artifacts_dir(test: &str) -> PathBuf {
    // The binary's directory is `<target dir>/<profile>`.
    let target = Path::new(env!("CARGO_BIN_EXE_pincer"))
        .parent()
        .and_then(Path::parent)
        .unwrap();
    let name: String = test
        .replace("::", "-")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    target.join("browser-artifacts").join(name)
}

/// The name of the running test (its thread's name, as the test harness
/// sets it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .unwrap_or("browser")
        .to_owned()
}

/// How a script ended.
#[derive(Debug)]
pub struct BrowserOutcome {
    pub status: ExitStatus,
    /// The last JSON line of stdout: `{"ok":...}`; `null` when there is none.
    pub result: Value,
    pub stdout: String,
    pub stderr: String,
    /// Where its screenshots are.
    pub artifacts: PathBuf,
    pub elapsed: Duration,
}

impl BrowserOutcome {
    pub fn ok(&self) -> bool {
        self.status.success() && self.result["ok"] == Value::Bool(true)
    }

    /// The console log (every record of every watched page), one a line.
    pub fn console(&self) -> String {
        self.result["console"]
            .as_array()
            .map(|records| {
                records
                    .iter()
                    .map(Value::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .unwrap_or_default()
    }

    /// The screenshots the script kept.
    pub fn screenshots(&self) -> Vec<PathBuf> {
        self.result["screenshots"]
            .as_array()
            .map(|shots| {
                shots
                    .iter()
                    .filter_map(Value::as_str)
                    .map(PathBuf::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn failure(&self, script: &Path) -> String {
        format!(
            "browser script {} failed ({}, after {:.1} s): {}\nin step: {}\n--- console log\n{}\n--- stderr\n{}\n--- stdout\n{}\n--- screenshots in {}",
            script.display(),
            self.status,
            self.elapsed.as_secs_f64(),
            self.result["error"].as_str().unwrap_or("no result line"),
            self.result["step"].as_str().unwrap_or("?"),
            self.console(),
            self.stderr.trim_end(),
            self.stdout.trim_end(),
            self.artifacts.display()
        )
    }
}

/// Runs `node SCRIPT` with `env` and `PINCER_ARTIFACTS` (this test's
/// [`artifacts_dir`]) and panics unless it reports `"ok":true`, with its
/// error, step, console log, stderr and stdout in the message.
pub fn run(script: &Path, env: &[(&str, &str)]) -> BrowserOutcome {
    let outcome = run_unchecked(script, env);
    assert!(outcome.ok(), "{}", outcome.failure(script));
    outcome
}

/// Like [`run`] without the check: how the script ended, whatever it was.
pub fn run_unchecked(script: &Path, env: &[(&str, &str)]) -> BrowserOutcome {
    let artifacts = artifacts_dir(&test_name());
    let _ = std::fs::remove_dir_all(&artifacts);
    std::fs::create_dir_all(&artifacts).unwrap();
    // The script's own deadline (`PINCER_BROWSER_TIMEOUT`, 60 s by default)
    // fails it with a message first; this one kills what hangs beyond it.
    let script_timeout: u64 = env
        .iter()
        .find(|(name, _)| *name == "PINCER_BROWSER_TIMEOUT")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(60);
    let timeout = Duration::from_secs(script_timeout + 30);
    let node = node().unwrap_or_else(|| PathBuf::from("node"));
    let started = Instant::now();
    let mut child = Command::new(node)
        .arg(script)
        .current_dir(fixtures())
        .env("PINCER_ARTIFACTS", &artifacts)
        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own: node and the browser it started are killed
        // together on a timeout.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|err| panic!("cannot run node {}: {err}", script.display()));
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = reader(Box::new(child.stdout.take().unwrap()));
    let stderr = reader(Box::new(child.stderr.take().unwrap()));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > timeout {
            let pid = i32::try_from(child.id()).unwrap();
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let status = child.wait().unwrap();
            let stdout = stdout.join().unwrap();
            let stderr = stderr.join().unwrap();
            panic!(
                "browser script {} did not end within {} s (killed, {status})\n--- stderr\n{}\n--- stdout\n{}",
                script.display(),
                timeout.as_secs(),
                stderr.trim_end(),
                stdout.trim_end()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let stdout = stdout.join().unwrap();
    let stderr = stderr.join().unwrap();
    let result = stdout
        .lines()
        .rev()
        .find_map(|line| {
            serde_json::from_str::<Value>(line)
                .ok()
                .filter(|v| v.get("ok").is_some())
        })
        .unwrap_or(Value::Null);
    BrowserOutcome {
        status,
        result,
        stdout,
        stderr,
        artifacts,
        elapsed,
    }
}
