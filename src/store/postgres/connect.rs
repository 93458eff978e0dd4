//! How Pincer reaches a PostgreSQL server: the URL read (`sslmode` and
//! `sslrootcert` as libpq reads them), TLS with rustls, and the pool.
//!
//! `sslmode`: `disable` (no TLS), `prefer` (the default: TLS when the
//! server offers it, its certificate not checked, as libpq does without a
//! root certificate), `require` (TLS or nothing, the certificate not
//! checked), `verify-full` (TLS, the certificate checked against
//! `sslrootcert`'s certificates, else the system's, and the host name
//! checked). `verify-ca` is refused: a certificate checked without its
//! name is a weaker promise than either neighbour makes clear.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::SslMode;

use crate::store::StoreError;

/// How long connecting may take before it counts as the server being down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A server to connect to: the driver's configuration and the TLS to use.
#[derive(Clone)]
pub(crate) struct Server {
    pub(crate) config: tokio_postgres::Config,
    tls: Tls,
    /// The URL without its password, for messages.
    pub(crate) shown: String,
}

#[derive(Clone)]
enum Tls {
    Off,
    /// Encrypted, the certificate not checked (`prefer`, `require`).
    Unchecked(Arc<ClientConfig>),
    /// Encrypted and checked (`verify-full`).
    Checked(Arc<ClientConfig>),
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// The URL with its password replaced by `***`.
pub(crate) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (authority, tail) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = match userinfo.split_once(':') {
        Some((user, _)) => format!("{user}:***"),
        None => userinfo.to_owned(),
    };
    let query = tail
        .split_once('?')
        .map(|(path, query)| {
            let pairs: Vec<String> = form_urlencoded::parse(query.as_bytes())
                .map(|(k, v)| {
                    if k == "password" {
                        format!("{k}=***")
                    } else {
                        format!("{k}={v}")
                    }
                })
                .collect();
            format!("{path}?{}", pairs.join("&"))
        })
        .unwrap_or_else(|| tail.to_owned());
    format!("{scheme}://{user}@{host}{query}")
}

impl Server {
    /// Reads a `postgres://` (or `postgresql://`) URL; a clear message
    /// naming what is wrong otherwise.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let shown = redacted(url);
        let scheme_ok = url.starts_with("postgres://") || url.starts_with("postgresql://");
        if !scheme_ok {
            return Err(format!(
                "expected a postgres://USER@HOST:PORT/DATABASE URL, got {}",
                crate::core::quote::quote(&shown)
            ));
        }
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut mode = "prefer".to_owned();
        let mut root_cert = None;
        let mut kept: Vec<(String, String)> = Vec::new();
        for (key, value) in form_urlencoded::parse(query.as_bytes()) {
            match &*key {
                "sslmode" => mode = value.into_owned(),
                "sslrootcert" => root_cert = Some(value.into_owned()),
                _ => kept.push((key.into_owned(), value.into_owned())),
            }
        }
        let mut rebuilt = base.to_owned();
        if !kept.is_empty() {
            let query: String = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(kept)
                .finish();
            rebuilt = format!("{base}?{query}");
        }
        let mut config = tokio_postgres::Config::from_str(&rebuilt)
            .map_err(|err| format!("{}: {}", shown, crate::causes::chain(&err)))?;
        if config.get_dbname().is_none() {
            return Err(format!("{shown}: the URL names no database (…/DATABASE)"));
        }
        if config.get_hosts().is_empty() {
            return Err(format!("{shown}: the URL names no host"));
        }
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("pincer")
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30));
        let tls = match mode.as_str() {
            "disable" => {
                config.ssl_mode(SslMode::Disable);
                Tls::Off
            }
            "prefer" | "require" => {
                config.ssl_mode(if mode == "prefer" {
                    SslMode::Prefer
                } else {
                    SslMode::Require
                });
                Tls::Unchecked(Arc::new(unchecked()?))
            }
            "verify-full" => {
                config.ssl_mode(SslMode::Require);
                Tls::Checked(Arc::new(checked(root_cert.as_deref())?))
            }
            "verify-ca" => {
                return Err(format!(
                    "{shown}: sslmode=verify-ca is not supported: use verify-full (the certificate and the host name checked) or require"
                ));
            }
            other => {
                return Err(format!(
                    "{shown}: unknown sslmode {}: expected disable, prefer, require or verify-full",
                    crate::core::quote::quote(other)
                ));
            }
        };
        Ok(Self { config, tls, shown })
    }

    /// Whether the connection is encrypted, and whether its certificate is checked.
    pub(crate) fn tls_mode(&self) -> &'static str {
        match (&self.tls, self.config.get_ssl_mode()) {
            (Tls::Off, _) => "off",
            (Tls::Checked(_), _) => "verify-full",
            (Tls::Unchecked(_), SslMode::Prefer) => "prefer",
            (Tls::Unchecked(_), _) => "require",
        }
    }

    /// One connection, its driver task spawned; the task ends when the
    /// client is dropped or the connection breaks.
    pub(crate) async fn connect(&self) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        match &self.tls {
            Tls::Off => {
                let (client, connection) = self.config.connect(tokio_postgres::NoTls).await?;
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(error = %err, "PostgreSQL connection ended");
                    }
                });
                Ok(client)
            }
            Tls::Unchecked(tls) | Tls::Checked(tls) => {
                let connector = tokio_postgres_rustls::MakeRustlsConnect::new((**tls).clone());
                let (client, connection) = self.config.connect(connector).await?;
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(error = %err, "PostgreSQL connection ended");
                    }
                });
                Ok(client)
            }
        }
    }

    /// A connection whose server messages (notifications) reach `messages`.
    pub(crate) async fn connect_listening(
        &self,
        messages: tokio::sync::mpsc::UnboundedSender<tokio_postgres::AsyncMessage>,
    ) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        fn drive<S, T>(
            mut connection: tokio_postgres::Connection<S, T>,
            messages: tokio::sync::mpsc::UnboundedSender<tokio_postgres::AsyncMessage>,
        ) where
            S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
            T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
        {
            tokio::spawn(async move {
                loop {
                    let next = std::future::poll_fn(|cx| connection.poll_message(cx)).await;
                    match next {
                        Some(Ok(message)) => {
                            if messages.send(message).is_err() {
                                return;
                            }
                        }
                        Some(Err(err)) => {
                            tracing::debug!(error = %err, "PostgreSQL listening connection ended");
                            return;
                        }
                        None => return,
                    }
                }
            });
        }
        match &self.tls {
            Tls::Off => {
                let (client, connection) = self.config.connect(tokio_postgres::NoTls).await?;
                drive(connection, messages);
                Ok(client)
            }
            Tls::Unchecked(tls) | Tls::Checked(tls) => {
                let connector = tokio_postgres_rustls::MakeRustlsConnect::new((**tls).clone());
                let (client, connection) = self.config.connect(connector).await?;
                drive(connection, messages);
                Ok(client)
            }
        }
    }

    /// A pool of connections for reads (and the leases' short transactions).
    pub(crate) fn pool(&self, size: usize) -> Result<deadpool_postgres::Pool, StoreError> {
        let manager_config = deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        };
        let manager = match &self.tls {
            Tls::Off => deadpool_postgres::Manager::from_config(
                self.config.clone(),
                tokio_postgres::NoTls,
                manager_config,
            ),
            Tls::Unchecked(tls) | Tls::Checked(tls) => deadpool_postgres::Manager::from_config(
                self.config.clone(),
                tokio_postgres_rustls::MakeRustlsConnect::new((**tls).clone()),
                manager_config,
            ),
        };
        deadpool_postgres::Pool::builder(manager)
            .max_size(size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|err| StoreError::Postgres(format!("cannot make a connection pool: {err}")))
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// TLS checked against `root_cert`'s certificates (PEM), else the system's.
fn checked(root_cert: Option<&str>) -> Result<ClientConfig, String> {
    crate::net::tls_config(root_cert.map(std::path::Path::new))
        .map_err(|err| err.replace("root certificates ", "sslrootcert "))
}

