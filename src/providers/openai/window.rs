//! The context window an OpenAI-compatible server serves a model with, asked
//! from the server's own endpoints: the OpenAI API has no field for it, but
//! the local servers do, each its own way.
//!
//! | server | asked | read |
//! | --- | --- | --- |
//! | vLLM | `GET {base}/models` | `data[].max_model_len` of the model |
//! | llama.cpp | `GET {root}/props?model=NAME` | `default_generation_settings.n_ctx` (a slot's context: `-c` over `--parallel`) |
//! | Ollama | `POST {root}/api/show`, then `GET {root}/api/ps` | the loaded model's `context_length`, else `num_ctx` in `parameters`, else the smallest default |
//! | LM Studio | `GET {root}/api/v0/models` | the model's `loaded_context_length`, else `max_context_length` |
//!
//! `{root}` is the base URL without its `/v1`. The questions go in that
//! order, cheapest first, each with [`ASK_TIMEOUT`], and stop at the first
//! server that answers for the model. Nothing is asked before a run needs
//! the window (start-up stays off the network); the answer is kept for the
//! process, per base URL and model. An answer about a model the server has
//! not loaded yet (Ollama, LM Studio) is provisional: the next run asks
//! again until the server says what it loaded. A server that cannot be
//! reached is asked again next time; one that answers without a window is
//! not.
//!
//! Ollama: a model's trained length (`model_info["ARCH.context_length"]`)
//! is not what it serves. A request through `/v1` cannot set `num_ctx`, so
//! Ollama runs the model with the Modelfile's `num_ctx`, else its own
//! default (`OLLAMA_CONTEXT_LENGTH`, else 4,096 to 262,144 by free VRAM),
//! capped at the trained length, and cuts a longer prompt itself. What it
//! loaded (`/api/ps`) is the truth; `num_ctx` is the next best; before
//! either, the smallest default (4,096, or the trained length if less) errs
//! towards compacting early rather than having the prompt cut.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::OpenAiSettings;
use crate::core::models::{StatedWindow, WindowSource};

/// The limit on each question to the server.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// The limit on all the questions of one ask together.
const ASK_BUDGET: Duration = Duration::from_secs(8);

/// Ollama's smallest default context (below 24 GiB of VRAM), the window
/// assumed for a model it has not loaded and whose Modelfile sets no
/// `num_ctx`.
pub const OLLAMA_SMALLEST_DEFAULT: usize = 4096;

/// Asks one OpenAI-compatible server for its models' windows.
pub struct WindowAsker {
    base_url: String,
    root: String,
    api_key: Option<String>,
    headers: Vec<(String, String)>,
    client: crate::providers::LazyClient,
}

impl WindowAsker {
    /// An asker for the server `settings` reach; asks nothing yet.
    pub fn new(settings: &OpenAiSettings) -> Self {
        let base_url = settings.base_url.trim_end_matches('/').to_owned();
        Self {
            root: server_root(&base_url),
            base_url,
            api_key: settings.api_key.clone(),
            headers: settings.headers.clone(),
            client: crate::providers::LazyClient::new(&settings.name, ASK_TIMEOUT),
        }
    }
}

/// The server's root: the base URL without a trailing `/v1`.
pub fn server_root(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    base.strip_suffix("/v1").unwrap_or(base).to_owned()
}

/// What is known of one (base URL, model).
#[derive(Debug, Clone)]
enum Known {
    /// The server's last word: a window, or that it cannot say.
    Final(Option<StatedWindow>),
    /// A window about a model the server has not loaded yet.
    Provisional(StatedWindow),
}

/// What one round of questions found.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    Final(StatedWindow),
    Provisional(StatedWindow),
    CannotSay,
}

/// The server did not answer (refused, timed out).
#[derive(Debug)]
struct Unreachable;

type Slot = Arc<tokio::sync::Mutex<Option<Known>>>;

