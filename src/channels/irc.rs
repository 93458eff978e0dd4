//! IRC (`kind = "irc"`): one connection to a server, answering in its
//! channels when addressed (`NICK: …`) and in private messages.
//!
//! **Connecting.** TCP, or TLS from the first byte (rustls; the system's
//! certificates or `tls_ca`'s), then `CAP LS 302`, `PASS` (the password,
//! when set), `NICK`, `USER`; `CAP REQ` of `account-tag` and, with a
//! password, `sasl` where the server offers them, SASL PLAIN as the account
//! named like the nick, then `CAP END`. A refused login is logged and put in
//! the channel's status; the connection goes on without it. A nick in use
//! gets `_` appended and is regained every 30 s. On `001` it joins its
//! channels. A lost connection is made again after 1 s, doubling to 60 s.
//!
//! **Who is writing.** Where the server tags messages with the sender's
//! account (`account-tag` acknowledged), a sender is their account, and one
//! not logged in is `~NICK`, which no account name can be: `allow` and
//! pairing then hold accounts, and a nick alone proves nothing. A private
//! chat of a logged-in sender is theirs and that nick's (its thread is the
//! account), so whoever takes the nick next does not find it. Elsewhere a
//! sender is their nick.
//!
//! **Receiving.** IRC has no message ids, no history and no
//! acknowledgement: a message is recorded once as it arrives (its id this
//! connection's start and its number), and one a crash loses before it is
//! recorded is lost (the server never sends it again).
//!
//! **Sending.** A unit is a few lines; each line a `PRIVMSG`, cut to fit
//! 512 bytes *as the server relays it* (`:nick!user@host PRIVMSG target
//! :text` CR LF: the mask learnt from the server's echo of its `JOIN`, a
//! long one assumed before) on word and UTF-8 boundaries; CR, LF and NUL in
//! the text become spaces, so no text can start a command. Lines are paced
//! under ngIRCd's flood limits (a burst of three, then a line a second; a
//! line longer than 256 bytes counts for more). A unit is acknowledged by a
//! `PING` sent after its lines: the server answers in order, so its `PONG`
//! means every line was taken. A unit whose first line never went out is
//! retried (`transient`); one cut off after that has an unknown outcome
//! (IRC cannot say, and a resend could repeat it): `unknown_after_send`.
//! No edits: no live drafts; a run still working after 5 s says `working…`
//! once, then the reply comes.

mod proto;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{
    Adapter, Capabilities, DeliveryError, Hub, Idempotence, Inbound, LengthUnit, Received, render,
};
use crate::core::channel::{
    Actor, ChannelMessage, FailureKind, MessageOrigin, Target, TargetKind, Unit,
};
use crate::core::session::now_millis;
pub use proto::{MAX_LINE, Message, addressed, cap_names, clean, same_nick, text_budget};

/// Lines per unit: one acknowledgement per this many.
const LINES_PER_UNIT: usize = 8;
/// How long a unit's acknowledgement may take.
const ACK_WAIT: Duration = Duration::from_secs(20);
/// How long connecting (and TLS) may take.
const CONNECT_WAIT: Duration = Duration::from_secs(15);
/// The longest line read; a server's lines are 512 bytes, with tags 8 KiB.
const MAX_READ: usize = 16 * 1024;
/// How often a nick taken at connection time is asked for again.
const REGAIN_EVERY: Duration = Duration::from_secs(30);
/// How long a run works before the chat is told it is working.
const WORKING_AFTER: Duration = Duration::from_secs(5);
/// The longest host part of the mask, before the server told the real one.
const HOST_GUESS: usize = 63;

/// What the configuration gives an IRC channel.
#[derive(Debug, Clone)]
pub struct IrcSettings {
    /// `HOST:PORT`.
    pub server: String,
    /// TLS from the first byte, checked with this configuration.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub nick: String,
    pub username: String,
    pub password: Option<String>,
    pub channels: Vec<String>,
}

