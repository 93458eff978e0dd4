//! A loopback HTTP server for provider tests: it records every request and
//! answers each with the next scripted response — a status, headers, and a body
//! sent in timed chunks (an SSE stream), optionally cut mid-stream.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct FixtureResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Body pieces, each sent after its delay.
    pub chunks: Vec<(Duration, Vec<u8>)>,
    /// Close the connection after the chunks without ending the body properly.
    pub cut: bool,
    /// Wait this long before sending anything (a slow first byte).
    pub first_byte_delay: Duration,
}

impl FixtureResponse {
    /// A `200 text/event-stream` answer sending `events` (each a full SSE event
    /// text such as `"data: {...}\n\n"`) one chunk each, without delays.
    pub fn sse<S: AsRef<str>>(events: &[S]) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: events
                .iter()
                .map(|e| (Duration::ZERO, e.as_ref().as_bytes().to_vec()))
                .collect(),
            cut: false,
            first_byte_delay: Duration::ZERO,
        }
    }

    /// A JSON error answer with `status`.
    pub fn error(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![(Duration::ZERO, body.as_bytes().to_vec())],
            cut: false,
            first_byte_delay: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The running server; stops when dropped.
pub struct FixtureServer {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<RecordedRequest>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FixtureServer {
    /// Serves `responses` in order, one per request; requests beyond them get 500.
    pub async fn start(responses: Vec<FixtureResponse>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(responses)));
        let recorded = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let recorded = recorded.clone();
                let queue = queue.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, recorded, queue).await;
                });
            }
        });
        Ok(Self {
            base_url,
            requests,
            task,
        })
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.requests.lock().clone()
    }
}

async fn serve(
    mut stream: tokio::net::TcpStream,
    recorded: Arc<Mutex<Vec<RecordedRequest>>>,
    queue: Arc<Mutex<std::collections::VecDeque<FixtureResponse>>>,
) -> std::io::Result<()> {
    // One request per connection is enough for a test; keep-alive is refused
    // by `connection: close`.
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < header_end + length {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buf[header_end..]).unwrap_or(serde_json::Value::Null);
    recorded.lock().push(RecordedRequest {
        method,
        path,
        headers,
        body,
    });
    let response = queue
        .lock()
        .pop_front()
        .unwrap_or_else(|| FixtureResponse::error(500, r#"{"error":"no more fixtures"}"#));
    tokio::time::sleep(response.first_byte_delay).await;
    let mut head = format!("HTTP/1.1 {} X\r\nconnection: close\r\n", response.status);
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    // No content-length: the body ends when the connection closes, so a cut
    // stream looks exactly like a server that died mid-answer.
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).await?;
    for (delay, bytes) in &response.chunks {
        tokio::time::sleep(*delay).await;
        stream.write_all(bytes).await?;
        stream.flush().await?;
    }
    if response.cut {
        // An abrupt reset rather than a clean end of body. A zero linger sends
        // the reset at once; the deprecation is about non-zero lingers blocking.
        #[allow(deprecated)]
        let _ = stream.set_linger(Some(Duration::ZERO));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_requests_and_replays_responses_in_order() {
        let server = FixtureServer::start(vec![
            FixtureResponse::sse(&["data: one\n\n", "data: two\n\n"]),
            FixtureResponse::error(429, "{}").header("retry-after", "2"),
        ])
        .await
        .unwrap();
        let client = crate::net::http_client(Duration::from_secs(5)).unwrap();
        let first = client
            .post(format!("{}/v1/chat/completions", server.base_url))
            .json(&serde_json::json!({"model": "m"}))
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 200);
        assert_eq!(first.text().await.unwrap(), "data: one\n\ndata: two\n\n");
        let second = client.post(&server.base_url).send().await.unwrap();
        assert_eq!(second.status(), 429);
        assert_eq!(second.headers()["retry-after"], "2");
        let requests = server.requests();
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(requests[0].body["model"], "m");
        assert_eq!(requests.len(), 2);
    }
}
