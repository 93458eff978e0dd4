//! One loopback HTTP/1.1 server for every fake that stands in for a server
//! that cannot run here (model APIs, login's provider, a webhook peer, the
//! Telegram Bot API). The plumbing is here once: bind `127.0.0.1:0`, a thread
//! per connection, read one request (request line, headers, a body of
//! `content-length` bytes), hand it to the fake, write its reply and close.
//! Each fake is only its handler, speaking its documented wire format.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// One request as the fake received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The request target: path and query.
    pub path: String,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    /// The body as sent.
    pub raw: Vec<u8>,
    /// The body as JSON, or `null` when it is not.
    pub body: Value,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// A `multipart/form-data` body's parts: (name, file name, content).
    pub fn form_parts(&self) -> Vec<(String, Option<String>, Vec<u8>)> {
        let Some(boundary) = self
            .headers
            .iter()
            .find(|(name, _)| name == "content-type")
            .and_then(|(_, value)| value.split("boundary=").nth(1))
            .map(|b| format!("--{}", b.trim_matches('"')))
        else {
            return Vec::new();
        };
        let raw = &self.raw;
        let find = |from: usize, needle: &[u8]| {
            raw[from..]
                .windows(needle.len())
                .position(|w| w == needle)
                .map(|at| at + from)
        };
        let mut parts = Vec::new();
        let mut at = match find(0, boundary.as_bytes()) {
            Some(at) => at + boundary.len(),
            None => return parts,
        };
        while raw[at..].starts_with(b"\r\n") {
            let head_end = find(at, b"\r\n\r\n").unwrap();
            let head = String::from_utf8_lossy(&raw[at + 2..head_end]).to_string();
            let next = find(head_end, format!("\r\n{boundary}").as_bytes()).unwrap();
            let disposition = head
                .split("\r\n")
                .find(|line| line.to_ascii_lowercase().starts_with("content-disposition"))
                .unwrap_or_default();
            let attribute = |key: &str| {
                disposition
                    .split(';')
                    .map(str::trim)
                    .find_map(|p| p.strip_prefix(&format!("{key}=\"")))
                    .map(|v| v.trim_end_matches(['"', '\r', '\n']).to_owned())
            };
            parts.push((
                attribute("name").unwrap_or_default(),
                attribute("filename"),
                raw[head_end + 4..next].to_vec(),
            ));
            at = next + 2 + boundary.len();
        }
        parts
    }
}

/// What the fake answers.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A response with this status, content type, extra headers and body.
    Answer {
        status: u16,
        content_type: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// A 200 streamed as a slow server streams it: the head at once, then
    /// each part after its pause, then the connection closes (no length).
    Paced {
        content_type: String,
        parts: Vec<(std::time::Duration, Vec<u8>)>,
    },
    /// Close the connection without a word.
    Drop,
}

impl Reply {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Reply::Answer {
            status,
            content_type: content_type.to_owned(),
            headers: Vec::new(),
            body: body.into(),
        }
    }

    pub fn json(status: u16, body: &Value) -> Self {
        Self::new(status, "application/json", body.to_string())
    }

    pub fn event_stream(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "text/event-stream", body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Reply::Answer { headers, .. } = &mut self {
            headers.push((name.to_owned(), value.to_owned()));
        }
        self
    }

    /// An event stream sent part by part, each after its pause.
    pub fn paced(parts: Vec<(std::time::Duration, String)>) -> Self {
        Reply::Paced {
            content_type: "text/event-stream".to_owned(),
            parts: parts
                .into_iter()
                .map(|(p, t)| (p, t.into_bytes()))
                .collect(),
        }
    }

    fn write_to(&self, stream: &mut TcpStream) {
        if let Reply::Paced {
            content_type,
            parts,
        } = self
        {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.flush();
            for (pause, part) in parts {
                std::thread::sleep(*pause);
                if stream
                    .write_all(part)
                    .and_then(|()| stream.flush())
                    .is_err()
                {
                    return;
                }
            }
            return;
        }
        let Reply::Answer {
            status,
            content_type,
            headers,
            body,
        } = self
        else {
            return;
        };
        let extra: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let head = format!(
            "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n{extra}connection: close\r\n\r\n",
            body.len()
        );
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body);
        let _ = stream.flush();
    }
}

/// Reads one request; `None` when the client closed or sent no request.
pub fn read_request(stream: &TcpStream) -> Option<Request> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split(' ');
    let method = parts.next().filter(|m| !m.is_empty())?.to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut raw = vec![0; length];
    reader.read_exact(&mut raw).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body: serde_json::from_slice(&raw).unwrap_or(Value::Null),
        raw,
    })
}

/// A fake server on loopback. Every request it received is kept, in order.
#[derive(Clone)]
pub struct Loopback {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Request>>>,
    questions: Arc<Mutex<Vec<Request>>>,
}

