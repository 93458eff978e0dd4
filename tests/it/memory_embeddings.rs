//! Memory search by meaning (`[memory] embeddings`) against a loopback
//! OpenAI-compatible `/v1/embeddings` server: items are embedded as they are
//! saved, a search finds an item that shares no word with it, recall brings
//! it into a turn, a failing endpoint leaves search and the run on words
//! with a clear message, `pincer memory embed` fills in what was missed, and
//! a long-running process sees vectors another process added and removed.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::http::openai::{message_text, text_reply};
use crate::support::http::{Loopback, Reply, Request};
use crate::support::{AcpProcess, TestDir, agent_text};
use serde_json::{Value, json};

/// Word stems per dimension: a text's vector counts the words of each
/// concept, plus a small constant so no vector is zero.
const CONCEPTS: &[&[&str]] = &[
    &["car", "automobil", "vehicle", "volvo", "driv"],
    &["cat", "feline", "kitten"],
    &["deploy", "release", "ship", "production"],
    &["database", "postgres", "sql"],
];

fn embedding(text: &str) -> Vec<f64> {
    let mut vector = vec![0.0; CONCEPTS.len() + 1];
    for word in text
        .to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        for (dim, stems) in CONCEPTS.iter().enumerate() {
            if stems.iter().any(|stem| word.starts_with(stem)) {
                vector[dim] += 1.0;
            }
        }
    }
    vector[CONCEPTS.len()] = 0.1;
    vector
}