/// TLS whose certificate is not checked (`prefer`, `require`): the
/// connection is encrypted and the server proves it holds the key of the
/// certificate it shows, but not who signed it.
fn unchecked() -> Result<ClientConfig, String> {
    let provider = provider();
    let verifier = Arc::new(Unchecked(provider.clone()));
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS: {err}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth())
}

#[derive(Debug)]
struct Unchecked(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redacted("postgres://ann:s3cret@db:5432/pincer?sslmode=require"),
            "postgres://ann:***@db:5432/pincer?sslmode=require"
        );
        assert_eq!(
            redacted("postgres://ann@db/pincer?password=s3cret"),
            "postgres://ann@db/pincer?password=***"
        );
        assert_eq!(redacted("postgres://db/pincer"), "postgres://db/pincer");
    }

    #[test]
    fn urls_are_read_as_libpq_reads_them_and_bad_ones_named() {
        let server = Server::parse("postgres://ann@127.0.0.1:5433/pincer").unwrap();
        assert_eq!(server.config.get_dbname(), Some("pincer"));
        assert_eq!(server.config.get_ports(), [5433]);
        assert_eq!(server.tls_mode(), "prefer");
        let off = Server::parse("postgresql://ann@h/p?sslmode=disable").unwrap();
        assert_eq!(off.tls_mode(), "off");
        let required = Server::parse("postgres://ann@h/p?sslmode=require").unwrap();
        assert_eq!(required.tls_mode(), "require");
        for (url, says) in [
            ("mysql://ann@h/p", "expected a postgres://"),
            (
                "postgres://ann@h/p?sslmode=verify-ca",
                "verify-ca is not supported",
            ),
            ("postgres://ann@h/p?sslmode=sometimes", "unknown sslmode"),
            ("postgres://ann@h", "names no database"),
            (
                "postgres://ann@h/p?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
                "sslrootcert /nonexistent/ca.pem",
            ),
            ("postgres://ann:pw@h/p?bogus=1", "invalid connection string"),
        ] {
            let err = Server::parse(url).unwrap_err();
            assert!(err.contains(says), "{url}: {err}");
            assert!(!err.contains(":pw@"), "the password shows: {err}");
        }
    }
}
