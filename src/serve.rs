//! `pincer serve`: the long-running faces of one process — the HTTP face and
//! chat channels — over one runtime, until SIGTERM or SIGINT.

use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;

use crate::cli::{self, Failure, Opened, ProviderArgs, exit};
use crate::config::{Config, Flags};
use crate::http::limit::RateLimit;
use crate::http::{self, HttpOptions, auth};

/// Where `--http` listens when given no address and `[http] bind` is unset.
pub const DEFAULT_BIND: &str = "127.0.0.1:8787";
/// Default largest request body, in bytes.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;
pub const DEFAULT_RATE_PER_MINUTE: u32 = 600;
pub const DEFAULT_RATE_BURST: u32 = 100;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve HTTP (REST, SSE, JSON-RPC over WebSocket) on ADDR [default: [http] bind, else 127.0.0.1:8787]
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub http: Option<String>,
    /// Allow binding an address other than loopback (the token is then all that guards the agent)
    #[arg(long)]
    pub allow_remote: bool,
    /// Once listening, write the bound address (e.g. 127.0.0.1:8787) to this file
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Bridge a chat channel (a [channels.NAME] table, or `telegram` / `webhook`); repeatable
    #[arg(long = "channel", value_name = "NAME")]
    pub channels: Vec<String>,
    #[command(flatten)]
    pub provider: ProviderArgs,
}

/// Runs `pincer serve` until a termination signal, then cancels the runs,
/// waits for each to record its end, stops the faces and flushes the store.
pub async fn run(flags: &Flags, args: &ServeArgs) -> Result<u8, Failure> {
    let opened = cli::open(flags)?;
    opened.log_problems();
    let plan = http_plan(&opened.config, args)?;
    if plan.is_none() && args.channels.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "nothing to serve: pass --http [ADDR] (or set `bind` in the [http] table of the config) and/or --channel NAME"
        )));
    }
    let Opened {
        runtime, config, ..
    } = opened;
    let store = runtime.store().clone();
    let shutdown = CancellationToken::new();
    cli::spawn_signal_watch(shutdown.clone());
    let http_stop = CancellationToken::new();
    let mut server = match plan {
        Some(plan) => {
            let listener = tokio::net::TcpListener::bind(plan.addr)
                .await
                .with_context(|| format!("cannot listen on {}", plan.addr))
                .map_err(Failure::failed)?;
            let bound = listener
                .local_addr()
                .context("cannot read the bound address")
                .map_err(Failure::failed)?;
            eprintln!("pincer: HTTP token from {}", plan.token_source);
            eprintln!("pincer: listening on http://{bound}");
            if let Some(path) = &args.ready_file {
                write_ready_file(path, bound).map_err(Failure::failed)?;
            }
            Some(tokio::spawn(http::serve(
                runtime.clone(),
                listener,
                plan.options,
                http_stop.clone(),
            )))
        }
        None => None,
    };
    let channels_stop = CancellationToken::new();
    let hubs = crate::channels::start(
        &runtime,
        &config,
        &args.channels,
        &|name| std::env::var(name).ok(),
        channels_stop.clone(),
    )
    .await
    .map_err(Failure::usage)?;

    let early = tokio::select! {
        _ = shutdown.cancelled() => None,
        served = async {
            match server.as_mut() {
                Some(server) => server.await,
                None => std::future::pending().await,
            }
        } => Some(served),
    };
    tracing::info!("shutting down: stopping channels, cancelling runs");
    // Channels stop taking messages first (what they took and did not answer
    // is answered after the next start, from the inbox); then runs end, so
    // HTTP requests waiting on them are answered and streams carry their last
    // events; then the HTTP face stops.
    channels_stop.cancel();
    for hub in &hubs {
        hub.stopped().await;
    }
    runtime.shutdown().await;
    http_stop.cancel();
    let served = match (early, server) {
        (Some(served), _) => Some(served),
        (None, Some(server)) => Some(server.await),
        (None, None) => None,
    };
    store.shutdown();
    match served {
        None | Some(Ok(Ok(()))) => Ok(exit::OK),
        Some(Ok(Err(err))) => Err(Failure::failed(
            anyhow::Error::new(err).context("the HTTP server failed"),
        )),
        Some(Err(err)) => Err(Failure::failed(
            anyhow::Error::new(err).context("the HTTP server task failed"),
        )),
    }
}

/// What the HTTP face will do, worked out from flags and configuration.
struct HttpPlan {
    addr: SocketAddr,
    options: HttpOptions,
    token_source: auth::TokenSource,
}

fn http_plan(config: &Config, args: &ServeArgs) -> Result<Option<HttpPlan>, Failure> {
    let http = &config.http;
    let raw = match (&args.http, &http.bind) {
        (Some(addr), _) if !addr.is_empty() => addr.clone(),
        (Some(_), Some(bind)) | (None, Some(bind)) => bind.clone(),
        (Some(_), None) => DEFAULT_BIND.to_owned(),
        (None, None) => return Ok(None),
    };
    let addr: SocketAddr = raw.parse().map_err(|_| {
        Failure::usage(anyhow::anyhow!(
            "--http: expected an address such as 127.0.0.1:8787, got {raw:?}"
        ))
    })?;
    let allow_remote = args.allow_remote || http.allow_remote.unwrap_or(false);
    if !addr.ip().is_loopback() {
        if !allow_remote {
            return Err(Failure::usage(anyhow::anyhow!(
                "refusing to listen on {addr}, which is not a loopback address: pass --allow-remote (or set `allow_remote = true` in [http]) if you mean it"
            )));
        }
        tracing::warn!(%addr, "listening beyond loopback: anyone who can reach this address and has the token controls the agent");
    }
    let (token, token_source) = auth::resolve(http, &config.data_dir.value, &|name| {
        std::env::var(name).ok()
    })
    .map_err(Failure::usage)?;
    let per_minute = http
        .rate_limit_per_minute
        .unwrap_or(DEFAULT_RATE_PER_MINUTE);
    let burst = http.rate_limit_burst.unwrap_or(DEFAULT_RATE_BURST);
    let rate_limit = match (NonZeroU32::new(per_minute), NonZeroU32::new(burst)) {
        (Some(per_minute), Some(burst)) => Some(RateLimit { per_minute, burst }),
        _ => None,
    };
    Ok(Some(HttpPlan {
        addr,
        options: HttpOptions {
            token,
            body_limit: http.body_limit_bytes.unwrap_or(DEFAULT_BODY_LIMIT),
            rate_limit,
            cors_origins: http.cors_origins.clone(),
        },
        token_source,
    }))
}

/// Writes the address whole (through a rename), so a reader never sees half of it.
fn write_ready_file(path: &Path, addr: SocketAddr) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{addr}\n"))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}
