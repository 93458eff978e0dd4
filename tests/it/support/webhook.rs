//! A webhook peer: the callback endpoint Pincer's webhook channel posts its
//! signed replies to (answering as a test tells it), and signed deliveries
//! into `POST /channels/NAME/webhook`, as a peer would send them.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pincer::channels::webhook::sign;
use serde_json::{Value, json};

use super::http::{Loopback, Reply};

/// The secret the tests' webhook channels share with the peer.
pub const SECRET: &str = "webhook-secret-0123456789";
const WAIT: Duration = Duration::from_secs(20);

/// What the peer does with the next outbound POST.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Answer {
    Ok,
    Status(u16),
    /// Read the request, then close without answering.
    Drop,
    /// Read the request, then never answer.
    Hold,
}

/// An outbound POST as the peer received it.
pub type Post = crate::support::http::Request;

/// The peer's callback endpoint.
#[derive(Clone)]
pub struct Peer {
    pub url: String,
    server: Loopback,
    answers: Arc<Mutex<VecDeque<Answer>>>,
    down: Arc<std::sync::atomic::AtomicBool>,
    accepted: Arc<Mutex<Vec<Value>>>,
}

impl Peer {
    pub fn start() -> Self {
        let answers: Arc<Mutex<VecDeque<Answer>>> = Arc::default();
        let down: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let accepted: Arc<Mutex<Vec<Value>>> = Arc::default();
        let next = answers.clone();
        let failing = down.clone();
        let took = accepted.clone();
        let server = Loopback::start(move |request, _| {
            let answer = if failing.load(std::sync::atomic::Ordering::SeqCst) {
                Answer::Status(502)
            } else {
                next.lock().unwrap().pop_front().unwrap_or(Answer::Ok)
            };
            if answer == Answer::Ok {
                took.lock().unwrap().push(request.body.clone());
            }
            match answer {
                Answer::Ok => Reply::json(
                    200,
                    &json!({"message_id": format!("m-{}", request.body["id"].as_str().unwrap_or(""))}),
                ),
                Answer::Status(status) => {
                    Reply::json(status, &json!({"error": "no"})).header("retry-after", "1")
                }
                Answer::Drop => Reply::Drop,
                Answer::Hold => {
                    std::thread::sleep(Duration::from_secs(3600));
                    Reply::Drop
                }
            }
        });
        Self {
            url: format!("{}/callback", server.url),
            server,
            answers,
            down,
            accepted,
        }
    }

    /// The bodies of the POSTs answered 200, in order.
    pub fn accepted(&self) -> Vec<Value> {
        self.accepted.lock().unwrap().clone()
    }

    /// Every POST fails with 502 until [`Peer::up`], as with the peer down.
    pub fn down(&self) {
        self.down.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn up(&self) {
        self.down.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    pub fn then(&self, answers: &[Answer]) {
        self.answers.lock().unwrap().extend(answers.iter().copied());
    }

    pub fn posts(&self) -> Vec<Post> {
        self.server.requests()
    }

    pub fn wait_for(&self, what: &str, check: impl Fn(&[Post]) -> bool) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if check(&self.posts()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("timed out waiting for {what}; posts: {:#?}", self.posts());
    }
}

/// POSTs `body` to the listener, signed unless told otherwise; (status, JSON).
pub fn deliver(
    url: &str,
    delivery: Option<&str>,
    body: &Value,
    secret: &str,
    age_secs: i64,
) -> (u16, Value) {
    let raw = body.to_string();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let timestamp = now - age_secs;
    let signature = sign(secret.as_bytes(), timestamp, raw.as_bytes());
    let rest = url.trim_start_matches("http://");
    let (address, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = TcpStream::connect(address).unwrap();
    let mut head = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-pincer-timestamp: {timestamp}\r\nx-pincer-signature: {signature}\r\nconnection: close\r\n",
        raw.len()
    );
    if let Some(delivery) = delivery {
        head.push_str(&format!("x-pincer-delivery: {delivery}\r\n"));
    }
    write!(stream, "{head}\r\n{raw}").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status: u16 = response.split(' ').nth(1).unwrap().parse().unwrap();
    let body = response.split("\r\n\r\n").nth(1).unwrap_or("");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}
