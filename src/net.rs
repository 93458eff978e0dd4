//! The program's HTTP clients (providers, web tools, HTTP hooks, MCP
//! servers over HTTP, chat channels) all start here: rustls with the `ring`
//! provider (no system OpenSSL) and Pincer's user agent.

use std::time::Duration;

/// A client with `timeout` as the limit for connecting and for each read (a
/// stalled stream fails, a long one does not); HTTP/2 where the server
/// offers it.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, reqwest::Error> {
    client_builder()
        .connect_timeout(timeout)
        .read_timeout(timeout)
        .build()
}

/// A builder for a client with other limits or policies than
/// [`http_client`]'s: the TLS provider installed and the user agent set.
pub fn client_builder() -> reqwest::ClientBuilder {
    // Installing twice is harmless: the first provider stays.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
}

/// A TLS client configuration (rustls, `ring`) that checks servers against
/// the certificates (PEM) in `root_cert`, else the system's: the chat
/// channels' own connections (IRC, IMAP, SMTP) and PostgreSQL's.
pub fn tls_config(root_cert: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS: {err}"))?;
    let Some(path) = root_cert else {
        use rustls_platform_verifier::BuilderVerifierExt as _;
        return builder
            .with_platform_verifier()
            .map(|builder| builder.with_no_client_auth())
            .map_err(|err| format!("TLS: the system's certificates: {err}"));
    };
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject as _;
    let shown = path.display();
    let mut roots = rustls::RootCertStore::empty();
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|err| format!("root certificates {shown}: {err}"))?;
    for certificate in certificates {
        let certificate = certificate.map_err(|err| format!("root certificates {shown}: {err}"))?;
        roots
            .add(certificate)
            .map_err(|err| format!("root certificates {shown}: {err}"))?;
    }
    if roots.is_empty() {
        return Err(format!(
            "root certificates {shown}: no certificate in the file"
        ));
    }
    Ok(builder.with_root_certificates(roots).with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn requests_name_pincer_and_its_version() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = Vec::new();
            let mut buffer = [0_u8; 1024];
            while !head.ends_with(b"\r\n\r\n") {
                let n = socket.read(&mut buffer).await.unwrap();
                assert_ne!(n, 0, "the request ended early");
                head.extend_from_slice(&buffer[..n]);
            }
            let reply = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n";
            socket.write_all(reply).await.unwrap();
            String::from_utf8(head).unwrap().to_ascii_lowercase()
        });

        let client = http_client(Duration::from_secs(5)).unwrap();
        let response = client.get(&url).send().await.unwrap();

        assert_eq!(response.status(), 204);
        let head = server.await.unwrap();
        let agent = concat!("user-agent: pincer/", env!("CARGO_PKG_VERSION"), "\r\n");
        assert!(head.contains(agent), "{head}");
    }
}