/// The embeddings endpoint (down while `down` is set: 503 as a loading
/// Ollama or llama.cpp answers) and a chat model that answers "ok".
fn server(down: Arc<AtomicBool>) -> Loopback {
    Loopback::start(move |request: &Request, _| {
        if request.path.ends_with("/embeddings") {
            if down.load(Ordering::SeqCst) {
                return Reply::json(
                    503,
                    &json!({"error": {"message": "model is loading", "type": "unavailable"}}),
                );
            }
            let inputs: Vec<String> = request.body["input"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            // Given back in reverse order with their indexes, as the
            // format allows.
            let data: Vec<Value> = inputs
                .iter()
                .enumerate()
                .rev()
                .map(|(index, text)| {
                    json!({"object": "embedding", "index": index, "embedding": embedding(text)})
                })
                .collect();
            return Reply::json(
                200,
                &json!({"object": "list", "data": data, "model": request.body["model"],
                        "usage": {"prompt_tokens": 1, "total_tokens": 1}}),
            );
        }
        text_reply("ok")
    })
}

fn config(dir: &TestDir, server: &Loopback, embeddings: bool) {
    let mut text = format!(
        "provider = \"local\"\nmodel = \"m\"\n\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"m\"]\n",
        server.url
    );
    if embeddings {
        text.push_str("\n[memory]\nembeddings = \"local/embed\"\n");
    }
    dir.write_config(&text);
}

fn memory(dir: &TestDir, args: &[&str]) -> std::process::Output {
    dir.command()
        .current_dir(dir.workspace())
        .arg("memory")
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The texts `pincer memory search QUERY` finds, best first, and its stderr.
fn search(dir: &TestDir, query: &str) -> (Vec<String>, String) {
    let out = memory(dir, &["search", query, "--json"]);
    let texts = ok(&out)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["text"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    (texts, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn embedding_requests(server: &Loopback) -> Vec<Request> {
    server
        .requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/embeddings"))
        .collect()
}

/// `pincer run PROMPT`; the latest user message the model was sent, and stderr.
fn run(dir: &TestDir, server: &Loopback, cwd: &Path, prompt: &str) -> (String, String) {
    let out = dir
        .command()
        .args(["run", "--cwd"])
        .arg(cwd)
        .arg(prompt)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let chat = server
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path.ends_with("/chat/completions"))
        .unwrap();
    let user = chat.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(message_text)
        .unwrap_or_default();
    (user, stderr)
}

#[test]
fn memory_is_found_by_meaning_and_by_words_when_the_endpoint_fails() {
    let dir = TestDir::new();
    let down = Arc::new(AtomicBool::new(false));
    let server = server(down.clone());
    config(&dir, &server, true);
    let ws = dir.workspace();

    ok(&memory(
        &dir,
        &[
            "add",
            "--scope",
            "user",
            "The person drives a red Volvo to work",
        ],
    ));
    ok(&memory(
        &dir,
        &["add", "--scope", "user", "The cat is called Mo"],
    ));
    // Each save was embedded, by the configured model, as a list of inputs.
    let sent = embedding_requests(&server);
    assert_eq!(sent.len(), 2, "{sent:#?}");
    assert_eq!(sent[0].body["model"], "embed");
    assert_eq!(
        sent[0].body["input"],
        json!(["The person drives a red Volvo to work"])
    );

    // "automobile" shares no word with the item: found by meaning alone, and
    // the unrelated item is not.
    let (found, _) = search(&dir, "automobile");
    assert_eq!(found, ["The person drives a red Volvo to work"]);
    // Words still count: an item found both ways comes first.
    let (found, _) = search(&dir, "Is the cat a kitten?");
    assert_eq!(found, ["The cat is called Mo"]);

    // Without `embeddings`, words alone: nothing shares "automobile".
    config(&dir, &server, false);
    assert!(search(&dir, "automobile").0.is_empty());
    config(&dir, &server, true);

    // The endpoint fails: searches go on by words, saying why; a save is
    // kept without its vector; a run goes on without recall by meaning.
    down.store(true, Ordering::SeqCst);
    let (found, stderr) = search(&dir, "automobile");
    assert!(found.is_empty());
    assert!(
        stderr.contains("memory embeddings from local/embed failed")
            && stderr.contains("503")
            && stderr.contains("searched by words alone"),
        "{stderr}"
    );
    assert_eq!(
        search(&dir, "Volvo").0,
        ["The person drives a red Volvo to work"]
    );
    ok(&memory(
        &dir,
        &[
            "add",
            "--scope",
            "user",
            "Deploys go out on Tuesdays after the freeze",
        ],
    ));
    let (user, stderr) = run(&dir, &server, &ws, "When do we ship to production?");
    assert!(!user.contains("<memory>"), "{user}");
    assert!(stderr.contains("local/embed failed"), "{stderr}");

    // Back up: `pincer memory embed` fills in the item saved while it was
    // down (and only that one), and recall finds it by meaning.
    down.store(false, Ordering::SeqCst);
    let before = embedding_requests(&server).len();
    let out = ok(&memory(&dir, &["embed"]));
    assert_eq!(out.trim(), "embedded 1 with local/embed");
    let batch = &embedding_requests(&server)[before..];
    assert_eq!(
        batch
            .iter()
            .map(|r| r.body["input"].clone())
            .collect::<Vec<_>>(),
        [json!(["Deploys go out on Tuesdays after the freeze"])]
    );
    assert_eq!(
        ok(&memory(&dir, &["embed"])).trim(),
        "embedded 0 with local/embed"
    );
    let (user, _) = run(&dir, &server, &ws, "When do we ship to production?");
    assert!(
        user.contains("<memory>") && user.contains("Deploys go out on Tuesdays"),
        "{user}"
    );
    assert!(!user.contains("Volvo"), "{user}");

    // A changed text gets a new vector: the old meaning no longer finds it.
    let items: Vec<Value> = ok(&memory(&dir, &["list", "--all", "--json"]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let volvo = items
        .iter()
        .find(|i| i["text"].as_str().unwrap().contains("Volvo"))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(&memory(
        &dir,
        &[
            "edit",
            &volvo,
            "--text",
            "The person keeps a kitten at home",
        ],
    ));
    assert!(search(&dir, "automobile").0.is_empty());
    assert_eq!(
        search(&dir, "feline").0,
        ["The person keeps a kitten at home", "The cat is called Mo"]
    );

    // An import is embedded in one batch afterwards.
    let file = dir.path().join("import.jsonl");
    std::fs::write(
        &file,
        [
            json!({"id": "mem_a1", "text": "Postgres runs on port 5433 here", "scope": "user", "scope_key": "",
                   "source": {"by": "import"}, "created_at": 1, "updated_at": 1}),
            json!({"id": "mem_a2", "text": "Releases are tagged vX.Y.Z", "scope": "user", "scope_key": "",
                   "source": {"by": "import"}, "created_at": 1, "updated_at": 1}),
        ]
        .iter()
        .map(|v| v.to_string() + "\n")
        .collect::<String>(),
    )
    .unwrap();
    let before = embedding_requests(&server).len();
    let out = ok(&memory(&dir, &["import", file.to_str().unwrap()]));
    assert!(
        out.contains("imported 2") && out.contains("embedded 2"),
        "{out}"
    );
    assert_eq!(embedding_requests(&server).len(), before + 1);
    assert_eq!(
        search(&dir, "which SQL database").0,
        ["Postgres runs on port 5433 here"]
    );
}

#[test]
fn a_long_running_process_sees_vectors_another_process_adds_and_removes() {
    let dir = TestDir::new();
    let server = server(Arc::new(AtomicBool::new(false)));
    config(&dir, &server, true);
    let ws = dir.workspace();
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&ws);
    let ask =
        |acp: &mut AcpProcess| agent_text(&acp.prompt(&session, "/memory search automobile").0);
    assert!(ask(&mut acp).contains("Nothing remembered matches"));

    let id = ok(&memory(
        &dir,
        &[
            "add",
            "--scope",
            "user",
            "The person drives a red Volvo to work",
        ],
    ))
    .trim()
    .to_owned();
    let answer = ask(&mut acp);
    assert!(answer.contains(&id) && answer.contains("Volvo"), "{answer}");

    ok(&memory(&dir, &["rm", &id]));
    assert!(ask(&mut acp).contains("Nothing remembered matches"));
    // And one it saves itself, found by meaning at once.
    let (notes, _) = acp.prompt(&session, "/memory add user Our vehicle is a blue van");
    assert!(agent_text(&notes).contains("Remembered"));
    assert!(ask(&mut acp).contains("blue van"));
    acp.finish();
}

#[test]
fn doctor_checks_the_embeddings_endpoint() {
    let dir = TestDir::new();
    let down = Arc::new(AtomicBool::new(false));
    let server = server(down.clone());
    config(&dir, &server, true);
    let doctor = |online: bool| {
        let mut command = dir.command();
        command.arg("doctor");
        if online {
            command.arg("--online");
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, out) = doctor(true);
    assert!(
        out.contains("ok   memory       searched by words and meaning; embeddings from local/embed answer (5 dimensions)"),
        "{out}"
    );
    assert!(ok, "{out}");
    let (_, out) = doctor(false);
    assert!(
        out.contains("embeddings from local/embed (not asked; --online asks)"),
        "{out}"
    );
    down.store(true, Ordering::SeqCst);
    let (ok, out) = doctor(true);
    assert!(!ok);
    assert!(
        out.contains("FAIL memory       embeddings from local/embed do not answer")
            && out.contains("503"),
        "{out}"
    );
    // A name that is no provider is named, in doctor and wherever memory is used.
    let config_dir = dir.path().join("config").join("pincer");
    let text = std::fs::read_to_string(config_dir.join("config.toml")).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        text.replace("local/embed", "nowhere/embed"),
    )
    .unwrap();
    let (ok, out) = doctor(false);
    assert!(!ok);
    assert!(
        out.contains(
            "FAIL memory       memory.embeddings: no provider named nowhere (configured: local)"
        ),
        "{out}"
    );
    let out = memory(&dir, &["list"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("memory.embeddings: no provider named nowhere"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
