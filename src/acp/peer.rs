//! A bidirectional JSON-RPC 2.0 peer over newline-delimited JSON.
//!
//! Both sides send requests: the client's come in through [`read_messages`] and
//! are answered with [`Peer::respond`]; ours go out with [`Peer::request`] and
//! their responses are routed back through a pending-id map. Everything written
//! goes through the protocol writer ([`crate::stdout`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use agent_client_protocol_schema::v1::Error as RpcError;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::stdout::LineSender;

/// A JSON-RPC request id: a number or a string, kept as the client sent it.
pub type Id = Value;

/// The writing half of the connection, shared by every task.
pub struct Peer {
    out: LineSender,
    next_id: AtomicI64,
    /// Our requests awaiting the client's response, by id.
    pending: Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>,
}

#[derive(Serialize)]
struct OutResponse<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a RpcError>,
}

#[derive(Serialize)]
struct OutMessage<'a, P: Serialize> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<i64>,
    method: &'a str,
    params: &'a P,
}

impl Peer {
    pub fn new(out: LineSender) -> Self {
        Self {
            out,
            next_id: AtomicI64::new(0),
            pending: Mutex::new(HashMap::new()),
        }
    }

    async fn write<T: Serialize>(&self, message: &T) -> bool {
        match serde_json::to_vec(message) {
            Ok(mut line) => {
                line.push(b'\n');
                self.out.send(line).await
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot serialize an outgoing message");
                false
            }
        }
    }

    /// Answers a client request.
    pub async fn respond(&self, id: &Id, result: Result<Value, RpcError>) -> bool {
        let message = match &result {
            Ok(value) => OutResponse {
                jsonrpc: "2.0",
                id,
                result: Some(value),
                error: None,
            },
            Err(error) => OutResponse {
                jsonrpc: "2.0",
                id,
                result: None,
                error: Some(error),
            },
        };
        self.write(&message).await
    }

    pub async fn notify<P: Serialize>(&self, method: &str, params: &P) -> bool {
        self.write(&OutMessage {
            jsonrpc: "2.0",
            id: None,
            method,
            params,
        })
        .await
    }

    /// Sends a request to the client and waits for its response. If `cancel`
    /// fires first, the client is sent `$/cancel_request` and the call fails
    /// with the request-cancelled error.
    pub async fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(id, tx);
        let sent = self
            .write(&OutMessage {
                jsonrpc: "2.0",
                id: Some(id),
                method,
                params,
            })
            .await;
        if !sent {
            lock(&self.pending).remove(&id);
            return Err(RpcError::internal_error().data("the client connection is closed"));
        }
        tokio::select! {
            response = rx => response.unwrap_or_else(|_| {
                Err(RpcError::internal_error().data("the client connection closed before answering"))
            }),
            _ = cancel.cancelled() => {
                lock(&self.pending).remove(&id);
                self.notify("$/cancel_request", &serde_json::json!({ "requestId": id })).await;
                Err(RpcError::request_cancelled())
            }
        }
    }

    /// Routes a response from the client to the request that awaits it.
    fn resolve(&self, id: &Value, result: Result<Value, RpcError>) {
        let Some(id) = id.as_i64() else {
            tracing::warn!(?id, "response with an id we never sent");
            return;
        };
        match lock(&self.pending).remove(&id) {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::warn!(id, "response to an unknown or cancelled request"),
        }
    }

    /// Fails every request still waiting on the client (the connection closed).
    pub fn fail_pending(&self) {
        lock(&self.pending).clear();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One message from the client, classified.
#[derive(Debug)]
pub enum Incoming {
    Request {
        id: Id,
        method: String,
        params: Option<Box<RawValue>>,
    },
    Notification {
        method: String,
        params: Option<Box<RawValue>>,
    },
    /// A line that is not a valid message; answer with this error (id may be null).
    Invalid { id: Id, error: RpcError },
}

/// The envelope as parsed before classification; unknown members are ignored.
#[derive(serde::Deserialize)]
struct Envelope {
    jsonrpc: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Box<RawValue>>,
    /// Present even when `null`: a method may answer nothing.
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Value>,
}

/// Distinguishes a member given as `null` (present) from a missing one.
fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    <Value as serde::Deserialize>::deserialize(deserializer).map(Some)
}

