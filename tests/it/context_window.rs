//! The context window asked from the model's server: loopback fakes of
//! llama.cpp (`GET /props`), Ollama (`POST /api/show`, `GET /api/ps`), vLLM
//! (`max_model_len` in `GET /v1/models`) and LM Studio (`GET
//! /api/v0/models`), each answering its own endpoints in its documented
//! format and the others as that server does. The window each states shows
//! in `pincer doctor --online`, in `pincer context show` and in the usage
//! events, and compaction follows it; a configured window wins and asks
//! nothing; nothing is asked before a run needs it, and then once per process.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::support::http::openai::chunk;
use crate::support::http::{Loopback, Reply, Request};
use crate::support::{AcpProcess, TestDir};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    LlamaCpp,
    Ollama,
    Vllm,
    LmStudio,
    /// An OpenAI-compatible server that states no window.
    Plain,
}

/// A streamed answer with its usage chunk, as OpenAI-compatible servers send
/// it (`choices` empty, `usage` set).
fn answer(text: &str) -> Reply {
    Reply::event_stream(
        chunk(json!({"content": text}), Value::Null)
            + &chunk(json!({}), json!("stop"))
            + &format!(
                "data: {}\n\n",
                json!({"id": "c1", "object": "chat.completion.chunk", "choices": [],
                       "usage": {"prompt_tokens": 900, "completion_tokens": 10, "total_tokens": 910}})
            )
            + "data: [DONE]\n\n",
    )
}

fn is_summary_request(request: &Request) -> bool {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .is_some_and(|text| text.contains("is being replaced now"))
}