/// What this process knows, by (base URL, model).
static KNOWN: LazyLock<Mutex<HashMap<(String, String), Slot>>> = LazyLock::new(Default::default);

fn slot(base_url: &str, model: &str) -> Slot {
    let mut known = KNOWN.lock();
    known
        .entry((base_url.to_owned(), model.to_owned()))
        .or_default()
        .clone()
}

impl WindowSource for WindowAsker {
    fn ask<'a>(&'a self, model: &'a str) -> BoxFuture<'a, Option<StatedWindow>> {
        Box::pin(async move {
            let slot = slot(&self.base_url, model);
            // One round at a time per server and model: a second asker waits
            // for the first one's answer.
            let mut known = slot.lock().await;
            let provisional = match &*known {
                Some(Known::Final(window)) => return window.clone(),
                Some(Known::Provisional(window)) => Some(window.clone()),
                None => None,
            };
            let asked = tokio::time::timeout(ASK_BUDGET, self.round(model))
                .await
                .unwrap_or(Err(Unreachable));
            match asked {
                Ok(Answer::Final(window)) => {
                    tracing::debug!(base_url = %self.base_url, model, tokens = window.tokens, server = %window.server, "the server states the model's window");
                    *known = Some(Known::Final(Some(window.clone())));
                    Some(window)
                }
                Ok(Answer::Provisional(window)) => {
                    tracing::debug!(base_url = %self.base_url, model, tokens = window.tokens, server = %window.server, "the server states a window for a model it has not loaded");
                    *known = Some(Known::Provisional(window.clone()));
                    Some(window)
                }
                Ok(Answer::CannotSay) => {
                    tracing::debug!(base_url = %self.base_url, model, "the server states no window for the model");
                    *known = Some(Known::Final(None));
                    None
                }
                Err(Unreachable) => {
                    tracing::debug!(base_url = %self.base_url, model, "the server did not answer the question for the model's window");
                    provisional
                }
            }
        })
    }
}

impl WindowAsker {
    /// One round of questions, cheapest first, up to the first server that
    /// answers for `model`.
    async fn round(&self, model: &str) -> Result<Answer, Unreachable> {
        let Ok(client) = self.client.get() else {
            return Err(Unreachable);
        };
        let listed = self
            .send(client.get(format!("{}/models", self.base_url)))
            .await?;
        if let Some(tokens) = listed.as_ref().and_then(|list| vllm(list, model)) {
            return Ok(Answer::Final(stated(
                "vLLM",
                "max_model_len in GET /v1/models",
                tokens,
            )));
        }
        let mut props =
            reqwest::Url::parse(&format!("{}/props", self.root)).map_err(|_| Unreachable)?;
        // A llama.cpp router serves several models and answers for the one named.
        props.query_pairs_mut().append_pair("model", model);
        if let Some(tokens) = self
            .send(client.get(props))
            .await?
            .as_ref()
            .and_then(llama_cpp)
        {
            return Ok(Answer::Final(stated(
                "llama.cpp",
                "n_ctx in GET /props",
                tokens,
            )));
        }
        let show = self
            .send(
                client
                    .post(format!("{}/api/show", self.root))
                    .json(&json!({ "model": model })),
            )
            .await?;
        if let Some(show) = show.filter(is_ollama_show) {
            // Only a loaded model is listed; an unanswered list says nothing.
            let running = self
                .send(client.get(format!("{}/api/ps", self.root)))
                .await
                .ok()
                .flatten();
            return Ok(ollama(&show, running.as_ref(), model));
        }
        let studio = self
            .send(client.get(format!("{}/api/v0/models", self.root)))
            .await?;
        Ok(studio
            .as_ref()
            .and_then(|list| lm_studio(list, model))
            .unwrap_or(Answer::CannotSay))
    }

