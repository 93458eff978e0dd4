//! Files people attach in a chat (Telegram, against the fake Bot API,
//! through `pincer serve --channel telegram`): a photo reaches a model that
//! takes images as an image, fetched through `getFile` and the file route; a
//! text file is embedded as a resource; a PDF, a file over the size limit
//! and a photo for a model that takes no images are named in the prompt with
//! their size and why, and never downloaded.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::TestDir;
use crate::support::http::Loopback;
use crate::support::serve::HttpServe;
use crate::support::telegram::{FakeTelegram, TOKEN};

const USER: i64 = 42;
const WAIT: Duration = Duration::from_secs(20);

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

/// `pincer serve --channel telegram` with a model named `model_name`.
fn serve(fake: &FakeTelegram, dir: &TestDir, url: &str, model_name: &str) -> HttpServe {
    let config = format!(
        "provider = \"local\"\n[providers.local]\nkind = \"openai\"\nbase_url = \"{url}/v1\"\nmodels = [\"{model_name}\"]\n\
         [channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nlive_drafts = false\nallow = [\"{USER}\"]\n",
        fake.url,
        dir.workspace().display(),
    );
    HttpServe::start_with_env(
        dir,
        Some(&config),
        &["--channel", "telegram"],
        &[("TELEGRAM_BOT_TOKEN", TOKEN)],
    )
}

/// The user message of the latest model request.
fn last_user_content(model: &Loopback) -> Value {
    let seen = model.bodies();
    let messages = seen.last().expect("a model request")["messages"]
        .as_array()
        .unwrap()
        .clone();
    messages.iter().rfind(|m| m["role"] == "user").unwrap()["content"].clone()
}

/// Sends a message and waits for the reply `seen it`.
fn send_and_wait(fake: &FakeTelegram, send: impl FnOnce(&FakeTelegram)) {
    let before = fake.chat(USER).len();
    send(fake);
    fake.wait_for("the reply", WAIT, |f| f.chat(USER).len() > before);
    assert_eq!(fake.chat(USER).last().unwrap().1, "seen it");
}

fn png() -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(PNG)
        .unwrap()
}

#[test]
fn a_photo_reaches_a_model_that_takes_images_and_a_text_file_is_embedded() {
    let dir = TestDir::new();
    let fake = FakeTelegram::start();
    let model = Loopback::saying("seen it");
    let url = model.url.clone();
    let _serve = serve(&fake, &dir, &url, "gpt-4o");

    // A photo, as Telegram sends one: its sizes, smallest first.
    let small = fake.add_file("small.jpg", b"\xFF\xD8\xFF small");
    let large = fake.add_file("photo.png", &png());
    send_and_wait(&fake, |f| {
        f.user_sends(
            USER,
            "What is in this picture?",
            "photo",
            json!([
                {"file_id": small, "file_unique_id": "s", "width": 90, "height": 90, "file_size": 9},
                {"file_id": large, "file_unique_id": "l", "width": 1, "height": 1, "file_size": png().len()},
            ]),
        );
    });
    assert_eq!(
        last_user_content(&model),
        json!([
            {"type": "text", "text": "What is in this picture?\n[attached photo: below]"},
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
        ])
    );
    // Only the largest size was fetched.
    assert_eq!(fake.downloads(), vec!["documents/2-photo.png".to_owned()]);

    // A text file: its text embedded as a resource.
    let notes = fake.add_file("notes.md", b"# Plan\n- ship it\n");
    send_and_wait(&fake, |f| {
        f.user_sends(
            USER,
            "",
            "document",
            json!({"file_id": notes, "file_unique_id": "n", "file_name": "notes.md", "mime_type": "text/markdown", "file_size": 17}),
        );
    });
    // No image in it: the content stays the plain string every server takes.
    assert_eq!(
        last_user_content(&model),
        "[attached document notes.md: below]\n\n<resource uri=\"attachment:notes.md\">\n# Plan\n- ship it\n\n</resource>"
    );
}

#[test]
fn files_that_cannot_be_sent_are_named_with_their_size_and_why() {
    let dir = TestDir::new();
    let fake = FakeTelegram::start();
    let model = Loopback::saying("seen it");
    let url = model.url.clone();
    // A model that takes no images.
    let _serve = serve(&fake, &dir, &url, "llama3.1:8b");

    let photo = fake.add_file("p.png", &png());
    send_and_wait(&fake, |f| {
        f.user_sends(
            USER,
            "look",
            "photo",
            json!([{"file_id": photo, "file_unique_id": "p", "width": 1, "height": 1, "file_size": png().len()}]),
        );
    });
    assert_eq!(
        last_user_content(&model),
        "look\n[attached photo, 70 B: not sent (the session's model does not take images)]"
    );

    let pdf = fake.add_file("report.pdf", b"%PDF-1.7 ...");
    let big = fake.add_file("huge.log", &vec![b'x'; 300 * 1024]);
    send_and_wait(&fake, |f| {
        f.user_sends(
            USER,
            "",
            "document",
            json!({"file_id": pdf, "file_unique_id": "r", "file_name": "report.pdf", "mime_type": "application/pdf", "file_size": 12}),
        );
        f.user_sends(
            USER,
            "and this",
            "document",
            json!({"file_id": big, "file_unique_id": "h", "file_name": "huge.log", "mime_type": "text/plain", "file_size": 300 * 1024}),
        );
    });
    assert_eq!(
        last_user_content(&model),
        "[attached document report.pdf, 12 B: not sent (only images and text files reach the model)]\n\n\
         and this\n[attached document huge.log, 300.0 KiB: not sent (larger than 256.0 KiB)]"
    );
    // Nothing was downloaded: each was judged by what Telegram said of it.
    assert_eq!(fake.downloads(), Vec::<String>::new());
    // An image refused for the model costs no getFile either.
    assert!(fake.calls("getFile").is_empty());
}

