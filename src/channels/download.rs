//! Fetching what people attach in a chat: only from the platform's own
//! hosts, at most a limit, with errors that never carry the URL (a file's
//! URL may hold the bot token, as Telegram's does).

/// Why an attached file's bytes could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("{0} cannot download attachments")]
    Unsupported(String),
    #[error("larger than {}", crate::core::session::human_bytes(usize::try_from(*limit).unwrap_or(usize::MAX)))]
    TooLarge { limit: u64 },
    #[error("download failed: {0}")]
    Failed(String),
}

impl FetchError {
    /// A request that failed, without its URL.
    pub fn request(err: reqwest::Error) -> Self {
        Self::Failed(err.without_url().to_string())
    }
}

/// Whether `url` is served from the origin (scheme, host and port, as
/// parsed) of one of `origins`: a look-alike host
/// (`https://files.slack.com.example/`), credentials before the host
/// (`https://files.slack.com@example/`) or another port do not pass.
pub fn on_origin(url: &str, origins: &[&str]) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    let origin = url.origin();
    origin.is_tuple()
        && origins
            .iter()
            .filter_map(|allowed| reqwest::Url::parse(allowed).ok())
            .any(|allowed| allowed.origin() == origin)
}

/// A response's body, at most `limit` bytes: refused before reading when
/// its declared length is larger, and while streaming when it grows past
/// the limit. A status other than success is a failure naming `source`
/// (who answered: "Slack's file host").
pub async fn read_capped(
    mut response: reqwest::Response,
    limit: u64,
    source: &str,
) -> Result<Vec<u8>, FetchError> {
    let status = response.status();
    if !status.is_success() {
        return Err(FetchError::Failed(format!(
            "{source} answered {}",
            status.as_u16()
        )));
    }
    if response
        .content_length()
        .is_some_and(|length| length > limit)
    {
        return Err(FetchError::TooLarge { limit });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(FetchError::request)? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(FetchError::TooLarge { limit });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_named_origins_pass() {
        let slack = ["https://files.slack.com", "http://127.0.0.1:8080/api"];
        assert!(on_origin(
            "https://files.slack.com/files-pri/T1-F1/a.png",
            &slack
        ));
        assert!(on_origin("http://127.0.0.1:8080/files/a.png", &slack));
        assert!(!on_origin("http://127.0.0.1:8081/files/a.png", &slack));
        assert!(!on_origin("http://files.slack.com/a.png", &slack));
        assert!(!on_origin("https://files.slack.com.example/a.png", &slack));
        assert!(!on_origin(
            "https://files.slack.com@example.org/a.png",
            &slack
        ));
        assert!(!on_origin("https://user:pw@files.slack.com/a.png", &slack));
        assert!(!on_origin("files.slack.com/a.png", &slack));
        assert!(!on_origin("data:text/plain,hi", &slack));
    }

    async fn serve(body: &'static [u8], status: u16, declare_length: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request).await;
            let head = if declare_length {
                format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
            } else {
                format!(
                    "HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n{:x}\r\n",
                    body.len()
                )
            };
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(body).await.unwrap();
            if !declare_length {
                stream.write_all(b"\r\n0\r\n\r\n").await.unwrap();
            }
        });
        format!("http://{address}/f")
    }

    async fn fetch(url: &str, limit: u64) -> Result<Vec<u8>, FetchError> {
        let client = crate::net::http_client(std::time::Duration::from_secs(5)).unwrap();
        let response = client.get(url).send().await.map_err(FetchError::request)?;
        read_capped(response, limit, "the host").await
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_limit_and_refused_past_it() {
        let url = serve(b"hello", 200, true).await;
        assert_eq!(fetch(&url, 5).await.unwrap(), b"hello");
        let url = serve(b"hello", 200, true).await;
        assert_eq!(fetch(&url, 4).await, Err(FetchError::TooLarge { limit: 4 }));
        // Without a declared length the limit holds while streaming.
        let url = serve(b"hello", 200, false).await;
        assert_eq!(fetch(&url, 4).await, Err(FetchError::TooLarge { limit: 4 }));
        let url = serve(b"gone", 404, true).await;
        assert_eq!(
            fetch(&url, 100).await,
            Err(FetchError::Failed("the host answered 404".to_owned()))
        );
    }
}
