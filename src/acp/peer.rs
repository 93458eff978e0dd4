//! A bidirectional JSON-RPC 2.0 peer over newline-delimited JSON.
//!
//! Both sides send requests: the client's come in through [`classify`] and
//! are answered with [`Peer::respond`]; ours go out with [`Peer::request`] and
//! their responses are routed back through a pending-id map. Everything written
//! goes through the protocol writer ([`crate::stdout`]).

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use agent_client_protocol_schema::v1::Error as RpcError;
use agent_client_protocol_schema::v1::RequestId;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::core::quote::{MESSAGE_BYTES, clip_message, quote};
use crate::stdout::LineSender;

/// A JSON-RPC request id as the client wrote it: answered with exactly that
/// text (a 30-digit number is not turned into a float), compared by value.
/// Only ids ACP allows get this far: an int64, a string or null.
#[derive(Debug, Clone)]
pub struct Id {
    /// The id's JSON text, echoed byte for byte.
    raw: Box<RawValue>,
    /// Its value, for matching `$/cancel_request` and duplicate ids.
    key: RequestId,
}

impl Id {
    /// `null`, the id of an answer to a message whose id could not be read.
    pub fn null() -> Self {
        Self::from_key(RequestId::Null)
    }

    fn from_key(key: RequestId) -> Self {
        let text = match &key {
            RequestId::Null => "null".to_owned(),
            RequestId::Number(n) => n.to_string(),
            RequestId::Str(s) => serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned()),
        };
        let raw = RawValue::from_string(text).unwrap_or_else(|_| RawValue::NULL.to_owned());
        Self { raw, key }
    }

    /// Reads an id: `None` unless it is an int64, a string or null.
    pub fn parse(raw: &RawValue) -> Option<Self> {
        let text = raw.get();
        let key = match text.as_bytes().first()? {
            b'"' => RequestId::Str(serde_json::from_str(text).ok()?),
            b'n' if text == "null" => RequestId::Null,
            b'-' | b'0'..=b'9' => {
                let digits = text.strip_prefix('-').unwrap_or(text);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                RequestId::Number(text.parse().ok()?)
            }
            _ => return None,
        };
        Some(Self {
            raw: raw.to_owned(),
            key,
        })
    }

    /// The id's value.
    pub fn key(&self) -> &RequestId {
        &self.key
    }

    /// The id's JSON text as received.
    pub fn raw(&self) -> &str {
        self.raw.get()
    }
}

impl PartialEq for Id {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Serialize for Id {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", quote(self.raw.get()))
    }
}

/// The writing half of the connection, shared by every task.
pub struct Peer {
    out: LineSender,
    next_id: AtomicI64,
    /// Our requests awaiting the client's response, by id.
    pending: Mutex<HashMap<i64, oneshot::Sender<Result<Value, RpcError>>>>,
    /// Fired when the connection shuts down: requests still waiting fail at
    /// once and new ones are not sent, so no client can hold the shutdown.
    closed: CancellationToken,
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

/// An error as it goes on the wire: every text in it over
/// [`MESSAGE_BYTES`] clipped, whatever built it. A backstop: errors quote
/// outside values through `quote` already, and clipping those again would
/// lose their length.
pub fn clipped(mut error: RpcError) -> RpcError {
    #[allow(
        clippy::wildcard_enum_match_arm,
        reason = "serde_json's Value: only strings, arrays and objects hold text"
    )]
    fn clip(value: &mut Value) {
        match value {
            Value::String(text) if text.len() > MESSAGE_BYTES => *text = clip_message(text),
            Value::Array(items) => items.iter_mut().for_each(clip),
            Value::Object(members) => members.values_mut().for_each(clip),
            _ => {}
        }
    }
    if error.message.len() > MESSAGE_BYTES {
        error.message = clip_message(&error.message);
    }
    if let Some(data) = &mut error.data {
        clip(data);
    }
    error
}

/// One of our requests while it waits: dropped before its answer (the task
/// awaiting it was dropped), it leaves the pending map and the client is told
/// with `$/cancel_request`.
struct Waiting<'a> {
    peer: &'a Peer,
    id: i64,
    settled: bool,
}

impl Waiting<'_> {
    /// Withdraws the request: the client learns before this returns.
    async fn withdraw(&mut self) {
        self.settled = true;
        self.peer.pending.lock().remove(&self.id);
        if !self.peer.closed.is_cancelled() {
            self.peer
                .notify(
                    "$/cancel_request",
                    &serde_json::json!({ "requestId": self.id }),
                )
                .await;
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.peer.pending.lock().remove(&self.id);
        if self.peer.closed.is_cancelled() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let line = serde_json::to_vec(&OutMessage {
            jsonrpc: "2.0",
            id: None,
            method: "$/cancel_request",
            params: &serde_json::json!({ "requestId": self.id }),
        });
        if let Ok(mut line) = line {
            line.push(b'\n');
            let out = self.peer.out.clone();
            runtime.spawn(async move { out.send(line).await });
        }
    }
}