pub struct Irc {
    name: String,
    account: String,
    settings: IrcSettings,
    /// The connection's writer while registered; `None` otherwise.
    link: Mutex<Option<mpsc::Sender<Outgoing>>>,
    /// Units waiting for the `PONG` of their `PING`, by token.
    acks: Mutex<HashMap<u64, oneshot::Sender<()>>>,
    counter: AtomicU64,
    /// The length of `nick!user@host` as the server relays this client's lines.
    mask_len: AtomicUsize,
    /// The nick the server knows this client by now.
    nick_now: Mutex<String>,
    /// What this connection negotiated; reset as each one starts.
    negotiated: Mutex<Negotiated>,
}

/// The IRCv3 capabilities of one connection and its login.
#[derive(Debug, Default)]
struct Negotiated {
    /// What the server offers (`name` or `name=value`), from `CAP LS`.
    offered: Vec<String>,
    /// Messages carry the sender's account (`account-tag` acknowledged).
    account_tag: bool,
    /// The account SASL logged this client in to (`900`).
    logged_in: Option<String>,
}

/// A line for the writer: paced (messages) or not (protocol), and whether
/// it was written.
struct Outgoing {
    line: String,
    paced: bool,
    written: Option<oneshot::Sender<bool>>,
}

type Reader = Pin<Box<dyn AsyncRead + Send>>;
type Writer = Pin<Box<dyn AsyncWrite + Send>>;