    /// Sends one question with the provider's key and headers: the JSON of a
    /// successful answer, `None` for any other answer.
    async fn send(
        &self,
        mut request: reqwest::RequestBuilder,
    ) -> Result<Option<Value>, Unreachable> {
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        for (name, value) in &self.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let answered = tokio::time::timeout(ASK_TIMEOUT, async {
            let response = request.send().await.map_err(|_| Unreachable)?;
            if !response.status().is_success() {
                return Ok(None);
            }
            Ok(response.json::<Value>().await.ok())
        })
        .await;
        answered.unwrap_or(Err(Unreachable))
    }
}

fn stated(server: &str, field: &str, tokens: usize) -> StatedWindow {
    StatedWindow {
        tokens,
        server: server.to_owned(),
        field: field.to_owned(),
    }
}

/// A positive token count.
fn tokens(value: &Value) -> Option<usize> {
    value
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .filter(|n| *n > 0)
}

/// The entry of `model` in an OpenAI-style list (`{"data": [{"id": …}]}`).
fn listed<'a>(list: &'a Value, model: &str) -> Option<&'a Value> {
    list["data"]
        .as_array()?
        .iter()
        .find(|entry| entry["id"].as_str() == Some(model))
}

/// vLLM's `GET /v1/models`: the model's `max_model_len`.
fn vllm(list: &Value, model: &str) -> Option<usize> {
    tokens(&listed(list, model)?["max_model_len"])
}

/// llama.cpp's `GET /props`: `default_generation_settings.n_ctx`, the
/// context of one slot (what one request gets).
fn llama_cpp(props: &Value) -> Option<usize> {
    tokens(&props["default_generation_settings"]["n_ctx"])
}

/// Whether an answer to `POST /api/show` is Ollama's (another server may
/// answer the path with an error under status 200).
fn is_ollama_show(show: &Value) -> bool {
    show["model_info"].is_object() || show["parameters"].is_string() || show["details"].is_object()
}

/// An Ollama model name with its tag (`llama3.2` is `llama3.2:latest`).
fn ollama_name(name: &str) -> String {
    let last = name.rsplit('/').next().unwrap_or(name);
    if last.contains(':') {
        name.to_owned()
    } else {
        format!("{name}:latest")
    }
}

/// Ollama's window for `model` from `POST /api/show` and `GET /api/ps`: what
/// it loaded the model with, else the Modelfile's `num_ctx` (capped at the
/// trained length, as Ollama caps it), else — the model not loaded yet — the
/// smallest default, provisionally.
fn ollama(show: &Value, running: Option<&Value>, model: &str) -> Answer {
    let name = ollama_name(model);
    let loaded = running
        .and_then(|ps| ps["models"].as_array())
        .and_then(|models| {
            models.iter().find(|entry| {
                ["name", "model"]
                    .iter()
                    .any(|key| entry[*key].as_str().map(ollama_name).as_deref() == Some(&name))
            })
        })
        .and_then(|entry| tokens(&entry["context_length"]));
    if let Some(loaded) = loaded {
        return Answer::Final(stated(
            "Ollama",
            "context_length of the loaded model in GET /api/ps",
            loaded,
        ));
    }
    let info = &show["model_info"];
    let trained = info["general.architecture"]
        .as_str()
        .and_then(|arch| tokens(&info[format!("{arch}.context_length")]));
    let num_ctx = show["parameters"].as_str().and_then(|parameters| {
        parameters.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx"))
                .then(|| words.next()?.parse::<usize>().ok())
                .flatten()
                .filter(|n| *n > 0)
        })
    });
    let capped = |tokens: usize| trained.map_or(tokens, |trained| tokens.min(trained));
    match num_ctx {
        Some(num_ctx) => Answer::Final(stated(
            "Ollama",
            "num_ctx in POST /api/show",
            capped(num_ctx),
        )),
        None => Answer::Provisional(stated(
            "Ollama",
            "its smallest default context; the model is not loaded yet",
            capped(OLLAMA_SMALLEST_DEFAULT),
        )),
    }
}