impl Peer {
    pub fn new(out: LineSender) -> Self {
        Self {
            out,
            next_id: AtomicI64::new(0),
            pending: Mutex::new(HashMap::new()),
            closed: CancellationToken::new(),
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

    /// Answers a client request, with the id exactly as it came.
    pub async fn respond(&self, id: &Id, result: Result<Value, RpcError>) -> bool {
        let message = match result {
            Ok(value) => {
                return self
                    .write(&OutResponse {
                        jsonrpc: "2.0",
                        id,
                        result: Some(&value),
                        error: None,
                    })
                    .await;
            }
            Err(error) => clipped(error),
        };
        self.write(&OutResponse {
            jsonrpc: "2.0",
            id,
            result: None,
            error: Some(&message),
        })
        .await
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
    /// with the request-cancelled error. Fails at once when the connection is
    /// shutting down.
    pub async fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
    ) -> Result<Value, RpcError> {
        self.request_within(method, params, cancel, None).await
    }

    /// Like [`Peer::request`], giving up after `limit` (the request is
    /// withdrawn with `$/cancel_request` then too).
    pub async fn request_within<P: Serialize>(
        &self,
        method: &str,
        params: &P,
        cancel: &CancellationToken,
        limit: Option<Duration>,
    ) -> Result<Value, RpcError> {
        if self.closed.is_cancelled() {
            return Err(closing());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().insert(id, tx);
        let mut waiting = Waiting {
            peer: self,
            id,
            settled: false,
        };
        let sent = self
            .write(&OutMessage {
                jsonrpc: "2.0",
                id: Some(id),
                method,
                params,
            })
            .await;
        if !sent {
            waiting.settled = true;
            self.pending.lock().remove(&id);
            return Err(RpcError::internal_error().data("the client connection is closed"));
        }
        let expired = async {
            match limit {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            response = rx => {
                waiting.settled = true;
                response.unwrap_or_else(|_| Err(closing()))
            }
            _ = cancel.cancelled() => {
                waiting.withdraw().await;
                Err(RpcError::request_cancelled())
            }
            _ = expired => {
                waiting.withdraw().await;
                let limit = limit.unwrap_or_default();
                Err(RpcError::internal_error().data(format!(
                    "the client did not answer {method} within {} ms",
                    limit.as_millis()
                )))
            }
            _ = self.closed.cancelled() => {
                waiting.settled = true;
                Err(closing())
            }
        }
    }

    /// Routes a response from the client to the request that awaits it.
    fn resolve(&self, id: &Id, result: Result<Value, RpcError>) {
        let RequestId::Number(number) = id.key() else {
            tracing::warn!(id = %id, "response with an id we never sent");
            return;
        };
        match self.pending.lock().remove(number) {
            Some(tx) => {
                let _ = tx.send(result);
            }
            None => tracing::warn!(id = number, "response to an unknown or cancelled request"),
        }
    }

    /// Ends the connection's requests: those waiting fail now, later ones are
    /// not sent.
    pub fn close(&self) {
        self.closed.cancel();
        self.pending.lock().clear();
    }

    /// How many of our requests wait for the client.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.pending.lock().len()
    }
}

fn closing() -> RpcError {
    RpcError::internal_error().data("the client connection closed before answering")
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
    id: Option<Box<RawValue>>,
    method: Option<Value>,
    params: Option<Box<RawValue>>,
    /// Present even when `null`: a null result is a result.
    #[serde(default, deserialize_with = "present")]
    result: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Box<RawValue>>,
}

/// Distinguishes a member that is `null` (present) from one that is missing.
fn present<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Box<RawValue>>, D::Error> {
    <Box<RawValue> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

/// Classifies one line. Responses to our own requests are routed to `peer` and
/// yield `None`: a response is never answered, whatever its shape.
pub fn classify(peer: &Peer, line: &[u8]) -> Option<Incoming> {
    let invalid = |id: Id, message: &str| {
        Some(Incoming::Invalid {
            id,
            error: RpcError::invalid_request().data(clip_message(message)),
        })
    };
    let raw: &RawValue = match serde_json::from_slice(line) {
        Ok(raw) => raw,
        Err(err) => {
            return Some(Incoming::Invalid {
                id: Id::null(),
                error: RpcError::parse_error()
                    .data(clip_message(&format!("not valid JSON: {err}"))),
            });
        }
    };
    match raw.get().as_bytes().first() {
        Some(b'[') => return invalid(Id::null(), "batch requests are not supported"),
        Some(b'{') => {}
        _ => return invalid(Id::null(), "a message must be a JSON object"),
    }
    let envelope: Envelope = match serde_json::from_str(raw.get()) {
        Ok(envelope) => envelope,
        Err(err) => return invalid(Id::null(), &format!("malformed message: {err}")),
    };
    let id = envelope.id.as_deref().map(Id::parse);
    if envelope.method.is_none() {
        if let Some(id) = &id {
            // A response: routed to the request it answers, never answered.
            return respond_to_peer(peer, id.as_ref(), envelope.result, envelope.error);
        }
        if envelope.result.is_some() || envelope.error.is_some() {
            // A response without an id answers nothing we asked; answering
            // it would only start an exchange of errors.
            tracing::warn!("a response without an id; ignoring it");
            return None;
        }
        return invalid(
            Id::null(),
            "a message needs \"method\", \"result\" or \"error\"",
        );
    }
    let id = match id {
        None => None,
        Some(Some(id)) => Some(id),
        Some(None) => {
            return invalid(
                Id::null(),
                "\"id\" must be a string, an integer in the int64 range, or null",
            );
        }
    };
    let reply_id = id.clone().unwrap_or_else(Id::null);
    if envelope.jsonrpc.as_ref().and_then(Value::as_str) != Some("2.0") {
        return invalid(reply_id, "\"jsonrpc\" must be \"2.0\"");
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
        (_, _) => invalid(reply_id, "\"method\" must be a string"),
    }
}

/// Hands a response to the request of ours it answers. A response whose id we
/// cannot read, or that has neither `result` nor `error`, is logged; the
/// request it might answer fails rather than waiting on.
fn respond_to_peer(
    peer: &Peer,
    id: Option<&Id>,
    result: Option<Box<RawValue>>,
    error: Option<Box<RawValue>>,
) -> Option<Incoming> {
    let Some(id) = id else {
        tracing::warn!("response with an id that is not a JSON-RPC id; ignoring it");
        return None;
    };
    // `"error": null` beside a result is how some clients say "no error".
    let error = error.filter(|error| error.get() != "null");
    let outcome = match (error, result) {
        (Some(error), _) => Err(serde_json::from_str::<RpcError>(error.get())
            .map(clipped)
            .unwrap_or_else(|err| {
                RpcError::internal_error().data(clip_message(&format!(
                    "malformed error from the client: {err}"
                )))
            })),
        (None, Some(result)) => serde_json::from_str::<Value>(result.get()).map_err(|err| {
            RpcError::internal_error().data(clip_message(&format!(
                "malformed result from the client: {err}"
            )))
        }),
        (None, None) => Err(RpcError::internal_error()
            .data("the client's response has neither \"result\" nor \"error\"")),
    };
    peer.resolve(id, outcome);
    None
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
        Peer::new(LineSender::channel(tx))
    }

    fn error_of(incoming: Option<Incoming>) -> (String, i32) {
        match incoming {
            Some(Incoming::Invalid { id, error }) => (id.raw().to_owned(), i32::from(error.code)),
            other => panic!("expected an invalid message, got {other:?}"),
        }
    }

    #[test]
    fn classifies_the_malformed_cases() {
        let p = peer();
        assert_eq!(error_of(classify(&p, b"{nope")), ("null".into(), -32700));
        assert_eq!(error_of(classify(&p, b"[1,2]")), ("null".into(), -32600));
        assert_eq!(error_of(classify(&p, b"42")), ("null".into(), -32600));
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#)),
            ("3".into(), -32600)
        );
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#)),
            ("null".into(), -32600)
        );
        assert_eq!(
            error_of(classify(&p, br#"{"jsonrpc":"2.0","id":"a","method":7}"#)),
            ("\"a\"".into(), -32600)
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

    fn request_id(line: &str) -> Result<String, (String, i32)> {
        match classify(&peer(), line.as_bytes()) {
            Some(Incoming::Request { id, .. }) => Ok(id.raw().to_owned()),
            other => Err(error_of(other)),
        }
    }

    #[test]
    fn ids_are_echoed_as_written_or_refused() {
        for id in [
            "0",
            "-0",
            "9223372036854775807",
            "-9223372036854775808",
            "\"\"",
            "\"\\u0041b\"",
            "null",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            assert_eq!(request_id(&line), Ok(id.to_owned()), "{line}");
        }
        for id in [
            "123456789012345678901234567890",
            "9223372036854775808",
            "-9223372036854775809",
            "1.0",
            "1e3",
            "-1.5",
            "true",
            "[1]",
            "{\"a\":1}",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"x"}}"#);
            assert_eq!(request_id(&line), Err(("null".into(), -32600)), "{line}");
        }
    }

    #[test]
    fn ids_compare_by_value() {
        let a = Id::parse(&RawValue::from_string("\"\\u0041\"".into()).unwrap()).unwrap();
        let b = Id::parse(&RawValue::from_string("\"A\"".into()).unwrap()).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.key(), &RequestId::Str("A".into()));
    }

    #[test]
    fn errors_are_clipped_on_the_wire() {
        let long = "v".repeat(1_000_000);
        let error = clipped(
            RpcError::new(-32602, format!("invalid type: string \"{long}\""))
                .data(serde_json::json!({ "sessionId": long })),
        );
        assert!(error.message.len() < 300, "{}", error.message.len());
        assert!(
            error.message.ends_with("… (1000000 bytes)\""),
            "{}",
            error.message
        );
        let data = error.data.unwrap().to_string();
        assert!(data.len() < 1200, "{}", data.len());
    }

    /// A `null` result answers the request (JSON-RPC allows it); neither a
    /// response nor a malformed one is ever answered.
    #[tokio::test]
    async fn any_response_shape_settles_its_request_and_gets_no_answer() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::channel(tx)));
        for (reply, expected) in [
            (r#""result":null"#, Ok(Value::Null)),
            (r#""result":{},"error":null"#, Ok(serde_json::json!({}))),
            (r#""error":{"code":-32000,"message":"no"}"#, Err(-32000)),
            (r#""error":"oops""#, Err(-32603)),
            (r#""nothing":1"#, Err(-32603)),
        ] {
            let task = {
                let peer = peer.clone();
                tokio::spawn(async move {
                    peer.request(
                        "fs/write_text_file",
                        &serde_json::json!({}),
                        &CancellationToken::new(),
                    )
                    .await
                })
            };
            let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
            let line = format!(r#"{{"jsonrpc":"2.0","id":{},{reply}}}"#, sent["id"]);
            assert!(classify(&peer, line.as_bytes()).is_none(), "{line}");
            let got = task.await.unwrap().map_err(|e| i32::from(e.code));
            assert_eq!(got, expected, "{line}");
        }
        // Responses with ids we never sent, or no id we can read, are dropped.
        for line in [
            r#"{"jsonrpc":"2.0","id":99,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"result":null}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}"#,
            // Found by fuzzing (`acp_classify`): a response with no id at
            // all, or a wrong version, is not answered either.
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"error":{"code":1,"message":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":98,"result":null}"#,
        ] {
            assert!(classify(&peer, line.as_bytes()).is_none(), "{line}");
        }
        assert!(rx.try_recv().is_err());
        assert_eq!(peer.waiting(), 0);
    }

    #[tokio::test]
    async fn a_request_gives_up_after_its_limit_and_is_withdrawn() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::channel(tx)));
        let task = {
            let peer = peer.clone();
            tokio::spawn(async move {
                peer.request_within(
                    "fs/read_text_file",
                    &serde_json::json!({}),
                    &CancellationToken::new(),
                    Some(Duration::from_millis(20)),
                )
                .await
            })
        };
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(i32::from(err.code), -32603);
        let notice: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(notice["method"], "$/cancel_request");
        assert_eq!(notice["params"]["requestId"], sent["id"]);
        assert_eq!(peer.waiting(), 0);
    }

    #[tokio::test]
    async fn a_dropped_request_is_withdrawn_and_closing_fails_the_rest() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::channel(tx)));
        let task = {
            let peer = peer.clone();
            tokio::spawn(async move {
                peer.request(
                    "fs/read_text_file",
                    &serde_json::json!({}),
                    &CancellationToken::new(),
                )
                .await
            })
        };
        let sent: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        task.abort();
        let notice: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(notice["method"], "$/cancel_request");
        assert_eq!(notice["params"]["requestId"], sent["id"]);
        assert_eq!(peer.waiting(), 0);

        let task = {
            let peer = peer.clone();
            tokio::spawn(async move {
                peer.request(
                    "fs/read_text_file",
                    &serde_json::json!({}),
                    &CancellationToken::new(),
                )
                .await
            })
        };
        rx.recv().await.unwrap();
        peer.close();
        assert!(task.await.unwrap().is_err());
        // Once closed, nothing more is sent.
        let after = peer
            .request(
                "fs/read_text_file",
                &serde_json::json!({}),
                &CancellationToken::new(),
            )
            .await;
        assert!(after.is_err());
        assert!(rx.try_recv().is_err());
    }

    #[tokio::test]
    async fn our_requests_get_their_responses_and_can_be_cancelled() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(LineSender::channel(tx)));
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