impl Irc {
    pub fn new(name: &str, settings: IrcSettings) -> Result<Self, String> {
        let valid_nick = |nick: &str| {
            !nick.is_empty()
                && nick.len() <= 30
                && !nick.starts_with(|c: char| c.is_ascii_digit() || c == '-')
                && nick
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-[]\\`^{}|_".contains(c))
        };
        if !valid_nick(&settings.nick) {
            return Err(format!(
                "nick {:?} is not an IRC nickname (letters, digits, -[]\\`^{{}}|_, not starting with a digit)",
                settings.nick.chars().take(40).collect::<String>()
            ));
        }
        if settings
            .server
            .rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().is_err())
        {
            return Err(format!(
                "server {:?}: expected HOST:PORT",
                settings.server.chars().take(80).collect::<String>()
            ));
        }
        if let Some(bad) = settings
            .channels
            .iter()
            .find(|c| !proto::is_channel(c) || c.contains([' ', ',', '\x07']) || c.len() > 50)
        {
            return Err(format!(
                "channels: {:?} is not a channel name (#name)",
                bad.chars().take(60).collect::<String>()
            ));
        }
        let mask_guess = settings.nick.len() + 2 + settings.username.len() + 1 + HOST_GUESS;
        Ok(Self {
            name: name.to_owned(),
            account: format!("{}@{}", settings.nick, settings.server),
            nick_now: Mutex::new(settings.nick.clone()),
            negotiated: Mutex::new(Negotiated::default()),
            settings,
            link: Mutex::new(None),
            acks: Mutex::new(HashMap::new()),
            counter: AtomicU64::new(1),
            mask_len: AtomicUsize::new(mask_guess),
        })
    }

    /// The bytes of text one line may carry to any of this client's targets.
    fn line_budget(&self) -> usize {
        let target = self
            .settings
            .channels
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0)
            .max(32);
        text_budget(self.mask_len.load(Ordering::Relaxed), target).max(32)
    }

    /// Queues `line` on the connection; whether it was written.
    async fn write(link: &mpsc::Sender<Outgoing>, line: String, paced: bool) -> bool {
        let (written, done) = oneshot::channel();
        let queued = link
            .send(Outgoing {
                line,
                paced,
                written: Some(written),
            })
            .await;
        queued.is_ok() && done.await.unwrap_or(false)
    }

    /// One connection, from connecting to its end; `Ok` when cancelled.
    async fn session(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let (reader, writer) = self.connect().await?;
        let (out, queue) = mpsc::channel::<Outgoing>(64);
        let writing = tokio::spawn(write_loop(writer, queue));
        let result = self.converse(reader, &out, hub, cancel).await;
        *self.link.lock() = None;
        // Units waiting for this connection's acknowledgement: unknown.
        self.acks.lock().clear();
        drop(out);
        let _ = tokio::time::timeout(Duration::from_secs(2), writing).await;
        result
    }

    async fn connect(&self) -> Result<(Reader, Writer), String> {
        let server = &self.settings.server;
        let stream = tokio::time::timeout(CONNECT_WAIT, tokio::net::TcpStream::connect(server))
            .await
            .map_err(|_| format!("connecting to {server} timed out"))?
            .map_err(|err| format!("cannot connect to {server}: {err}"))?;
        let _ = stream.set_nodelay(true);
        let Some(tls) = &self.settings.tls else {
            let (reader, writer) = tokio::io::split(stream);
            return Ok((Box::pin(reader), Box::pin(writer)));
        };
        let host = server.rsplit_once(':').map_or(server.as_str(), |(h, _)| h);
        let name =
            rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_owned())
                .map_err(|err| format!("server {host}: not a name for TLS: {err}"))?;
        let stream = tokio::time::timeout(
            CONNECT_WAIT,
            tokio_rustls::TlsConnector::from(tls.clone()).connect(name, stream),
        )
        .await
        .map_err(|_| format!("the TLS handshake with {server} timed out"))?
        .map_err(|err| format!("TLS with {server}: {err}"))?;
        let (reader, writer) = tokio::io::split(stream);
        Ok((Box::pin(reader), Box::pin(writer)))
    }

    /// Registers, then reads the connection until it ends or `cancel`.
    async fn converse(
        self: &Arc<Self>,
        reader: Reader,
        out: &mpsc::Sender<Outgoing>,
        hub: &Arc<Hub>,
        cancel: &CancellationToken,
    ) -> Result<(), String> {
        let settings = &self.settings;
        *self.negotiated.lock() = Negotiated::default();
        let mut hello = vec!["CAP LS 302".to_owned()];
        if let Some(password) = &settings.password {
            hello.push(format!("PASS {}", clean(password)));
        }
        hello.push(format!("NICK {}", settings.nick));
        hello.push(format!("USER {} 0 * :Pincer", settings.username));
        for line in hello {
            if !Self::write(out, line, false).await {
                return Err("the connection closed while registering".to_owned());
            }
        }
        *self.nick_now.lock() = settings.nick.clone();
        let started = now_millis();
        let mut numbered = 0u64;
        let mut reader = BufReader::new(reader);
        let mut buffer = Vec::new();
        let mut regain = tokio::time::interval(REGAIN_EVERY);
        regain.tick().await;
        loop {
            // A line read in part before another branch won stays in
            // `buffer`: the read goes on where it stopped.
            let mut limited = (&mut reader).take(MAX_READ as u64);
            let read = tokio::select! {
                _ = cancel.cancelled() => {
                    let _ = Self::write(out, "QUIT :stopping".to_owned(), false).await;
                    return Ok(());
                }
                _ = regain.tick() => {
                    let now = self.nick_now.lock().clone();
                    if now != settings.nick && self.link.lock().is_some() {
                        let _ = out.try_send(Outgoing { line: format!("NICK {}", settings.nick), paced: false, written: None });
                    }
                    continue;
                }
                read = limited.read_until(b'\n', &mut buffer) => read,
            };
            match read {
                Ok(0) => return Err("the server closed the connection".to_owned()),
                Ok(_) if !buffer.ends_with(b"\n") && buffer.len() >= MAX_READ => {
                    return Err(format!(
                        "the server sent a line longer than {MAX_READ} bytes"
                    ));
                }
                Ok(_) => {}
                Err(err) => return Err(format!("reading from the server: {err}")),
            }
            let line = String::from_utf8_lossy(&buffer).into_owned();
            buffer.clear();
            let Some(message) = Message::parse(&line) else {
                continue;
            };
            if let Some(end) = self
                .on_message(&message, out, hub, started, &mut numbered)
                .await
            {
                return Err(end);
            }
        }
    }

    /// One message from the server; `Some(reason)` ends the connection.
    async fn on_message(
        self: &Arc<Self>,
        message: &Message,
        out: &mpsc::Sender<Outgoing>,
        hub: &Arc<Hub>,
        started: i64,
        numbered: &mut u64,
    ) -> Option<String> {
        let settings = &self.settings;
        let control = |line: String| Outgoing {
            line,
            paced: false,
            written: None,
        };
        match message.command.as_str() {
            "PING" => {
                let token = clean(message.trailing().unwrap_or_default());
                let _ = out.send(control(format!("PONG :{token}"))).await;
            }
            "PONG" => {
                let token = message
                    .trailing()
                    .and_then(|t| t.strip_prefix("pincer-ack-"))
                    .and_then(|t| t.parse::<u64>().ok());
                if let Some(token) = token
                    && let Some(waiter) = self.acks.lock().remove(&token)
                {
                    let _ = waiter.send(());
                }
            }
            "CAP" => self.on_cap(message, out).await,
            "AUTHENTICATE" if message.param(0) == Some("+") => {
                use base64::Engine as _;
                let password = settings.password.clone().unwrap_or_default();
                let nick = &settings.nick;
                let plain = base64::engine::general_purpose::STANDARD
                    .encode(format!("{nick}\0{nick}\0{password}"));
                let _ = out.send(control(format!("AUTHENTICATE {plain}"))).await;
            }
            // `900 nick mask ACCOUNT :You are now logged in as ACCOUNT`.
            "900" => {
                self.negotiated.lock().logged_in = message.param(2).map(ToOwned::to_owned);
            }
            // SASL done, or refused: registration goes on either way.
            "903" | "907" => {
                let _ = out.send(control("CAP END".to_owned())).await;
            }
            "902" | "904" | "905" | "906" => {
                let error = format!(
                    "the server refused the SASL PLAIN login to account {} ({} {}): connected without it",
                    settings.nick,
                    message.command,
                    clean(message.trailing().unwrap_or_default())
                        .chars()
                        .take(120)
                        .collect::<String>()
                );
                tracing::warn!(channel = %self.name, server = %settings.server, %error, "IRC login refused");
                // Shown by `pincer channels status`; `001` brings it up again.
                hub.down(&error);
                let _ = out.send(control("CAP END".to_owned())).await;
            }
            "001" => {
                if let Some(nick) = message.param(0) {
                    *self.nick_now.lock() = nick.to_owned();
                }
                let (account, account_tag) = {
                    let negotiated = self.negotiated.lock();
                    (
                        negotiated.logged_in.clone().unwrap_or_default(),
                        negotiated.account_tag,
                    )
                };
                tracing::info!(channel = %self.name, server = %settings.server, nick = %self.nick_now.lock(), %account, senders_by_account = account_tag, "IRC connected");
                hub.up();
                for channel in &settings.channels {
                    let _ = out.send(control(format!("JOIN {channel}"))).await;
                }
                *self.link.lock() = Some(out.clone());
            }
            "433" | "432" | "436" if self.link.lock().is_none() => {
                // The nick is taken (or refused) while registering: another.
                let taken = message.param(1).unwrap_or(&settings.nick);
                let next = format!("{taken}_");
                *self.nick_now.lock() = next.clone();
                let _ = out.send(control(format!("NICK {next}"))).await;
            }
            "NICK" => {
                let now = self.nick_now.lock().clone();
                if message.nick().is_some_and(|n| same_nick(n, &now))
                    && let Some(new) = message.trailing()
                {
                    *self.nick_now.lock() = new.to_owned();
                }
            }
            "JOIN" => {
                let now = self.nick_now.lock().clone();
                if message.nick().is_some_and(|n| same_nick(n, &now))
                    && let Some(prefix) = &message.prefix
                {
                    self.mask_len.store(prefix.len(), Ordering::Relaxed);
                    tracing::info!(channel = %self.name, joined = %message.param(0).unwrap_or_default(), "IRC channel joined");
                }
            }
            "KICK" => {
                let now = self.nick_now.lock().clone();
                if message.param(1).is_some_and(|n| same_nick(n, &now))
                    && let Some(channel) = message.param(0)
                {
                    tracing::warn!(channel = %self.name, kicked_from = %channel, "kicked from an IRC channel; joining again");
                    let _ = out.send(control(format!("JOIN {channel}"))).await;
                }
            }
            "ERROR" => {
                return Some(format!(
                    "the server ended the connection: {}",
                    message.trailing().unwrap_or_default()
                ));
            }
            "PRIVMSG" => self.on_privmsg(message, hub, started, numbered).await,
            _ => {}
        }
        None
    }

    /// Capability negotiation: `account-tag` where offered, `sasl` where
    /// offered with PLAIN and a password is set; `CAP END` once nothing is
    /// left to settle before registration.
    async fn on_cap(&self, message: &Message, out: &mpsc::Sender<Outgoing>) {
        let control = |line: String| Outgoing {
            line,
            paced: false,
            written: None,
        };
        let registered = self.link.lock().is_some();
        let list = message.trailing().unwrap_or_default();
        match message.param(1) {
            Some("LS") => {
                // `CAP * LS * :…` continues on the next line; the last has no `*`.
                let more = message.params.len() > 3 && message.param(2) == Some("*");
                let wanted = {
                    let mut negotiated = self.negotiated.lock();
                    negotiated
                        .offered
                        .extend(list.split(' ').filter(|c| !c.is_empty()).map(str::to_owned));
                    if more {
                        return;
                    }
                    self.wanted(&negotiated, !registered)
                };
                let line = if wanted.is_empty() {
                    "CAP END".to_owned()
                } else {
                    format!("CAP REQ :{}", wanted.join(" "))
                };
                if !registered || !wanted.is_empty() {
                    let _ = out.send(control(line)).await;
                }
            }
            // A capability offered later (`cap-notify`): asked for if wanted.
            Some("NEW") => {
                let wanted = {
                    let mut negotiated = self.negotiated.lock();
                    negotiated
                        .offered
                        .extend(list.split(' ').filter(|c| !c.is_empty()).map(str::to_owned));
                    self.wanted(&negotiated, false)
                };
                if !wanted.is_empty() {
                    let line = format!("CAP REQ :{}", wanted.join(" "));
                    let _ = out.send(control(line)).await;
                }
            }
            Some("DEL") => {
                let mut negotiated = self.negotiated.lock();
                for cap in cap_names(list) {
                    negotiated
                        .offered
                        .retain(|c| cap_names(c).next() != Some(cap));
                    if cap == "account-tag" {
                        negotiated.account_tag = false;
                    }
                }
            }
            Some("ACK") => {
                let mut sasl = false;
                {
                    let mut negotiated = self.negotiated.lock();
                    for cap in cap_names(list) {
                        match cap {
                            "account-tag" => negotiated.account_tag = true,
                            "-account-tag" => negotiated.account_tag = false,
                            "sasl" => sasl = true,
                            _ => {}
                        }
                    }
                }
                if sasl && !registered {
                    let _ = out.send(control("AUTHENTICATE PLAIN".to_owned())).await;
                } else if !registered {
                    let _ = out.send(control("CAP END".to_owned())).await;
                }
            }
            Some("NAK") if !registered => {
                let _ = out.send(control("CAP END".to_owned())).await;
            }
            _ => {}
        }
    }

    /// The capabilities of `offered` to ask for (`sasl` only `before`
    /// registration), those already acknowledged left out.
    fn wanted(&self, negotiated: &Negotiated, before: bool) -> Vec<&'static str> {
        let offers = |name: &str| {
            negotiated
                .offered
                .iter()
                .find(|c| cap_names(c).next() == Some(name))
        };
        let mut wanted = Vec::new();
        // `sasl=EXTERNAL,PLAIN` names its mechanisms; a bare `sasl` does not.
        let plain = offers("sasl").is_some_and(|cap| {
            cap.split_once('=')
                .is_none_or(|(_, mechanisms)| mechanisms.split(',').any(|m| m == "PLAIN"))
        });
        if before && plain && self.settings.password.is_some() {
            wanted.push("sasl");
        }
        if offers("account-tag").is_some() && !negotiated.account_tag {
            wanted.push("account-tag");
        }
        wanted
    }

    /// A message to this client or addressed to it in a channel, recorded.
    async fn on_privmsg(
        &self,
        message: &Message,
        hub: &Arc<Hub>,
        started: i64,
        numbered: &mut u64,
    ) {
        let (Some(sender), Some(to), Some(text)) =
            (message.nick(), message.param(0), message.trailing())
        else {
            return;
        };
        let now = self.nick_now.lock().clone();
        if same_nick(sender, &now) || text.starts_with('\x01') {
            // Its own line, or CTCP (ACTION, VERSION): not for the agent.
            return;
        }
        let by_account = self.negotiated.lock().account_tag;
        let (id, account) = sender_id(sender, by_account.then(|| message.account()));
        let (target, body) = if proto::is_channel(to) {
            let Some(body) = addressed(text, &now).or_else(|| addressed(text, &self.settings.nick))
            else {
                return;
            };
            (
                Target {
                    kind: TargetKind::Group,
                    id: to.to_owned(),
                    thread: None,
                },
                body,
            )
        } else {
            (
                Target {
                    kind: TargetKind::Direct,
                    id: sender.to_owned(),
                    thread: account.map(ToOwned::to_owned),
                },
                text,
            )
        };
        if body.trim().is_empty() {
            return;
        }
        *numbered += 1;
        let inbound = Inbound::Message(ChannelMessage {
            id: format!("{started}:{numbered}"),
            channel: self.name.clone(),
            account: self.account.clone(),
            target,
            sender: Some(Actor {
                id,
                name: Some(sender.to_owned()),
                is_bot: false,
            }),
            body: body.to_owned(),
            attachments: Vec::new(),
            relation: None,
            origin: MessageOrigin::User,
            at: now_millis(),
        });
        if let Received::Failed(reason) = hub.receive(inbound, None).await {
            tracing::error!(channel = %self.name, %reason, "an IRC message could not be recorded and is lost: IRC does not send it again");
        }
    }
}

