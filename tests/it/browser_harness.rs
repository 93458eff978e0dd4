//! The browser test harness (`support::browser`, `tests/fixtures/browser`)
//! end to end: headless Chromium opens a running `pincer serve --http`,
//! screenshots are kept, and what a page does wrong (uncaught exceptions,
//! console errors, failed requests, CSP violations) is recorded, fails the
//! script and reaches the test's panic message; a script that hangs fails
//! on its deadline naming the step it hung in.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::browser::{self, BrowserOutcome};
use crate::support::{TIMEOUT, TestDir};

const TOKEN: &str = "browser-token-0123456789abcdef";

/// `pincer serve --http 127.0.0.1:0` with a scripted model, stopped when dropped.
struct Server {
    child: Child,
    url: String,
    stderr_path: PathBuf,
}

impl Server {
    fn start(dir: &TestDir) -> Self {
        let script = dir.script(
            "model.jsonl",
            &[json!([{"text": "Hello"}, {"usage": {"input_tokens": 3, "output_tokens": 1}}])],
        );
        let ready = dir.path().join("ready");
        let stderr_path = dir.path().join("serve-stderr.log");
        let child = dir
            .command()
            .env("PINCER_HTTP_TOKEN", TOKEN)
            .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .arg("--script")
            .arg(&script)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&ready) {
                break text.trim().to_owned();
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "the server did not start: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            child,
            url: format!("http://{addr}"),
            stderr_path,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_png(path: &Path) -> bool {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n")
}

/// A script of a test's own in `dir` that imports the harness by its path.
fn own_script(dir: &TestDir, name: &str, body: &str) -> PathBuf {
    let harness = browser::script("harness.mjs");
    let text = format!(
        "import * as h from {};\n{body}\n",
        json!(harness.to_str().unwrap())
    );
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn chromium_shows_the_servers_json_and_every_kind_of_page_problem_is_recorded() {
    if !browser::available() {
        return;
    }
    let dir = TestDir::new();
    let server = Server::start(&dir);
    let outcome = browser::run(
        &browser::script("smoke.mjs"),
        &[("PINCER_URL", &server.url), ("PINCER_TOKEN", TOKEN)],
    );
    eprintln!(
        "smoke.mjs took {:.1} s; screenshots in {}",
        outcome.elapsed.as_secs_f64(),
        outcome.artifacts.display()
    );
    assert_eq!(outcome.result["pages"], 5, "{}", outcome.stdout);
    let shots = outcome.screenshots();
    let names: Vec<String> = shots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["openapi.png", "healthz.png", "misbehaving.png", "csp.png"]
    );
    for shot in &shots {
        assert!(shot.starts_with(&outcome.artifacts), "{}", shot.display());
        assert!(is_png(shot), "not a PNG screenshot: {}", shot.display());
    }
    // The server's own pages were clean: no record points at them but the
    // favicon bare JSON makes Chromium ask for and the 401 asked for.
    let console = outcome.result["console"].as_array().unwrap();
    let server_records: Vec<_> = console
        .iter()
        .filter(|r| r["url"].as_str().unwrap_or("").starts_with(&server.url))
        .collect();
    assert!(
        server_records.iter().all(|r| {
            let url = r["url"].as_str().unwrap();
            url.ends_with("/favicon.ico") || url.ends_with("/v1/sessions")
        }),
        "{server_records:?}\n{}",
        std::fs::read_to_string(&server.stderr_path).unwrap_or_default()
    );
}

#[test]
fn a_page_error_fails_the_script_and_reaches_the_panic_message_with_its_screenshot() {
    if !browser::available() {
        return;
    }
    let dir = TestDir::new();
    let script = own_script(
        &dir,
        "fails.mjs",
        r#"await h.run(async () => {
  const page = await h.open(await h.launch());
  h.step('the throwing page');
  await page.setContent('<h1>throws</h1><script>throw new Error("x")</script>');
  await h.shot(page, 'throws');
  await h.assertClean(page);
  return { unreachable: true };
});"#,
    );
    let outcome: BrowserOutcome = browser::run_unchecked(&script, &[]);
    assert!(!outcome.ok(), "{outcome:?}");
    assert_eq!(outcome.status.code(), Some(1), "{outcome:?}");
    let error = outcome.result["error"].as_str().unwrap();
    assert!(
        error.contains("1 problem(s): [pageerror] Error: x"),
        "{error}"
    );
    assert_eq!(outcome.result["step"], "the throwing page");
    assert!(
        outcome.console().contains(r#""kind":"pageerror""#),
        "{}",
        outcome.console()
    );
    let shot = outcome.artifacts.join("throws.png");
    assert!(is_png(&shot), "{}", shot.display());
    // What `browser::run` panics with names the error and the console log.
    let panic = std::panic::catch_unwind(|| browser::run(&script, &[]))
        .expect_err("browser::run passed a failing script");
    let message = panic.downcast_ref::<String>().unwrap();
    for part in [
        "fails.mjs failed",
        "Error: x",
        "in step: the throwing page",
        "--- console log",
        "\"kind\":\"pageerror\"",
        "--- stderr",
    ] {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
}

#[test]
fn a_script_that_hangs_fails_at_its_deadline_naming_the_step() {
    if !browser::available() {
        return;
    }
    let dir = TestDir::new();
    let script = own_script(
        &dir,
        "hangs.mjs",
        r"await h.run(async () => {
  h.step('waiting for nothing');
  await new Promise(() => setInterval(() => {}, 1000));
});",
    );
    let outcome = browser::run_unchecked(&script, &[("PINCER_BROWSER_TIMEOUT", "2")]);
    assert!(!outcome.ok(), "{outcome:?}");
    assert!(
        outcome.result["error"]
            .as_str()
            .unwrap()
            .contains(r#"timed out after 2 s in step "waiting for nothing""#),
        "{outcome:?}"
    );
}