/// Whether `request` is one of the questions Pincer asks an
/// OpenAI-compatible server for a model's context window
/// (`providers::openai::window`).
pub fn is_window_question(request: &Request) -> bool {
    let path = request.path.split('?').next().unwrap_or_default();
    match request.method.as_str() {
        "GET" => {
            path.ends_with("/models")
                || path == "/props"
                || path == "/api/ps"
                || path == "/api/v0/models"
        }
        "POST" => path == "/api/show",
        _ => false,
    }
}

impl Loopback {
    /// Serves each request with `handler` (given the request and its index
    /// among all received), each connection on a thread of its own, so a
    /// handler may block (a long poll, a server that hangs) without holding
    /// up the others.
    pub fn start(handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static) -> Self {
        Self::serve(handler, false)
    }

    /// A fake model server that states no context window: `handler` answers
    /// the model turns (every request but the questions Pincer asks a server
    /// for a model's window before a run's first turn), which `requests()`
    /// keeps and the index counts; the questions are answered 404, as a
    /// server without those endpoints does, and kept in `questions()`.
    /// `tests/it/context_window.rs` tests the questions themselves.
    pub fn model(handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static) -> Self {
        Self::serve(handler, true)
    }

    /// A fake model (as [`Loopback::model`]) answering every turn with the
    /// event stream `body`; [`Loopback::bodies`] gives what it was asked.
    pub fn streaming(body: String) -> Self {
        Self::model(move |_, _| Reply::event_stream(body.clone()))
    }

    /// A fake OpenAI-compatible model answering `text` to every turn.
    pub fn saying(text: &str) -> Self {
        Self::streaming(openai::text_stream(text))
    }

    fn serve(
        handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static,
        apart: bool,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Request>>> = Arc::default();
        let questions: Arc<Mutex<Vec<Request>>> = Arc::default();
        let record = seen.clone();
        let asked = questions.clone();
        let handler = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let record = record.clone();
                let asked = asked.clone();
                let handler = handler.clone();
                std::thread::spawn(move || {
                    let Some(request) = read_request(&stream) else {
                        return;
                    };
                    if apart && is_window_question(&request) {
                        asked.lock().unwrap().push(request);
                        Reply::json(404, &serde_json::json!({"error": "not found"}))
                            .write_to(&mut stream);
                        return;
                    }
                    let index = {
                        let mut seen = record.lock().unwrap();
                        seen.push(request.clone());
                        seen.len() - 1
                    };
                    handler(&request, index).write_to(&mut stream);
                });
            }
        });
        Self {
            url: format!("http://{addr}"),
            addr,
            seen,
            questions,
        }
    }

    /// The questions for a model's window a [`Loopback::model`] answered.
    pub fn questions(&self) -> Vec<Request> {
        self.questions.lock().unwrap().clone()
    }

    /// The requests received so far, in the order they came.
    pub fn requests(&self) -> Vec<Request> {
        self.seen.lock().unwrap().clone()
    }

    /// The JSON bodies of the requests received so far, in order.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// The shared list the requests are recorded in.
    pub fn seen(&self) -> Arc<Mutex<Vec<Request>>> {
        self.seen.clone()
    }
}

/// An address on loopback where nothing listens (a dead server).
pub fn dead_url() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

/// OpenAI chat completions, as the fake model servers speak them.
pub mod openai {
    use super::Reply;
    use serde_json::{Value, json};

    /// One `chat.completion.chunk` event.
    pub fn chunk(delta: Value, finish: Value) -> String {
        format!(
            "data: {}\n\n",
            json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    }

    /// A streamed answer of `text`.
    pub fn text_stream(text: &str) -> String {
        chunk(json!({"content": text}), Value::Null)
            + &chunk(json!({}), json!("stop"))
            + "data: [DONE]\n\n"
    }

    pub fn text_reply(text: &str) -> Reply {
        Reply::event_stream(text_stream(text))
    }

    /// A streamed call of tool `name`.
    pub fn tool_reply(name: &str, arguments: &Value) -> Reply {
        Reply::event_stream(
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()}}]}),
                Value::Null,
            ) + &chunk(json!({}), json!("tool_calls"))
                + "data: [DONE]\n\n",
        )
    }

    /// A message's text, whether its content is a string or parts.
    pub fn message_text(message: &Value) -> String {
        let content = &message["content"];
        if let Some(text) = content.as_str() {
            text.to_owned()
        } else if let Some(parts) = content.as_array() {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        } else {
            String::new()
        }
    }
}

/// Anthropic's Messages stream.
pub mod anthropic {
    use serde_json::{Value, json};

    /// A streamed answer of `text`: one text block, then `end_turn`.
    pub fn text_stream(text: &str) -> String {
        let event = |kind: &str, data: Value| format!("event: {kind}\ndata: {data}\n\n");
        [
            event("message_start", json!({"type": "message_start", "message": {"id": "m", "usage": {"input_tokens": 9, "output_tokens": 1}}})),
            event("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})),
            event("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})),
            event("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
            event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 4}})),
            event("message_stop", json!({"type": "message_stop"})),
        ]
        .concat()
    }
}