/// Who a sender is to the hub, and their account: their nick where the
/// server does not report accounts (`reported` is `None`), else their
/// account when they are logged in to one, and `~NICK` when not (no account
/// name has a `~`, so no `allow` entry or pairing of an account matches it).
fn sender_id<'a>(nick: &str, reported: Option<Option<&'a str>>) -> (String, Option<&'a str>) {
    match reported {
        None => (nick.to_owned(), None),
        Some(Some(account)) => (account.to_owned(), Some(account)),
        Some(None) => (format!("~{nick}"), None),
    }
}

/// Writes queued lines, pacing messages: a burst of three, then a line a
/// second, a line over 256 bytes counting for one more per 256.
async fn write_loop(mut writer: Writer, mut queue: mpsc::Receiver<Outgoing>) {
    const BURST: f64 = 3.0;
    let mut credits = BURST;
    let mut last = Instant::now();
    while let Some(outgoing) = queue.recv().await {
        if outgoing.paced {
            let now = Instant::now();
            credits = (credits + now.duration_since(last).as_secs_f64()).min(BURST);
            last = now;
            let cost = (outgoing.line.len() as f64 / 256.0).ceil().max(1.0);
            if credits < cost {
                tokio::time::sleep(Duration::from_secs_f64(cost - credits)).await;
                credits = cost;
                last = Instant::now();
            }
            credits -= cost;
        }
        let mut bytes = outgoing.line.into_bytes();
        bytes.truncate(MAX_LINE - 2);
        bytes.extend_from_slice(b"\r\n");
        let written = writer.write_all(&bytes).await.is_ok() && writer.flush().await.is_ok();
        if let Some(done) = outgoing.written {
            let _ = done.send(written);
        }
        if !written {
            return;
        }
    }
    let _ = writer.shutdown().await;
}

