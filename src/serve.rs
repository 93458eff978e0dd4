//! `pincer serve`: the long-running faces of one process — the HTTP face and
//! chat channels — over one runtime, until SIGTERM or SIGINT.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;

use std::sync::Arc;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::app::{Failure, exit};
use crate::app::{Flags, wiring};
use crate::channels::{HttpRequest, Hub};
use crate::cli::ServeArgs;
use crate::http;

/// Runs `pincer serve` until a termination signal, then cancels the runs,
/// waits for each to record its end, stops the faces and flushes the store.
pub async fn run(flags: &Flags, args: &ServeArgs) -> Result<u8, Failure> {
    let opened = crate::app::App::open(flags).await?;
    opened.log_problems();
    let plan = wiring::http_plan(&opened.config, args)?;
    if plan.is_none() && args.channels.is_empty() {
        return Err(Failure::usage(anyhow::anyhow!(
            "nothing to serve: pass --http [ADDR] (or set `bind` in the [http] table of the config) and/or --channel NAME"
        )));
    }
    let app = Arc::new(opened);
    let runtime = app.runtime.clone();
    runtime.keep_process_lease();
    let shutdown = CancellationToken::new();
    crate::app::spawn_signal_watch(shutdown.clone());
    let http_stop = CancellationToken::new();
    let ingress = Arc::new(ChannelRoutes::default());
    let serves_http = plan.is_some();
    let mut bound = None;
    let mut server = match plan {
        Some(plan) => {
            let listener = tokio::net::TcpListener::bind(plan.addr)
                .await
                .with_context(|| format!("cannot listen on {}", plan.addr))
                .map_err(Failure::failed)?;
            let addr = listener
                .local_addr()
                .context("cannot read the bound address")
                .map_err(Failure::failed)?;
            bound = Some(addr);
            eprintln!("pincer: HTTP token from {}", plan.token_source);
            eprintln!("pincer: listening on http://{addr}");
            Some(tokio::spawn(http::serve(
                runtime.clone(),
                app.store.clone(),
                http::api::SkillsAccess {
                    skills: app.skills.clone(),
                    journal: app.store.clone(),
                    audit: app.store.clone(),
                },
                listener,
                plan.options,
                http::Ports {
                    acp: Some(Arc::new(AcpOverWebSocket {
                        runtime: runtime.clone(),
                        options: crate::acp::AcpOptions {
                            owns_runtime: false,
                            ..crate::acp::launch::options(&app, flags)
                        },
                    }) as Arc<dyn http::acp::Connections>),
                    channels: Some(ingress.clone() as Arc<dyn http::ingress::ChannelIngress>),
                    schedules: Some(Arc::new(ScheduleRoutes { app: app.clone() })
                        as Arc<dyn http::schedules::Schedules>),
                },
                http_stop.clone(),
            )))
        }
        None => None,
    };
    let channels_stop = CancellationToken::new();
    let receiving = if serves_http {
        crate::channels::HttpReceiving::All
    } else {
        crate::channels::HttpReceiving::OwnListeners
    };
    let hubs = app
        .start_channels(&args.channels, receiving, channels_stop.clone())
        .await?;
    ingress.serve(&hubs);
    let own_listeners = serve_own_listeners(&app, &hubs, &ingress, &http_stop).await?;
    // Ready once listening and the channels started.
    if let (Some(path), Some(addr)) = (&args.ready_file, bound) {
        write_ready_file(path, addr).map_err(Failure::failed)?;
    }

    let recovering = spawn_recovery(&app, channels_stop.clone());
    // Schedules fire in every serving process; each occurrence once
    // (`core::schedule`).
    let schedules_stop = CancellationToken::new();
    let scheduling = tokio::spawn(wiring::schedules::scheduler(&app).serve(schedules_stop.clone()));

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
    schedules_stop.cancel();
    let _ = scheduling.await;
    channels_stop.cancel();
    for hub in &hubs {
        hub.stopped().await;
    }
    if let Some(recovering) = recovering {
        let _ = recovering.await;
    }
    runtime.shutdown().await;
    http_stop.cancel();
    for listener in own_listeners {
        if let Ok(Err(err)) = listener.await {
            tracing::warn!(error = %err, "a channel's listener failed");
        }
    }
    let served = match (early, server) {
        (Some(served), _) => Some(served),
        (None, Some(server)) => Some(server.await),
        (None, None) => None,
    };
    app.store.shutdown();
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

/// Binds and serves the listeners of the channels that have their own
/// (Slack's `listen`), each until `stop`.
async fn serve_own_listeners(
    app: &crate::app::App,
    hubs: &[Arc<Hub>],
    ingress: &Arc<ChannelRoutes>,
    stop: &CancellationToken,
) -> Result<Vec<tokio::task::JoinHandle<std::io::Result<()>>>, Failure> {
    let body_limit = app
        .config
        .http
        .body_limit_bytes
        .unwrap_or(wiring::DEFAULT_BODY_LIMIT);
    let mut served = Vec::new();
    for hub in hubs {
        let adapter = hub.adapter();
        let Some(own) = adapter.own_listener() else {
            continue;
        };
        let name = adapter.channel().to_owned();
        let listener = tokio::net::TcpListener::bind(own.addr)
            .await
            .with_context(|| format!("channel {name}: cannot listen on {}", own.addr))
            .map_err(Failure::failed)?;
        let addr = listener
            .local_addr()
            .context("cannot read the bound address")
            .map_err(Failure::failed)?;
        eprintln!("pincer: channel {name} listening on http://{addr}");
        served.push(tokio::spawn(http::ingress::serve_own_listener(
            listener,
            name,
            own.endpoint,
            ingress.clone() as Arc<dyn http::ingress::ChannelIngress>,
            body_limit,
            stop.clone(),
        )));
    }
    Ok(served)
}

/// Writes the address whole (through a rename), so a reader never sees half of it.
fn write_ready_file(path: &Path, addr: SocketAddr) -> anyhow::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{addr}\n"))
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// The chat channels behind the HTTP face's `/channels/{name}/…`:
/// the adapters of this process's channels that receive over HTTP, once
/// started (503 before: the platform sends again).
#[derive(Default)]
struct ChannelRoutes {
    hubs: parking_lot::RwLock<Option<HashMap<String, Arc<Hub>>>>,
}

impl ChannelRoutes {
    fn serve(&self, hubs: &[Arc<Hub>]) {
        let hubs = hubs
            .iter()
            .map(|hub| (hub.adapter().channel().to_owned(), hub.clone()))
            .collect();
        *self.hubs.write() = Some(hubs);
    }
}

impl http::ingress::ChannelIngress for ChannelRoutes {
    fn handle(
        &self,
        name: String,
        endpoint: String,
        headers: axum::http::HeaderMap,
        body: Vec<u8>,
    ) -> futures::future::BoxFuture<'static, (u16, serde_json::Value)> {
        let found = self.hubs.read().as_ref().map(|hubs| {
            hubs.get(&name)
                .map(|hub| hub.adapter().clone())
                .filter(|adapter| adapter.receives_over_http())
        });
        Box::pin(async move {
            let error =
                |status: u16, message: String| (status, serde_json::json!({"error": message}));
            match found {
                None => error(503, "the channels are starting: send it again".to_owned()),
                Some(None) => error(
                    404,
                    format!(
                        "no channel {} receives over HTTP in this process",
                        crate::core::quote::quote(&name)
                    ),
                ),
                Some(Some(adapter)) => {
                    let reply = adapter
                        .http(HttpRequest {
                            endpoint,
                            headers,
                            body,
                        })
                        .await;
                    (reply.status, reply.body)
                }
            }
        })
    }

    fn list(&self) -> futures::future::BoxFuture<'static, crate::views::ChannelList> {
        let mut hubs: Vec<Arc<Hub>> = self
            .hubs
            .read()
            .as_ref()
            .map(|hubs| hubs.values().cloned().collect())
            .unwrap_or_default();
        hubs.sort_by(|a, b| a.adapter().channel().cmp(b.adapter().channel()));
        Box::pin(async move {
            let mut channels = Vec::new();
            for hub in hubs {
                channels.push(hub.view().await);
            }
            crate::views::ChannelList { channels }
        })
    }

    fn pairs(
        &self,
        name: String,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::ChannelPairs, http::ingress::Refusal>,
    > {
        let hub = self.hub(&name);
        Box::pin(async move {
            hub?.pairs()
                .await
                .map_err(|err| (503, format!("cannot read the paired senders: {err}")))
        })
    }

    fn revoke(
        &self,
        name: String,
        sender: String,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::PairRevoked, http::ingress::Refusal>,
    > {
        let hub = self.hub(&name);
        Box::pin(async move {
            match hub?.revoke(&sender).await {
                Ok(Some(key)) => Ok(crate::views::PairRevoked {
                    channel: name,
                    sender: key,
                    revoked: true,
                }),
                Ok(None) => Err((
                    404,
                    format!(
                        "{} is not paired on channel {}",
                        crate::core::quote::quote(&sender),
                        crate::core::quote::quote(&name)
                    ),
                )),
                Err(err) => Err((503, format!("the sender was not revoked: {err}"))),
            }
        })
    }

    fn send(
        &self,
        name: String,
        message: http::ingress::SendMessage,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::core::channel::SendIntent, http::ingress::Refusal>,
    > {
        let hub = self
            .hubs
            .read()
            .as_ref()
            .and_then(|hubs| hubs.get(&name).cloned());
        let starting = self.hubs.read().is_none();
        Box::pin(async move {
            if starting {
                return Err((503, "the channels are starting: send it again".to_owned()));
            }
            let hub = hub.ok_or_else(|| {
                (
                    404,
                    format!(
                        "no channel {} is served by this process (pincer serve --channel NAME)",
                        crate::core::quote::quote(&name)
                    ),
                )
            })?;
            let target = hub
                .adapter()
                .target(&message.to)
                .map_err(|err| (400, format!("to: {err}")))?;
            hub.deliver(target, &message.text, message.id.as_deref())
                .await
                .map_err(|err| (503, format!("the message was not recorded: {err}")))
        })
    }

    fn outbox(
        &self,
        name: String,
        status: Option<crate::core::channel::IntentStatus>,
        limit: usize,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::ChannelOutbox, http::ingress::Refusal>,
    > {
        self.outbox_of(name, status, limit)
    }

    fn resolve(
        &self,
        name: String,
        intent_id: String,
        resolution: crate::core::channel::Resolution,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::OutboxIntent, http::ingress::Refusal>,
    > {
        self.resolve_in(&name, intent_id, resolution)
    }
}

impl ChannelRoutes {
    /// The hub of channel `name`, run by this process: 503 while the
    /// channels start, 404 when it runs no such channel.
    fn hub(&self, name: &str) -> Result<Arc<Hub>, http::ingress::Refusal> {
        let hubs = self.hubs.read();
        let Some(hubs) = hubs.as_ref() else {
            return Err((503, "the channels are starting: ask again".to_owned()));
        };
        hubs.get(name).cloned().ok_or_else(|| {
            (
                404,
                format!(
                    "no channel {} runs in this process (pincer serve --channel NAME)",
                    crate::core::quote::quote(name)
                ),
            )
        })
    }
}

impl ChannelRoutes {
    fn outbox_of(
        &self,
        name: String,
        status: Option<crate::core::channel::IntentStatus>,
        limit: usize,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::ChannelOutbox, http::ingress::Refusal>,
    > {
        let hub = self.hub(&name);
        Box::pin(async move {
            let intents = hub?
                .intents(status, limit)
                .await
                .map_err(|err| (503, format!("the store did not answer: {err}")))?;
            Ok(crate::views::ChannelOutbox {
                channel: name,
                intents: intents
                    .iter()
                    .map(crate::views::OutboxIntent::from)
                    .collect(),
            })
        })
    }

    fn resolve_in(
        &self,
        name: &str,
        intent_id: String,
        resolution: crate::core::channel::Resolution,
    ) -> futures::future::BoxFuture<
        'static,
        Result<crate::views::OutboxIntent, http::ingress::Refusal>,
    > {
        use crate::channels::outbox::Unresolved;
        let hub = self.hub(name);
        Box::pin(async move {
            match hub?.resolve(&intent_id, resolution).await {
                Ok(intent) => Ok(crate::views::OutboxIntent::from(&intent)),
                Err(Unresolved::NotFound(message)) => Err((404, message)),
                Err(Unresolved::Refused(message)) => Err((409, message)),
                Err(Unresolved::Store(err)) => {
                    Err((503, format!("the store did not answer: {err}")))
                }
            }
        })
    }
}

/// The ACP face behind the HTTP face's `/acp` WebSocket: each socket one
/// ACP connection, as on stdio, over this process's runtime.
struct AcpOverWebSocket {
    runtime: crate::core::runtime::Runtime,
    options: crate::acp::AcpOptions,
}

impl http::acp::Connections for AcpOverWebSocket {
    fn serve(
        &self,
        input: http::acp::Input,
        output: tokio::sync::mpsc::Sender<Vec<u8>>,
        shutdown: CancellationToken,
    ) -> futures::future::BoxFuture<'static, std::io::Result<()>> {
        Box::pin(crate::acp::serve(
            self.runtime.clone(),
            input,
            crate::stdout::LineSender::channel(output),
            self.options.clone(),
            shutdown,
        ))
    }

    fn max_message_bytes(&self) -> usize {
        self.options.max_line_bytes
    }
}

/// On PostgreSQL, instances come and go while this one serves: every lease
/// period it ends the runs of instances whose leases lapsed (`kill -9`, a
/// lost machine), each run once across the survivors. (On SQLite every
/// process recovers at open, and a server's peers are the editors and
/// scripts of one machine.)
fn spawn_recovery(
    app: &crate::app::App,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    app.store.postgres()?;
    let store = app.store.clone();
    let period = match &app.config.session_lease_secs {
        Some(secs) => std::time::Duration::from_secs(secs.value),
        None => std::time::Duration::from_millis(
            u64::try_from(crate::core::runtime::LeaseTiming::default().ttl_ms).unwrap_or(15_000),
        ),
    };
    Some(tokio::spawn(async move {
        let mut every = tokio::time::interval(period.max(std::time::Duration::from_secs(1)));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = every.tick() => {}
            }
            let Some(pg) = store.postgres() else { return };
            match pg.recover_gone().await {
                Ok(recovery) if !recovery.interrupted_runs.is_empty() => tracing::warn!(
                    runs = recovery.interrupted_runs.len(),
                    "marked runs of instances that are gone as interrupted"
                ),
                Ok(_) => {}
                Err(err) => {
                    tracing::warn!(error = %err, "cannot look for runs of instances that are gone")
                }
            }
        }
    }))
}

/// The schedules behind `/v1/schedules`: the store's, checked and recorded
/// as `pincer schedule` does (`wiring::schedules`).
struct ScheduleRoutes {
    app: Arc<crate::app::App>,
}

impl http::schedules::Schedules for ScheduleRoutes {
    fn list(
        &self,
    ) -> futures::future::BoxFuture<'static, Result<crate::views::ScheduleList, Refusal>> {
        let store = self.app.store.clone();
        Box::pin(async move {
            let schedules = store.schedules().await.map_err(unavailable)?;
            let mut views = Vec::new();
            for schedule in &schedules {
                let fires = store
                    .fires(Some(&schedule.id), 1)
                    .await
                    .map_err(unavailable)?;
                views.push(wiring::schedules::view(schedule, fires.first()));
            }
            Ok(crate::views::ScheduleList { schedules: views })
        })
    }

    fn show(
        &self,
        id: String,
        limit: usize,
    ) -> futures::future::BoxFuture<'static, Result<crate::views::ScheduleDetails, Refusal>> {
        let store = self.app.store.clone();
        Box::pin(async move {
            let schedule = store
                .schedules()
                .await
                .map_err(unavailable)?
                .into_iter()
                .find(|s| s.id == id)
                .ok_or_else(|| unknown(&id))?;
            let fires = store.fires(Some(&id), limit).await.map_err(unavailable)?;
            let view = wiring::schedules::view(&schedule, fires.first());
            Ok(crate::views::ScheduleDetails { view, fires })
        })
    }

    fn add(
        &self,
        request: http::schedules::AddSchedule,
    ) -> futures::future::BoxFuture<'static, Result<crate::views::ScheduleAdded, Refusal>> {
        let app = self.app.clone();
        Box::pin(async move {
            let place = match (request.session_id, request.workspace) {
                (Some(id), _) => wiring::schedules::Where::Session(id),
                (None, dir) => wiring::schedules::Where::Workspace(dir.unwrap_or_default()),
            };
            let definition = crate::core::schedule::Definition {
                cron: request.cron,
                at: request.at,
                tz: request.tz,
                prompt: request.prompt,
                catch_up: request.catch_up,
                id: request.id,
            };
            let schedule =
                wiring::schedules::add(&app, definition, place, request.deliver.as_deref(), "http")
                    .await
                    .map_err(|err| match err {
                        wiring::schedules::AddError::Invalid(reason) => Refusal::Invalid(reason),
                        wiring::schedules::AddError::Store(err) => unavailable(err),
                    })?;
            Ok(wiring::schedules::view(&schedule, None).into())
        })
    }

    fn remove(&self, id: String) -> futures::future::BoxFuture<'static, Result<(), Refusal>> {
        let store = self.app.store.clone();
        Box::pin(async move {
            match store
                .commit(crate::core::journal::Write::Schedule(
                    crate::core::schedule::ScheduleWrite::Remove { id: id.clone() },
                ))
                .await
            {
                Ok(()) => Ok(()),
                Err(crate::core::journal::JournalError::Conflict(_)) => Err(unknown(&id)),
                Err(err) => Err(unavailable(err)),
            }
        })
    }
}

use http::schedules::Refusal;

fn unavailable(err: impl std::fmt::Display) -> Refusal {
    Refusal::Unavailable(format!("the schedules cannot be read: {err}"))
}

fn unknown(id: &str) -> Refusal {
    Refusal::Unknown(format!("no schedule {}", crate::core::quote::quote(id)))
}