/// Classifies one line. Responses to our own requests are routed to `peer` and
/// yield `None`.
pub fn classify(peer: &Peer, line: &[u8]) -> Option<Incoming> {
    let invalid = |id: Value, message: &str| {
        Some(Incoming::Invalid {
            id,
            error: RpcError::invalid_request().data(message.to_owned()),
        })
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(value) => value,
        Err(err) => {
            return Some(Incoming::Invalid {
                id: Value::Null,
                error: RpcError::parse_error().data(format!("not valid JSON: {err}")),
            });
        }
    };
    if value.is_array() {
        return invalid(Value::Null, "batch requests are not supported");
    }
    if !value.is_object() {
        return invalid(Value::Null, "a message must be a JSON object");
    }
    let envelope: Envelope = match serde_json::from_value(value) {
        Ok(envelope) => envelope,
        Err(err) => return invalid(Value::Null, &format!("malformed message: {err}")),
    };
    let id = envelope.id.clone();
    let reply_id = match &id {
        Some(v @ (Value::Number(_) | Value::String(_))) => v.clone(),
        _ => Value::Null,
    };
    // A response is never answered, even one with a wrong version: the
    // client would answer the error in turn, and our request would hang.
    let response =
        envelope.method.is_none() && (envelope.result.is_some() || envelope.error.is_some());
    if !response && envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid(reply_id, "\"jsonrpc\" must be \"2.0\"");
    }
    if let Some(Value::Null | Value::Bool(_) | Value::Array(_) | Value::Object(_)) = &id
        && envelope.method.is_some()
    {
        return invalid(Value::Null, "\"id\" must be a string or a number");
    }
    // A number serde keeps as a float (a fraction, an exponent, past 64
    // bits) would be echoed in another form, so the client could not match
    // the response to its request.
    if let Some(Value::Number(number)) = &id
        && number.is_f64()
        && envelope.method.is_some()
    {
        return invalid(
            Value::Null,
            "\"id\" must be a string or an integer that fits in 64 bits",
        );
    }
    match (envelope.method, id) {
        (Some(Value::String(method)), Some(id)) => Some(Incoming::Request {
            id,
            method,
            params: envelope.params,
        }),
        (Some(Value::String(method)), None) => Some(Incoming::Notification {
            method,
            params: envelope.params,
        }),
        (Some(_), _) => invalid(reply_id, "\"method\" must be a string"),
        (None, Some(id)) => {
            if let Some(error) = envelope.error {
                let error = serde_json::from_value::<RpcError>(error).unwrap_or_else(|err| {
                    RpcError::internal_error().data(format!("malformed error from client: {err}"))
                });
                peer.resolve(&id, Err(error));
                None
            } else if let Some(result) = envelope.result {
                peer.resolve(&id, Ok(result));
                None
            } else {
                invalid(
                    reply_id,
                    "a message needs \"method\", \"result\" or \"error\"",
                )
            }
        }
        (None, None) if response => {
            tracing::warn!("a response without an id");
            None
        }
        (None, None) => invalid(
            Value::Null,
            "a message needs \"method\", \"result\" or \"error\"",
        ),
    }
}

/// What reading one line produced.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Message(Vec<u8>),
    /// The line was longer than the limit and was skipped.
    TooLong(usize),
    End,
}