impl Adapter for Irc {
    fn channel(&self) -> &str {
        &self.name
    }

    fn account(&self) -> &str {
        &self.account
    }

    fn kind(&self) -> &'static str {
        "irc"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // A line's text, as relayed within 512 bytes.
            max_len: self.line_budget(),
            length_unit: LengthUnit::Bytes,
            edit: false,
            delete: false,
            buttons: false,
            reactions: false,
            threads: false,
            files: false,
            edit_interval: Duration::ZERO,
            markup: None,
            working_after: Some(WORKING_AFTER),
            // IRC has no message ids: a resend could repeat the lines.
            idempotent: Idempotence::default(),
        }
    }

    /// Plain text, a line per line, each cut to fit the relayed 512 bytes,
    /// `LINES_PER_UNIT` lines a unit.
    fn render(&self, markdown: &str) -> Vec<Unit> {
        let budget = self.line_budget();
        let lines: Vec<String> = render::plain(markdown)
            .lines()
            .map(clean)
            .filter(|line| !line.trim().is_empty())
            .flat_map(|line| render::split_bytes(&line, budget))
            .collect();
        lines
            .chunks(LINES_PER_UNIT)
            .map(|chunk| Unit::plain(chunk.join("\n")))
            .collect()
    }

    /// Nicks and accounts compare as IRC compares them: case folded by the
    /// `rfc1459` casemapping (`[]\~` are the capitals of `{}|^`).
    fn sender_key(&self, id: &str) -> String {
        proto::fold(id)
    }

    /// `#channel` or a nick.
    fn target(&self, to: &str) -> Result<Target, String> {
        let to = to.trim();
        if to.is_empty() || to.contains([' ', ',', '\r', '\n', '\0', '/']) {
            return Err("expected #channel or a nick".to_owned());
        }
        Ok(Target {
            kind: if proto::is_channel(to) {
                TargetKind::Group
            } else {
                TargetKind::Direct
            },
            id: to.to_owned(),
            thread: None,
        })
    }

    fn send<'a>(
        &'a self,
        target: &'a Target,
        unit: &'a Unit,
        _reply_to: Option<&'a str>,
        _idempotency_key: &'a str,
    ) -> BoxFuture<'a, Result<String, DeliveryError>> {
        Box::pin(async move {
            let link = self.link.lock().clone().ok_or_else(|| {
                DeliveryError::new(FailureKind::Transient, "not connected to the IRC server")
            })?;
            let to = clean(&target.id).replace(' ', "");
            let budget = self.line_budget();
            let lines: Vec<String> = unit
                .text
                .split('\n')
                .map(clean)
                .filter(|line| !line.trim().is_empty())
                .flat_map(|line| render::split_bytes(&line, budget))
                .collect();
            let token = self.counter.fetch_add(1, Ordering::Relaxed);
            let (acked, ack) = oneshot::channel();
            self.acks.lock().insert(token, acked);
            let unknown = |message: &str| DeliveryError::new(FailureKind::Unknown, message);
            for (i, line) in lines.iter().enumerate() {
                if !Self::write(&link, format!("PRIVMSG {to} :{line}"), true).await {
                    self.acks.lock().remove(&token);
                    return Err(if i == 0 {
                        DeliveryError::new(
                            FailureKind::Transient,
                            "the IRC connection closed before the message went out",
                        )
                    } else {
                        unknown("the IRC connection closed part way through the message")
                    });
                }
            }
            if !Self::write(&link, format!("PING :pincer-ack-{token}"), false).await {
                self.acks.lock().remove(&token);
                return Err(unknown(
                    "the IRC connection closed before the server acknowledged the message",
                ));
            }
            match tokio::time::timeout(ACK_WAIT, ack).await {
                Ok(Ok(())) => Ok(format!("irc:{token}")),
                Ok(Err(_)) => Err(unknown(
                    "the IRC connection closed before the server acknowledged the message",
                )),
                Err(_) => {
                    self.acks.lock().remove(&token);
                    Err(unknown(
                        "the IRC server did not acknowledge the message in time",
                    ))
                }
            }
        })
    }

    fn edit<'a>(
        &'a self,
        _target: &'a Target,
        _platform_id: &'a str,
        _unit: &'a Unit,
    ) -> BoxFuture<'a, Result<(), DeliveryError>> {
        Box::pin(async {
            Err(DeliveryError::new(
                FailureKind::Permission,
                "IRC cannot edit a message",
            ))
        })
    }

    /// Connects and reads until `cancel`, connecting again after a lost
    /// connection: 1 s, doubling to 60 s (back to 1 s after a minute up).
    fn receive(
        self: Arc<Self>,
        hub: Arc<Hub>,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let mut backoff = Duration::from_secs(1);
            loop {
                let began = Instant::now();
                match self.session(&hub, &cancel).await {
                    Ok(()) => return,
                    Err(err) => {
                        tracing::warn!(channel = %self.name, server = %self.settings.server, error = %err, retry_in_secs = backoff.as_secs(), "IRC connection lost");
                        hub.down(&err);
                    }
                }
                if began.elapsed() > Duration::from_secs(60) {
                    backoff = Duration::from_secs(1);
                }
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn irc(channels: &[&str]) -> Irc {
        Irc::new(
            "irc",
            IrcSettings {
                server: "127.0.0.1:6667".into(),
                tls: None,
                nick: "pincer".into(),
                username: "pincer".into(),
                password: None,
                channels: channels.iter().map(|c| (*c).to_owned()).collect(),
            },
        )
        .unwrap()
    }

    #[test]
    fn settings_are_checked() {
        let settings = |nick: &str, server: &str, channel: &str| IrcSettings {
            server: server.into(),
            tls: None,
            nick: nick.into(),
            username: "u".into(),
            password: None,
            channels: vec![channel.into()],
        };
        assert!(Irc::new("i", settings("pincer", "h:6667", "#a")).is_ok());
        let err = |s| Irc::new("i", s).err().unwrap();
        assert!(err(settings("9lives", "h:6667", "#a")).contains("nick"));
        assert!(err(settings("a b", "h:6667", "#a")).contains("nick"));
        assert!(err(settings("p", "h", "#a")).contains("HOST:PORT"));
        assert!(err(settings("p", "h:x", "#a")).contains("HOST:PORT"));
        assert!(err(settings("p", "h:1", "team")).contains("channel"));
    }

    #[test]
    fn replies_render_as_lines_that_fit_and_carry_no_commands() {
        let adapter = irc(&["#team"]);
        let budget = adapter.line_budget();
        let long = "word ".repeat(200);
        let markdown = format!("# Done\n\n**Bold** and `code`\r\nQUIT :bye\n\n{long}");
        let units = adapter.render(&markdown);
        let lines: Vec<&str> = units.iter().flat_map(|u| u.text.split('\n')).collect();
        assert_eq!(lines[0], "Done");
        // A line break ends a line: the rest is the next message's text.
        assert_eq!(lines[1], "Bold and `code`");
        assert_eq!(lines[2], "QUIT :bye");
        assert!(lines.iter().all(|l| l.len() <= budget && !l.contains('\r')));
        assert!(lines.len() > 3);
        assert!(
            units
                .iter()
                .all(|u| u.text.split('\n').count() <= LINES_PER_UNIT)
        );
        // The budget, with the mask as guessed, fits the relayed line.
        let guessed = "pincer!~pincer@".len() + HOST_GUESS;
        assert!(
            1 + guessed + 1 + "PRIVMSG #team :".len() + budget + 2 <= MAX_LINE,
            "{budget}"
        );
    }

    #[test]
    fn account_tag_is_asked_for_where_offered_and_sasl_plain_with_a_password() {
        let offered = |caps: &str, account_tag: bool| Negotiated {
            offered: caps.split(' ').map(str::to_owned).collect(),
            account_tag,
            logged_in: None,
        };
        let mut with_password = irc(&[]);
        with_password.settings.password = Some("pw".into());
        let without = irc(&[]);
        let all = offered("multi-prefix account-tag sasl=EXTERNAL,PLAIN", false);
        assert_eq!(with_password.wanted(&all, true), ["sasl", "account-tag"]);
        assert_eq!(without.wanted(&all, true), ["account-tag"]);
        // After registration SASL is not asked for; acknowledged is not asked again.
        assert_eq!(with_password.wanted(&all, false), ["account-tag"]);
        let acked = offered("account-tag sasl", true);
        assert_eq!(with_password.wanted(&acked, true), ["sasl"]);
        // SASL without PLAIN among its mechanisms is not asked for.
        let external = offered("sasl=EXTERNAL", false);
        assert!(with_password.wanted(&external, true).is_empty());
        // ngIRCd: nothing to ask for (`CAP END` at once).
        assert!(
            with_password
                .wanted(&offered("multi-prefix", false), true)
                .is_empty()
        );
    }

    #[test]
    fn senders_are_accounts_where_the_server_reports_them() {
        assert_eq!(sender_id("alice", None), ("alice".to_owned(), None));
        assert_eq!(
            sender_id("ally", Some(Some("alice"))),
            ("alice".to_owned(), Some("alice"))
        );
        assert_eq!(sender_id("alice", Some(None)), ("~alice".to_owned(), None));
    }

    #[test]
    fn targets_are_channels_or_nicks() {
        let adapter = irc(&[]);
        assert_eq!(adapter.target("#team").unwrap().kind, TargetKind::Group);
        assert_eq!(adapter.target("alice").unwrap().kind, TargetKind::Direct);
        assert!(adapter.target("a b").is_err());
        assert!(adapter.target("").is_err());
    }
}
