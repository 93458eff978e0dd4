//! The browser test harness (`support::browser`, `tests/fixtures/browser`)
//! end to end: headless Chromium opens a running `pincer serve --http`,
//! screenshots are kept, and what a page does wrong (uncaught exceptions,
//! console errors, failed requests, CSP violations) is recorded, fails the
//! script and reaches the test's panic message; a script that hangs fails
//! on its deadline naming the step it hung in.

use std::path::{Path, PathBuf};

use serde_json::json;

use crate::support::TestDir;
use crate::support::browser::{self, BrowserOutcome};
use crate::support::serve::{HttpServe, TOKEN};

/// `pincer serve --http 127.0.0.1:0` with a scripted model (the shared
/// launcher: `support::serve`).
fn start(dir: &TestDir) -> HttpServe {
    let script = dir.script(
        "model.jsonl",
        &[json!([{"text": "Hello"}, {"usage": {"input_tokens": 3, "output_tokens": 1}}])],
    );
    HttpServe::start(dir, None, &["--script", script.to_str().unwrap()])
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
    let server = start(&dir);
    let url = server.url("");
    let outcome = browser::run(
        &browser::script("smoke.mjs"),
        &[("PINCER_URL", &url), ("PINCER_TOKEN", TOKEN)],
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
        .filter(|r| r["url"].as_str().unwrap_or("").starts_with(&url))
        .collect();
    assert!(
        server_records.iter().all(|r| {
            let url = r["url"].as_str().unwrap();
            url.ends_with("/favicon.ico") || url.ends_with("/v1/sessions")
        }),
        "{server_records:?}\n{}",
        server.stderr()
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