/// Reads newline-delimited lines, skipping (not buffering) any line longer than
/// `limit`: a 64 MiB line costs `limit` bytes of memory, not 64 MiB.
pub struct LineReader<R> {
    reader: R,
    limit: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> LineReader<R> {
    pub fn new(reader: R, limit: usize) -> Self {
        Self {
            reader,
            limit,
            buf: Vec::new(),
        }
    }

    pub async fn next_line(&mut self) -> std::io::Result<Line> {
        self.buf.clear();
        let mut skipped: Option<usize> = None;
        loop {
            let chunk = self.reader.fill_buf().await?;
            if chunk.is_empty() {
                return Ok(match skipped {
                    Some(total) => Line::TooLong(total),
                    None if self.buf.is_empty() => Line::End,
                    None => Line::Message(std::mem::take(&mut self.buf)),
                });
            }
            let (take, done) = match memchr(chunk) {
                Some(pos) => (pos + 1, true),
                None => (chunk.len(), false),
            };
            match &mut skipped {
                Some(total) => *total += take,
                None if self.buf.len() + take > self.limit + 1 => {
                    skipped = Some(self.buf.len() + take);
                    self.buf.clear();
                }
                None => self.buf.extend_from_slice(&chunk[..take]),
            }
            self.reader.consume(take);
            if done {
                return Ok(match skipped {
                    Some(total) => Line::TooLong(total),
                    None => {
                        if self.buf.last() == Some(&b'\n') {
                            self.buf.pop();
                        }
                        if self.buf.last() == Some(&b'\r') {
                            self.buf.pop();
                        }
                        Line::Message(std::mem::take(&mut self.buf))
                    }
                });
            }
        }
    }
}

fn memchr(haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|b| *b == b'\n')
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], limit: usize) -> Vec<Line> {
        let mut reader = LineReader::new(tokio::io::BufReader::with_capacity(8, input), limit);
        let mut out = Vec::new();
        loop {
            let line = reader.next_line().await.unwrap();
            let end = line == Line::End;
            out.push(line);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn long_lines_are_skipped_and_reading_goes_on() {
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100));
        input.extend(b"\n{\"b\":2}\r\nlast");
        assert_eq!(
            lines(&input, 20).await,
            vec![
                Line::Message(b"{\"a\":1}".to_vec()),
                Line::TooLong(101),
                Line::Message(b"{\"b\":2}".to_vec()),
                Line::Message(b"last".to_vec()),
                Line::End,
            ]
        );
    }

    fn peer() -> Peer {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        Peer::new(LineSender::for_tests(tx))
    }

    fn error_of(incoming: Option<Incoming>) -> (Value, i32) {
        match incoming {
            Some(Incoming::Invalid { id, error }) => (id, i32::from(error.code)),
            other => panic!("expected an invalid message, got {other:?}"),
        }
    }

    #[test]
    fn classifies_the_malformed_cases() {
        let p = peer();
        assert_eq!(error_of(classify(&p, b"{nope")), (Value::Null, -32700));
        assert_eq!(error_of(classify(&p, b"[1,2]")), (Value::Null, -32600));
        assert_eq!(error_of(classify(&p, b"42")), (Value::Null, -32600));
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#)),
            (Value::from(3), -32600)
        );
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)),
            (Value::Null, -32600)
        );
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"2.0","id":"a","method":7}"#)),
            (Value::from("a"), -32600)
        );
        assert!(matches!(
            classify(
                &p,
                br#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#
            ),
            Some(Incoming::Notification { .. })
        ));
        assert!(matches!(
            classify(&p, br#"{"jsonrpc":"2.0","id":"r1","method":"initialize"}"#),
            Some(Incoming::Request { .. })
        ));
    }

    /// Found by fuzzing (`acp_classify`): an id past 64 bits was echoed as
    /// a float (`1.8446744073719103e+19`), which the client cannot match.
    #[test]
    fn ids_that_cannot_be_echoed_exactly_are_refused() {
        let p = peer();
        for id in ["18446744073719103230", "1e2", "1.5", "-0.0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            assert_eq!(
                error_of(classify(&p, line.as_bytes())),
                (Value::Null, -32600),
                "{id}"
            );
        }
        for id in ["18446744073709551615", "-9223372036854775808", "0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            let Some(Incoming::Request { id: echoed, .. }) = classify(&p, line.as_bytes()) else {
                panic!("{id} refused")
            };
            assert_eq!(echoed.to_string(), id);
        }
    }

    /// Found by fuzzing (`acp_classify`): a `null` result read as no result,
    /// and a response with a wrong or missing version, were answered with an
    /// error instead of being routed.
    #[tokio::test]
    async fn responses_are_routed_never_answered() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::for_tests(tx)));
        let never = CancellationToken::new();
        let ask = |peer: std::sync::Arc<Peer>| {
            let never = never.clone();
            tokio::spawn(async move {
                peer.request("fs/write_text_file", &serde_json::json!({}), &never)
                    .await
            })
        };
        let null_result = ask(peer.clone());
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        let reply = serde_json::json!({"jsonrpc": "2.0", "id": sent["id"], "result": null});
        assert!(classify(&peer, reply.to_string().as_bytes()).is_none());
        assert_eq!(null_result.await.unwrap().unwrap(), Value::Null);

        let no_version = ask(peer.clone());
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        let reply = serde_json::json!({"id": sent["id"], "result": {}});
        assert!(classify(&peer, reply.to_string().as_bytes()).is_none());
        assert_eq!(no_version.await.unwrap().unwrap(), serde_json::json!({}));

        for line in [
            r#"{"jsonrpc":"1.0","id":3,"error":{"code":-32002,"message":"gone"}}"#,
            r#"{"id":"x","result":null}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":null}"#,
        ] {
            assert!(classify(&peer, line.as_bytes()).is_none(), "{line}");
        }
    }

    #[tokio::test]
    async fn our_requests_get_their_responses_and_can_be_cancelled() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::for_tests(tx)));
        let never = CancellationToken::new();
        // Two requests in flight at once, answered out of order.
        let first = {
            let peer = peer.clone();
            let never = never.clone();
            tokio::spawn(async move {
                peer.request(
                    "fs/read_text_file",
                    &serde_json::json!({"path": "/a"}),
                    &never,
                )
                .await
            })
        };
        let line_a: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        let second = {
            let peer = peer.clone();
            let never = never.clone();
            tokio::spawn(async move {
                peer.request(
                    "fs/read_text_file",
                    &serde_json::json!({"path": "/b"}),
                    &never,
                )
                .await
            })
        };
        let line_b: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(line_a["method"], "fs/read_text_file");
        assert_ne!(line_a["id"], line_b["id"]);
        let reply_b =
            serde_json::json!({"jsonrpc": "2.0", "id": line_b["id"], "result": {"content": "B"}});
        assert!(classify(&peer, reply_b.to_string().as_bytes()).is_none());
        let reply_a = serde_json::json!({"jsonrpc": "2.0", "id": line_a["id"], "error": {"code": -32002, "message": "gone"}});
        assert!(classify(&peer, reply_a.to_string().as_bytes()).is_none());
        assert_eq!(
            second.await.unwrap().unwrap(),
            serde_json::json!({"content": "B"})
        );
        assert_eq!(first.await.unwrap().unwrap_err().message, "gone");

        // Cancelling sends `$/cancel_request` and fails the call with -32800.
        let cancel = CancellationToken::new();
        let pending = {
            let peer = peer.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                peer.request(
                    "session/request_permission",
                    &serde_json::json!({}),
                    &cancel,
                )
                .await
            })
        };
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        cancel.cancel();
        let err = pending.await.unwrap().unwrap_err();
        assert_eq!(i32::from(err.code), -32800);
        let notice: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(notice["method"], "$/cancel_request");
        assert_eq!(notice["params"]["requestId"], sent["id"]);
        // A late response to the cancelled request is ignored.
        let late = serde_json::json!({"jsonrpc": "2.0", "id": sent["id"], "result": {}});
        assert!(classify(&peer, late.to_string().as_bytes()).is_none());
    }
}