/// LM Studio's `GET /api/v0/models`: the model's `loaded_context_length`
/// when loaded, else (provisionally) its `max_context_length`.
fn lm_studio(list: &Value, model: &str) -> Option<Answer> {
    let entry = listed(list, model)?;
    if entry["state"].as_str() == Some("loaded")
        && let Some(loaded) = tokens(&entry["loaded_context_length"])
    {
        return Some(Answer::Final(stated(
            "LM Studio",
            "loaded_context_length in GET /api/v0/models",
            loaded,
        )));
    }
    tokens(&entry["max_context_length"]).map(|max| {
        Answer::Provisional(stated(
            "LM Studio",
            "max_context_length in GET /api/v0/models; the model is not loaded yet",
            max,
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn final_tokens(answer: &Answer) -> Option<usize> {
        let Answer::Final(window) = answer else {
            return None;
        };
        Some(window.tokens)
    }

    fn provisional_tokens(answer: &Answer) -> Option<usize> {
        let Answer::Provisional(window) = answer else {
            return None;
        };
        Some(window.tokens)
    }

    #[test]
    fn the_root_is_the_base_url_without_v1() {
        assert_eq!(
            server_root("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            server_root("http://127.0.0.1:8080/v1/"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            server_root("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080"
        );
        assert_eq!(
            server_root("https://proxy.example/llm/v1"),
            "https://proxy.example/llm"
        );
    }

    #[test]
    fn vllm_states_max_model_len_of_the_named_model() {
        // The shape of vLLM's ModelCard list.
        let list = json!({"object": "list", "data": [
            {"id": "other", "object": "model", "owned_by": "vllm", "root": "other", "max_model_len": 8192},
            {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "created": 1, "owned_by": "vllm",
             "root": "Qwen/Qwen2.5-7B-Instruct", "parent": null, "max_model_len": 32768, "permission": []}
        ]});
        assert_eq!(vllm(&list, "Qwen/Qwen2.5-7B-Instruct"), Some(32768));
        assert_eq!(vllm(&list, "missing"), None);
        // OpenAI's own list says nothing of windows; nor does llama.cpp's
        // `meta.n_ctx_train` (the trained length, not the served one).
        let openai = json!({"object": "list", "data": [{"id": "gpt-4.1", "object": "model", "owned_by": "system"}]});
        assert_eq!(vllm(&openai, "gpt-4.1"), None);
        let llama = json!({"object": "list", "data": [{"id": "m", "owned_by": "llamacpp", "meta": {"n_ctx_train": 131072}}]});
        assert_eq!(vllm(&llama, "m"), None);
    }

    #[test]
    fn llama_cpp_states_the_slot_context_of_props() {
        // Since late 2024: the slot's settings with `params` nested.
        let current = json!({
            "default_generation_settings": {"id": 0, "id_task": -1, "n_ctx": 4096, "speculative": false,
                "is_processing": false, "params": {"n_predict": -1, "temperature": 0.8}},
            "total_slots": 1, "model_path": "m.gguf", "chat_template": "...", "build_info": "b4000"
        });
        assert_eq!(llama_cpp(&current), Some(4096));
        // Before: the generation settings flat, `n_ctx` among them.
        let older = json!({
            "system_prompt": "", "default_generation_settings": {"n_ctx": 2048, "n_predict": -1, "model": "m.gguf", "temperature": 0.8},
            "total_slots": 1, "chat_template": ""
        });
        assert_eq!(llama_cpp(&older), Some(2048));
        assert_eq!(llama_cpp(&json!({"error": {"code": 404}})), None);
        assert_eq!(
            llama_cpp(&json!({"default_generation_settings": {"n_ctx": 0}})),
            None
        );
    }

    fn show(parameters: Option<&str>) -> Value {
        let mut show = json!({
            "modelfile": "FROM llama3.2",
            "template": "{{ .Prompt }}",
            "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                        "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "llama", "general.parameter_count": 3212749888u64,
                           "llama.context_length": 131072, "llama.embedding_length": 3072},
            "capabilities": ["completion", "tools"]
        });
        if let Some(parameters) = parameters {
            show["parameters"] = json!(parameters);
        }
        show
    }

    fn ps(name: &str, context_length: u64) -> Value {
        json!({"models": [{"name": name, "model": name, "size": 3338801664u64, "digest": "a80c",
            "details": {"format": "gguf", "family": "llama"}, "expires_at": "2025-10-17T16:47:07.93355-07:00",
            "size_vram": 3338801664u64, "context_length": context_length}]})
    }

    #[test]
    fn ollama_states_what_it_loaded_then_num_ctx_then_its_smallest_default() {
        let plain = show(Some("stop \"<|eot_id|>\""));
        // Loaded: what `/api/ps` says it runs the model with, tag or not.
        let loaded = ollama(&plain, Some(&ps("llama3.2:latest", 8192)), "llama3.2");
        assert_eq!(final_tokens(&loaded), Some(8192));
        // A loaded model of another name says nothing of this one.
        let other = ollama(&plain, Some(&ps("qwen2.5:7b", 32768)), "llama3.2");
        assert_eq!(provisional_tokens(&other), Some(OLLAMA_SMALLEST_DEFAULT));
        // Not loaded, the Modelfile's num_ctx: what a /v1 request gets.
        let set = show(Some("num_ctx 16384\ntemperature 0.7"));
        assert_eq!(
            final_tokens(&ollama(&set, Some(&json!({"models": []})), "llama3.2")),
            Some(16384)
        );
        // Capped at the trained length, as Ollama caps it.
        let huge = show(Some("num_ctx 1000000"));
        assert_eq!(final_tokens(&ollama(&huge, None, "llama3.2")), Some(131072));
        // Neither: the smallest default, provisional (asked again later);
        // never the trained length, which Ollama does not serve by default.
        let unknown = ollama(&show(None), None, "llama3.2");
        assert_eq!(provisional_tokens(&unknown), Some(OLLAMA_SMALLEST_DEFAULT));
        let mut small = show(None);
        small["model_info"]["llama.context_length"] = json!(2048);
        assert_eq!(
            provisional_tokens(&ollama(&small, None, "llama3.2")),
            Some(2048)
        );
    }

    #[test]
    fn only_ollama_answers_count_as_ollama() {
        assert!(is_ollama_show(&show(None)));
        // LM Studio answers unknown paths with an error under status 200.
        assert!(!is_ollama_show(
            &json!({"error": "Unexpected endpoint or method. (POST /api/show)"})
        ));
        assert_eq!(ollama_name("llama3.2"), "llama3.2:latest");
        assert_eq!(ollama_name("qwen2.5-coder:7b"), "qwen2.5-coder:7b");
        assert_eq!(
            ollama_name("registry.local:5000/team/m"),
            "registry.local:5000/team/m:latest"
        );
    }

    #[test]
    fn lm_studio_states_the_loaded_context_else_the_maximum_provisionally() {
        let list = json!({"object": "list", "data": [
            {"id": "qwen2.5-7b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community",
             "arch": "qwen2", "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "loaded",
             "max_context_length": 32768, "loaded_context_length": 4096},
            {"id": "meta-llama-3.1-8b-instruct", "object": "model", "type": "llm", "publisher": "lmstudio-community",
             "arch": "llama", "compatibility_type": "gguf", "quantization": "Q4_K_M", "state": "not-loaded",
             "max_context_length": 131072}
        ]});
        let loaded = lm_studio(&list, "qwen2.5-7b-instruct").unwrap();
        assert_eq!(final_tokens(&loaded), Some(4096));
        let not_loaded = lm_studio(&list, "meta-llama-3.1-8b-instruct").unwrap();
        assert_eq!(provisional_tokens(&not_loaded), Some(131072));
        assert_eq!(lm_studio(&list, "missing"), None);
    }
}