/// A reply's files: a run that edited files gets its changes as
/// `changes.diff` after its reply, and a reply longer than three messages
/// comes as its first message and the whole as `reply.md` (Telegram's
/// `sendDocument`).
/// 700 short paragraphs: more than three Telegram messages.
fn long_reply() -> String {
    (0..700)
        .map(|n| format!("Line {n} of a long answer.\n\n"))
        .collect()
}

/// `pincer serve --channel telegram` in `full` mode with a scripted model
/// (`turns`), the workspace holding `notes.md` (`old line`), and `extra`
/// configuration.
fn serve_scripted(fake: &FakeTelegram, dir: &TestDir, turns: &[Value], extra: &str) -> HttpServe {
    std::fs::write(dir.workspace().join("notes.md"), "old line\n").unwrap();
    let script = dir.script("s.jsonl", turns);
    let config = format!(
        "mode = \"full\"\nprovider = \"scripted\"\n[providers.scripted]\nkind = \"scripted\"\nscript = {:?}\n\
         [channels.telegram]\napi_base = \"{}\"\nworkspace = \"{}\"\npoll_timeout_secs = 1\ncoalesce_ms = 50\nallow = [\"{USER}\"]\n{extra}",
        script.display().to_string(),
        fake.url,
        dir.workspace().display(),
    );
    HttpServe::start_with_env(
        dir,
        Some(&config),
        &["--channel", "telegram"],
        &[("TELEGRAM_BOT_TOKEN", TOKEN)],
    )
}

#[test]
fn a_runs_changes_and_a_long_reply_come_as_files() {
    let dir = TestDir::new();
    let fake = FakeTelegram::start();
    let long = long_reply();
    let _serve = serve_scripted(
        &fake,
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"tool_call": {"id": "w2", "name": "write_file", "arguments": {"path": "src/a.rs", "content": "fn a() {}\n"}}}]),
            json!([{"text": "Updated the notes and added a.rs."}]),
            json!([{"text": long}]),
        ],
        "",
    );

    fake.user_says(USER, "update the notes");
    fake.wait_for("the changes", WAIT, |f| !f.documents(USER).is_empty());
    let documents = fake.documents(USER);
    assert_eq!(documents.len(), 1, "{documents:?}");
    let (id, name, diff) = &documents[0];
    assert_eq!(name, "changes.diff");
    assert!(
        diff.contains("--- a/notes.md\n+++ b/notes.md\n")
            && diff.contains("-old line\n+new line\n")
            && diff.contains("+fn a() {}\n"),
        "{diff}"
    );
    // The reply, then the file with its caption, last in the chat.
    let chat = fake.chat(USER);
    let n = chat.len();
    assert_eq!(chat[n - 2].1, "Updated the notes and added a.rs.");
    assert_eq!(
        chat[n - 1],
        (*id, "Changes to 2 files: notes.md, src/a.rs".to_owned())
    );

    fake.user_says(USER, "tell me everything");
    fake.wait_for("the long reply", WAIT, |f| f.documents(USER).len() == 2);
    let (_, name, whole) = fake.documents(USER)[1].clone();
    assert_eq!(name, "reply.md");
    assert_eq!(whole.trim_end(), long.trim_end(), "the whole reply");
    let chat = fake.chat(USER);
    let n = chat.len();
    // One message of the reply's start (not four or more), then the file.
    assert!(chat[n - 2].1.starts_with("Line 0 of a long answer."));
    assert!(!chat[n - 2].1.contains("Line 699"));
    assert_eq!(
        chat[n - 1].1,
        format!(
            "The whole reply ({} characters) is attached.",
            whole.chars().count()
        )
    );
}

/// A `MessageSending` hook reads a reply's text, not its files: one that
/// rewrites the reply replaces it whole, so neither the run's
/// `changes.diff` nor a `reply.md` of the text it rewrote is sent.
#[test]
fn a_reply_a_hook_rewrote_goes_without_its_files() {
    let dir = TestDir::new();
    let fake = FakeTelegram::start();
    let hook = dir.path().join("rewrite.sh");
    std::fs::write(
        &hook,
        "cat > /dev/null\nprintf '%s' '{\"hookSpecificOutput\":{\"hookEventName\":\"MessageSending\",\"updatedMessage\":\"Reviewed: the notes changed.\"}}'\n",
    )
    .unwrap();
    let _serve = serve_scripted(
        &fake,
        &dir,
        &[
            json!([{"tool_call": {"id": "w1", "name": "write_file", "arguments": {"path": "notes.md", "content": "new line\n"}}}]),
            json!([{"text": long_reply()}]),
        ],
        &format!(
            "[[hooks.MessageSending]]\ncommand = \"sh {}\"\nmatcher = \"telegram\"\n",
            hook.display()
        ),
    );
    fake.user_says(USER, "update the notes and tell me everything");
    fake.wait_for("the rewritten reply", WAIT, |f| {
        f.chat(USER)
            .iter()
            .any(|(_, text)| text == "Reviewed: the notes changed.")
    });
    // The file was written; what the chat was shown is the rewrite alone.
    assert_eq!(
        std::fs::read_to_string(dir.workspace().join("notes.md")).unwrap(),
        "new line\n"
    );
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        fake.documents(USER).is_empty(),
        "{:?}",
        fake.documents(USER)
    );
    assert!(fake.calls("sendDocument").is_empty());
    assert!(
        !fake
            .chat(USER)
            .iter()
            .any(|(_, text)| text.contains("Line 0")),
        "{:?}",
        fake.chat(USER)
    );
}