/// How each server answers a path it does not serve.
fn not_found(server: Server, request: &Request) -> Reply {
    match server {
        Server::LlamaCpp => Reply::json(
            404,
            &json!({"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
        ),
        Server::Ollama => Reply::new(404, "text/plain", "404 page not found"),
        Server::Vllm | Server::Plain => Reply::json(404, &json!({"detail": "Not Found"})),
        // LM Studio answers an unknown endpoint with an error under 200.
        Server::LmStudio => Reply::json(
            200,
            &json!({"error": format!("Unexpected endpoint or method. ({} {})", request.method, request.path)}),
        ),
    }
}

/// A fake `server` serving `model` with a window of `window` tokens; for
/// Ollama the model is loaded (listed by `/api/ps`) once it answered a turn,
/// and the flag returned says whether it is.
fn fake(server: Server, model: &'static str, window: u64) -> (Loopback, Arc<AtomicBool>) {
    let loaded = Arc::new(AtomicBool::new(false));
    let flag = loaded.clone();
    let loopback =
        Loopback::start(move |request: &Request, _| serve(server, model, window, &flag, request));
    (loopback, loaded)
}

/// How the fake `server` answers `request`; `flag`: whether a turn loaded
/// the model.
fn serve(
    server: Server,
    model: &'static str,
    window: u64,
    flag: &AtomicBool,
    request: &Request,
) -> Reply {
    let path = request.path.split('?').next().unwrap_or_default();
    match (request.method.as_str(), path) {
        ("POST", "/v1/chat/completions") => {
            flag.store(true, Ordering::SeqCst);
            if is_summary_request(request) {
                return answer("SUMMARY of the conversation so far");
            }
            answer("ok")
        }
        ("GET", "/v1/models") => Reply::json(
            200,
            &match server {
                Server::LlamaCpp => json!({"object": "list", "data": [{
                    "id": model, "object": "model", "created": 1735142223, "owned_by": "llamacpp",
                    "meta": {"vocab_type": 2, "n_vocab": 128256, "n_ctx_train": 131072,
                             "n_embd": 4096, "n_params": 8030261312u64, "size": 4912898304u64}}]}),
                Server::Ollama => json!({"object": "list", "data": [{
                    "id": format!("{model}:latest"), "object": "model", "created": 1735142223,
                    "owned_by": "library"}]}),
                Server::Vllm => json!({"object": "list", "data": [{
                    "id": model, "object": "model", "created": 1735142223, "owned_by": "vllm",
                    "root": model, "parent": null, "max_model_len": window,
                    "permission": [{"id": "modelperm-1", "object": "model_permission",
                        "created": 1735142223, "allow_create_engine": false, "allow_sampling": true,
                        "allow_logprobs": true, "allow_search_indices": false, "allow_view": true,
                        "allow_fine_tuning": false, "organization": "*", "group": null,
                        "is_blocking": false}]}]}),
                Server::LmStudio => json!({"data": [{"id": model, "object": "model",
                    "owned_by": "organization_owner"}], "object": "list"}),
                Server::Plain => json!({"object": "list", "data": [{"id": model,
                    "object": "model", "created": 1735142223, "owned_by": "system"}]}),
            },
        ),
        ("GET", "/props") if server == Server::LlamaCpp => Reply::json(
            200,
            &json!({
                "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": window,
                    "speculative": false, "is_processing": false,
                    "params": {"n_predict": -1, "seed": 4294967295u64, "temperature": 0.8,
                               "top_k": 40, "top_p": 0.95, "max_tokens": -1, "n_keep": 0},
                    "prompt": "", "next_token": {"has_next_token": true, "has_new_line": false,
                        "n_remain": -1, "n_decoded": 0, "stopping_word": ""}},
                "total_slots": 1,
                "model_path": "../models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf",
                "chat_template": "...", "chat_template_caps": {},
                "modalities": {"vision": false}, "build_info": "b5000-abcdef0",
                "is_sleeping": false
            }),
        ),
        ("POST", "/api/show") if server == Server::Ollama => Reply::json(
            200,
            &json!({
                "modelfile": format!("FROM {model}"),
                "parameters": "stop                           \"<|start_header_id|>\"\nstop                           \"<|eot_id|>\"",
                "template": "{{ .Prompt }}",
                "details": {"parent_model": "", "format": "gguf", "family": "llama",
                    "families": ["llama"], "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
                "model_info": {"general.architecture": "llama",
                    "general.parameter_count": 3212749888u64, "llama.context_length": 131072,
                    "llama.embedding_length": 3072},
                "capabilities": ["completion", "tools"],
                "modified_at": "2025-08-14T15:49:43.634137516-07:00"
            }),
        ),
        ("GET", "/api/ps") if server == Server::Ollama => {
            let models = if flag.load(Ordering::SeqCst) {
                json!([{"name": format!("{model}:latest"), "model": format!("{model}:latest"),
                    "size": 3338801664u64, "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
                    "details": {"parent_model": "", "format": "gguf", "family": "llama",
                        "families": ["llama"], "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
                    "expires_at": "2025-10-17T16:47:07.93355-07:00", "size_vram": 3338801664u64,
                    "context_length": window}])
            } else {
                json!([])
            };
            Reply::json(200, &json!({ "models": models }))
        }
        ("GET", "/api/v0/models") if server == Server::LmStudio => Reply::json(
            200,
            &json!({"object": "list", "data": [
                {"id": model, "object": "model", "type": "llm", "publisher": "lmstudio-community",
                 "arch": "qwen2", "compatibility_type": "gguf", "quantization": "Q4_K_M",
                 "state": "loaded", "max_context_length": 131072, "loaded_context_length": window},
                {"id": "text-embedding-nomic-embed-text-v1.5", "object": "model", "type": "embeddings",
                 "publisher": "nomic-ai", "arch": "nomic-bert", "compatibility_type": "gguf",
                 "quantization": "Q4_0", "state": "not-loaded", "max_context_length": 2048}
            ]}),
        ),
        _ => not_found(server, request),
    }
}

/// A configuration naming `server` as the default provider, serving `model`.
fn config(server: &Loopback, model: &str, extra: &str) -> String {
    format!(
        "provider = \"local\"\nmodel = \"{model}\"\n{extra}\n[providers.local]\nkind = \"openai\"\nbase_url = \"{}/v1\"\nmodels = [\"{model}\"]\n",
        server.url
    )
}

/// `pincer doctor --online`: the line of the provider.
fn doctor_line(dir: &TestDir) -> String {
    let out = dir.command().args(["doctor", "--online"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stdout
        .lines()
        .find(|line| line.contains("provider local"))
        .unwrap_or_else(|| panic!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
        .to_owned()
}

/// `pincer run --output jsonl PROMPT` (continuing `session` when given): its
/// JSON lines.
fn run(dir: &TestDir, session: Option<&str>, prompt: &str) -> Vec<Value> {
    let mut command = dir.command();
    command.args(["run", "--output", "jsonl"]);
    match session {
        Some(id) => command.args(["--session", id]),
        None => command.arg("--cwd").arg(dir.workspace()),
    };
    let out = command.arg(prompt).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn session_of(lines: &[Value]) -> String {
    lines
        .iter()
        .find_map(|e| e["session_id"].as_str().map(str::to_owned))
        .unwrap()
}

/// The window sizes of a run's usage events.
fn usage_sizes(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .filter(|e| e["type"] == "usage")
        .map(|e| e["context"]["size"].as_u64().unwrap())
        .collect()
}

/// `pincer context show` of `session`: the text's first line and the JSON.
fn context_show(dir: &TestDir, session: &str) -> (String, Value) {
    let text = dir
        .command()
        .args(["context", "show", "--session", session])
        .output()
        .unwrap();
    assert!(
        text.status.success(),
        "{}",
        String::from_utf8_lossy(&text.stderr)
    );
    let json = dir
        .command()
        .args(["context", "show", "--json", "--session", session])
        .output()
        .unwrap();
    let first = String::from_utf8_lossy(&text.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    (first, serde_json::from_slice(&json.stdout).unwrap())
}

/// The paths the fake was asked, but the model turns.
fn questions(server: &Loopback) -> Vec<String> {
    server
        .requests()
        .iter()
        .filter(|r| r.path != "/v1/chat/completions")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect()
}

/// Against a fake `server` stating `window`: doctor, a run and context show
/// all give the window and say who stated it.
fn stated_everywhere(server: Server, model: &'static str, window: u64, from: &str) {
    let dir = TestDir::new();
    let (fake, _) = fake(server, model, window);
    dir.write_config(&config(&fake, model, ""));
    let line = doctor_line(&dir);
    assert!(line.starts_with("ok "), "{line}");
    assert!(
        line.contains(&format!("window {window} tokens, asked from {from}")),
        "{line}"
    );
    let lines = run(&dir, None, "hello");
    assert_eq!(usage_sizes(&lines), vec![window]);
    let session = session_of(&lines);
    let (header, view) = context_show(&dir, &session);
    assert!(
        header.contains(&format!("window {window} tokens, asked from {from}")),
        "{header}"
    );
    assert_eq!(view["window"], window);
    assert_eq!(view["window_from"], format!("asked from {from}"));
}

#[test]
fn llama_cpp_states_the_context_it_was_started_with() {
    stated_everywhere(
        Server::LlamaCpp,
        "m",
        4096,
        "llama.cpp (n_ctx in GET /props)",
    );
}

#[test]
fn vllm_states_max_model_len() {
    stated_everywhere(
        Server::Vllm,
        "Qwen/Qwen2.5-7B-Instruct",
        32768,
        "vLLM (max_model_len in GET /v1/models)",
    );
}

#[test]
fn lm_studio_states_the_loaded_context_length() {
    stated_everywhere(
        Server::LmStudio,
        "qwen2.5-7b-instruct",
        8192,
        "LM Studio (loaded_context_length in GET /api/v0/models)",
    );
}

#[test]
fn ollama_states_its_default_until_the_model_is_loaded_then_what_it_loaded() {
    let dir = TestDir::new();
    let (fake, loaded) = fake(Server::Ollama, "llama3.2", 16384);
    dir.write_config(&config(&fake, "llama3.2", ""));
    // Not loaded, no num_ctx: Ollama's smallest default, not the trained
    // 131,072 tokens it would not serve.
    let line = doctor_line(&dir);
    assert!(
        line.contains(
            "window 4096 tokens, asked from Ollama (its smallest default context; the model is not loaded yet)"
        ),
        "{line}"
    );
    assert!(!loaded.load(Ordering::SeqCst));
    let lines = run(&dir, None, "hello");
    assert_eq!(usage_sizes(&lines), vec![4096]);
    // The turn loaded the model: from now on, what Ollama loaded it with.
    let session = session_of(&lines);
    let (header, view) = context_show(&dir, &session);
    let from = "Ollama (context_length of the loaded model in GET /api/ps)";
    assert!(
        header.contains(&format!("window 16384 tokens, asked from {from}")),
        "{header}"
    );
    assert_eq!(view["window_from"], format!("asked from {from}"));
    let lines = run(&dir, Some(&session), "again");
    assert_eq!(usage_sizes(&lines), vec![16384]);
}

#[test]
fn a_server_that_cannot_say_leaves_the_window_assumed() {
    let dir = TestDir::new();
    let (fake, _) = fake(Server::Plain, "m", 0);
    dir.write_config(&config(&fake, "m", ""));
    let line = doctor_line(&dir);
    assert!(line.contains("window 128000 tokens, assumed"), "{line}");
    let before = questions(&fake).len();
    let lines = run(&dir, None, "hello");
    assert_eq!(usage_sizes(&lines), vec![128000]);
    // The run asked each place once, cheapest first, then assumed.
    assert_eq!(
        questions(&fake)[before..],
        [
            "GET /v1/models",
            "GET /props?model=m",
            "POST /api/show",
            "GET /api/v0/models",
        ]
    );
    let (header, view) = context_show(&dir, &session_of(&lines));
    assert!(header.contains("window 128000 tokens, assumed"), "{header}");
    assert_eq!(view["window_from"], "assumed");
}

#[test]
fn a_configured_window_wins_and_asks_nothing() {
    for (extra, window) in [
        ("[models.\"m\"]\ncontext_window = 50000\n", 50000),
        ("context_window = 60000\n", 60000),
    ] {
        let dir = TestDir::new();
        let (fake, _) = fake(Server::LlamaCpp, "m", 4096);
        // The top-level key goes before the tables.
        let text = if extra.starts_with('[') {
            config(&fake, "m", "") + extra
        } else {
            config(&fake, "m", extra)
        };
        dir.write_config(&text);
        let line = doctor_line(&dir);
        assert!(
            line.contains(&format!("window {window} tokens, configured")),
            "{line}"
        );
        let lines = run(&dir, None, "hello");
        assert_eq!(usage_sizes(&lines), vec![window]);
        let (header, view) = context_show(&dir, &session_of(&lines));
        assert!(
            header.contains(&format!("window {window} tokens, configured")),
            "{header}"
        );
        assert_eq!(view["window_from"], "configured");
        // `doctor --online` lists the models; nothing asks for a window.
        assert_eq!(questions(&fake), vec!["GET /v1/models"]);
    }
}

#[test]
fn the_window_is_asked_before_the_first_turn_and_once_per_process() {
    let dir = TestDir::new();
    let (fake, _) = fake(Server::LlamaCpp, "m", 4096);
    dir.write_config(&config(&fake, "m", ""));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    // Starting and opening a session ask nothing.
    assert!(fake.requests().is_empty(), "{:#?}", questions(&fake));
    for prompt in ["one", "two", "three"] {
        let (messages, response) = acp.prompt(&session, prompt);
        assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
        let sizes: Vec<&Value> = messages
            .iter()
            .filter(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
            .map(|m| &m["params"]["update"]["size"])
            .collect();
        assert_eq!(sizes, vec![&json!(4096)], "{prompt}");
    }
    assert_eq!(
        questions(&fake),
        vec!["GET /v1/models", "GET /props?model=m"]
    );
    // The window asked came before the first turn.
    assert_eq!(fake.requests()[2].path, "/v1/chat/completions");
    acp.finish();
}

#[test]
fn an_unloaded_model_is_asked_again_until_the_server_says_what_it_loaded() {
    let dir = TestDir::new();
    let (fake, _) = fake(Server::Ollama, "llama3.2", 16384);
    dir.write_config(&config(&fake, "llama3.2", ""));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let mut sizes = Vec::new();
    for prompt in ["one", "two", "three"] {
        let (messages, _) = acp.prompt(&session, prompt);
        sizes.extend(
            messages
                .iter()
                .filter(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
                .map(|m| m["params"]["update"]["size"].as_u64().unwrap()),
        );
    }
    // The default while not loaded, then what Ollama loaded, asked no more.
    assert_eq!(sizes, vec![4096, 16384, 16384]);
    let shows = questions(&fake)
        .iter()
        .filter(|q| *q == "POST /api/show")
        .count();
    assert_eq!(shows, 2, "{:#?}", questions(&fake));
    acp.finish();
}

/// Two runs of one session against `server`: a long prompt, then another;
/// how many summary requests the server saw, and the second run's lines.
fn two_long_runs(server: Server) -> (usize, Vec<Value>) {
    let dir = TestDir::new();
    let (fake, _) = fake(server, "m", 4096);
    dir.write_config(&config(&fake, "m", ""));
    let first = run(
        &dir,
        None,
        &format!("FIRST: {}", "a line of a long build log\n".repeat(200)),
    );
    let second = run(
        &dir,
        Some(&session_of(&first)),
        &format!("SECOND: {}", "a line of another log\n".repeat(100)),
    );
    let summaries = fake
        .requests()
        .iter()
        .filter(|r| is_summary_request(r))
        .count();
    (summaries, second)
}

#[test]
fn compaction_follows_the_asked_window() {
    // llama.cpp started with `-c 4096`: the second run nears the window and
    // the conversation is compacted before its turn.
    let (summaries, second) = two_long_runs(Server::LlamaCpp);
    assert_eq!(summaries, 1);
    let notice = second
        .iter()
        .find(|e| e["type"] == "notice")
        .unwrap_or_else(|| panic!("{second:#?}"));
    let message = notice["message"].as_str().unwrap();
    assert!(
        message.starts_with("The conversation neared the model's context window (about ")
            && message.contains("of 4096 tokens)"),
        "{message}"
    );
    // The same conversation against a server that cannot say: 128,000
    // tokens assumed, nothing compacted.
    let (summaries, second) = two_long_runs(Server::Plain);
    assert_eq!(summaries, 0);
    assert!(!second.iter().any(|e| e["type"] == "notice"), "{second:#?}");
}

#[test]
fn a_server_slow_to_answer_is_not_waited_for_and_is_asked_again() {
    let dir = TestDir::new();
    let hung = Arc::new(AtomicBool::new(false));
    let once = hung.clone();
    let loaded = AtomicBool::new(false);
    // llama.cpp whose first `/props` hangs for 20 s (a router loading the
    // model, say): the run goes on with the window assumed, and the next
    // run asks again.
    let fake = Loopback::start(move |request: &Request, _| {
        if request.path.starts_with("/props") && !once.swap(true, Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_secs(20));
        }
        serve(Server::LlamaCpp, "m", 4096, &loaded, request)
    });
    dir.write_config(&config(&fake, "m", ""));
    let mut acp = AcpProcess::spawn(&dir, &[]);
    acp.initialize();
    let session = acp.new_session(&dir.workspace());
    let mut sizes = Vec::new();
    for prompt in ["one", "two"] {
        let started = std::time::Instant::now();
        let (messages, _) = acp.prompt(&session, prompt);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(15),
            "{prompt} waited {:?}",
            started.elapsed()
        );
        sizes.extend(
            messages
                .iter()
                .filter(|m| m["params"]["update"]["sessionUpdate"] == "usage_update")
                .map(|m| m["params"]["update"]["size"].as_u64().unwrap()),
        );
    }
    assert!(hung.load(Ordering::SeqCst));
    assert_eq!(sizes, vec![128000, 4096]);
    acp.finish();
}
