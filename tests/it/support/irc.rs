//! A real IRC server for tests, ngIRCd, and a person on it.
//!
//! [`IrcServer::start`] writes an `ngircd.conf` of its own into a temporary
//! directory and runs `ngircd --nodaemon --config FILE` in the foreground
//! on a free 127.0.0.1 port (and, with TLS, a second one for TLS only),
//! waiting until the server answers. It is stopped, and its directory
//! removed, when dropped; a watchdog does both when the test process ends
//! without dropping it (the server a test binary shares, [`IrcServer::shared`],
//! lives in a static, which is never dropped). Run as root, ngIRCd drops to
//! the `nobody` user by itself once it has read its configuration, keys and
//! bound its ports (it refuses to serve as root). The binary is `ngircd` on
//! `PATH` or `/usr/sbin/ngircd`; `scripts/test-deps.sh` installs Debian's
//! `ngircd` where it is missing. Certificates are made with the `openssl`
//! command line, as the PostgreSQL harness does.
//!
//! [`IrcUser`] is the human side: a blocking client over std TCP (or rustls,
//! for the TLS port) that registers, answers `PING`, joins, talks and reads
//! what the server relays, parsed per RFC 1459/2812 ([`IrcMessage`]).
//!
//! # What ngIRCd 26.1 (Debian 12) does, found with these tests and its source
//!
//! - **Line length.** A line a client sends may be at most 512 bytes
//!   *including* the CR LF (RFC 2812 §2.3, ngIRCd's `COMMAND_LEN` 513 with
//!   the NUL). One byte more and the server closes the connection with
//!   `ERROR :Request too long`; nothing of the line is relayed.
//! - **Relaying.** The server relays a `PRIVMSG`/`NOTICE` with the sender's
//!   prefix put in front: `:nick!~user@host PRIVMSG target :text`. The user
//!   part is the `USER` name with a `~` in front (no ident is checked: the
//!   configuration turns `Ident` and `PAM` off), the host is `127.0.0.1`
//!   (`DNS = no`: no reverse lookup). A relayed line longer than 512 bytes is
//!   cut to 510 bytes, the last five being `[CUT]`, plus CR LF. So a bot
//!   whose line is relayed whole must keep
//!   `len(":" + nick + "!~" + user + "@" + host + " ") + len("PRIVMSG " + target + " :" + text) + 2 <= 512`;
//!   its own prefix is in the `JOIN` the server echoes back
//!   ([`IrcUser::wait_for_join`] returns it) and in `001`'s welcome text.
//! - **Flood protection** (for a user without mode `+F`, which only IRC
//!   operators may set). The server never disconnects a client for sending
//!   too fast; it delays it: while a connection has a *penalty* the server
//!   does not read from it, and lines wait (TCP backpressure once a line's
//!   worth, 512 bytes, is buffered). Penalties of 1 s come from (a) more
//!   than three complete lines waiting at once (ngIRCd handles at most three commands
//!   of a user per pass of its loop), and (b) more than 256 bytes read from
//!   the client within one wall-clock second after its first read in that
//!   second. Some commands cost more (`WHO` 1 s, each extra target of a
//!   `PRIVMSG a,b` 1 s, a failed `OPER` 10 s). Measured here: 20 short
//!   `PRIVMSG`s written at once are relayed over 6.7 s (three a second);
//!   ten 400-byte lines at ten a second over 4.7 s; one 400-byte line every
//!   0.5 s, one every second, or short lines three a second are not
//!   delayed. So a client that keeps to one line a second is never delayed,
//!   and a burst of three short lines is free. The server does disconnect a
//!   client it cannot write to: more than 32 KiB waiting to be sent to it
//!   (`Write buffer space exhausted`).
//!   `MaxPenaltyTime = 0`, which this harness writes unless
//!   [`IrcOptions::flood_protection`] is set, turns the penalties off, so
//!   the tests' own users are never slowed; a test of Pincer's pacing asks
//!   for the real rules.
//! - **Registration.** `PASS` (when a password is set), `NICK`, `USER`; the
//!   server answers `001`…`005`, the `LUSERS` numerics and the MOTD (`376`,
//!   or `422` without one). A wrong or missing server password gets
//!   `ERROR :Access denied: Bad password?` and the connection closed. The
//!   harness allows nicknames of up to 30 characters (`MaxNickLength`; the
//!   server's default is RFC 2812's 9) and any number of connections from
//!   127.0.0.1 (the default is 5).
//! - **No SASL.** ngIRCd's only IRCv3 capability is `multi-prefix` (`CAP LS`
//!   lists nothing else); authentication is the server password (`PASS`)
//!   or PAM. No message tags are ever sent.
//! - **Keepalive.** After 120 s without data from a client the server sends
//!   `PING :irc.pincer.test` and closes the connection when no `PONG` comes
//!   within 20 s (`PingTimeout`, `PongTimeout`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// The server's name, the prefix of what it says itself.
pub const SERVER_NAME: &str = "irc.pincer.test";

/// How long a server may take to answer after it is started.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Free ports tried when another process takes the one picked first.
const PORT_ATTEMPTS: usize = 5;

/// How long a client waits for the server by default.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// How the server is set up.
#[derive(Clone, Debug, Default)]
pub struct IrcOptions {
    /// The server password every client must send with `PASS`.
    pub password: Option<String>,
    /// A second port taking TLS only ([`IrcServer::tls_port`]), with a
    /// certificate for `localhost` and 127.0.0.1 signed by a CA of the
    /// server's own ([`IrcServer::ca_path`]).
    pub tls: bool,
    /// ngIRCd's flood protection as it ships (penalties, see the module's
    /// documentation); off by default (`MaxPenaltyTime = 0`), so tests are
    /// not slowed.
    pub flood_protection: bool,
}

/// One running (or stopped) ngIRCd.
pub struct IrcServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    tls_port: Option<u16>,
    options: IrcOptions,
    child: Mutex<Option<Child>>,
}

/// The ngIRCd binary: `PATH`'s, else Debian's `/usr/sbin/ngircd`.
fn binary() -> PathBuf {
    on_path("ngircd")
        .or_else(|| Some(PathBuf::from("/usr/sbin/ngircd")).filter(|p| p.is_file()))
        .unwrap_or_else(|| {
            panic!(
                "ngIRCd is not installed (no ngircd on PATH nor in /usr/sbin): \
                 run `bash scripts/test-deps.sh`, which installs Debian's ngircd"
            )
        })
}

/// A program on `PATH`, else in `/usr/sbin` or `/sbin` (not on a non-root
/// user's `PATH` on Debian).
pub fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|file| file.is_file())
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The last lines of a log file, for failure messages.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `text` quoted for `sh`.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs `command`, panicking with its error output unless it succeeds.
pub fn run_ok(command: &mut Command, what: &str) {
    let out = command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {what}: {err}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
}

/// Where [`make_certificates`] put a CA and a server certificate.
#[derive(Clone, Debug)]
pub struct Certificates {
    /// The CA a client checks the server against.
    pub ca: PathBuf,
    /// The server's certificate (for `localhost` and 127.0.0.1) and key.
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Makes a CA and a server certificate for `localhost` and 127.0.0.1 signed
/// by it, in `dir`, with the `openssl` command line (P-256 keys: fast to
/// make; rustls, GnuTLS and OpenSSL take them). The files can be read by
/// anyone, so a server that drops root can read them.
pub fn make_certificates(dir: &Path) -> Certificates {
    let openssl = |args: &[&str]| {
        run_ok(
            Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .stdin(Stdio::null()),
            "openssl (run `bash scripts/test-deps.sh`, which installs it)",
        );
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    openssl(
        &[
            &["req", "-x509"][..],
            &ec,
            &[
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=pincer test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.crt",
            ],
        ]
        .concat(),
    );
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = DNS:localhost, IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
         keyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n",
    )
    .unwrap();
    openssl(
        &[
            &["req"][..],
            &ec,
            &[
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        ]
        .concat(),
    );
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "server.ext",
        "-out",
        "server.crt",
    ]);
    for file in ["ca.crt", "server.crt", "server.key"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    Certificates {
        ca: dir.join("ca.crt"),
        cert: dir.join("server.crt"),
        key: dir.join("server.key"),
    }
}

/// A rustls client configuration trusting only the CA at `ca` (a PEM file).
pub fn tls_client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Starts a watchdog: once process `pid` (the test process) has ended, it
/// stops every process whose id is in one of `pid_files` (files in `dir`,
/// written by the harness as it starts them) and whose command line names
/// `dir` (so a reused process id is left alone), with its process group —
/// `TERM`, then `KILL` a second later — and removes `dir`; it ends without doing anything once
/// `dir` is gone (the server was dropped). A detached `sh` that polls twice
/// a second, in a process group of its own, so that a Ctrl-C or a kill of
/// the test process's group does not take it along.
pub fn watch(dir: &Path, pid_files: &[&str], pid: u32, what: &str) {
    let quoted = shell_quote(&dir.display().to_string());
    let files: Vec<String> = pid_files
        .iter()
        .map(|f| shell_quote(&dir.join(f).display().to_string()))
        .collect();
    let files = files.join(" ");
    let script = format!(
        "(while kill -0 {pid} 2>/dev/null && [ -d {quoted} ]; do sleep 0.5; done; \
         if [ -d {quoted} ]; then \
           pids=; for f in {files}; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); \
             tr '\\0' ' ' </proc/$p/cmdline 2>/dev/null | grep -qF {quoted} && pids=\"$pids $p\"; done; \
           [ -z \"$pids\" ] || {{ for p in $pids; do kill -TERM -$p $p; done; sleep 1; \
             for p in $pids; do kill -KILL -$p $p; done; }}; \
           rm -rf {quoted}; fi) </dev/null >/dev/null 2>&1 &"
    );
    // The outer `sh` returns at once; the loop is left to init.
    run_ok(
        Command::new("sh")
            .args(["-c", &script])
            .current_dir("/")
            .stdin(Stdio::null())
            .process_group(0),
        &format!("sh (the watchdog of {what})"),
    );
}

/// Stops a server started in a process group of its own
/// (`process_group(0)`, as every harness here starts them): `SIGTERM` to
/// the group, `SIGKILL` when its leader has not ended within `grace`; reaps
/// the leader, then kills what is left of the group (a Dovecot's `imap`
/// processes can outlive their master by seconds).
pub fn terminate(child: &mut Child, grace: Duration) {
    let group = -i32::try_from(child.id()).unwrap();
    // SAFETY: kill has no memory preconditions; `group` is the process
    // group of our own unreaped child.
    let signal = |sig| unsafe { libc::kill(group, sig) };
    if child.try_wait().ok().flatten().is_none() {
        signal(libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && child.try_wait().ok().flatten().is_none() {
            std::thread::sleep(Duration::from_millis(10));
        }
        signal(libc::SIGKILL);
        let _ = child.wait();
    }
    // The rest of the group, told to go with the leader, has half a second
    // (an idling Dovecot `imap` process takes ten).
    let deadline = Instant::now() + Duration::from_millis(500);
    while signal(0) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    signal(libc::SIGKILL);
}

impl IrcServer {
    /// A server of its own, set up as `options` say.
    pub fn start(options: IrcOptions) -> Self {
        let bin = binary();
        let dir = tempfile::Builder::new()
            .prefix("pincer-irc-")
            .tempdir()
            .unwrap();
        let server = Self {
            dir,
            bin,
            port: 0,
            tls_port: None,
            options,
            child: Mutex::new(None),
        };
        // Before anything runs: a test process killed mid-start leaves nothing.
        watch(
            server.dir.path(),
            &["ngircd.pid"],
            std::process::id(),
            "an ngIRCd test server",
        );
        if server.options.tls {
            make_certificates(server.dir.path());
        }
        server.start_on_free_ports()
    }

    /// A plain server (no password, no TLS, no flood penalties).
    pub fn start_default() -> Self {
        Self::start(IrcOptions::default())
    }

    fn start_on_free_ports(mut self) -> Self {
        for attempt in 1..=PORT_ATTEMPTS {
            self.port = super::free_port();
            self.tls_port = self.options.tls.then(super::free_port);
            self.write_config();
            match self.try_start() {
                Ok(()) => return self,
                // Another process took a port between our probe and the
                // server's bind: others.
                Err(why) if attempt < PORT_ATTEMPTS && why.contains("Can't bind") => {}
                Err(why) => panic!("ngIRCd did not start on port {}: {why}", self.port),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("ngircd.conf")
    }

    /// The server's output (its log: ngIRCd logs to stderr in the foreground).
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("ngircd.log")
    }

    /// The temporary directory: configuration, log, certificates.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn write_config(&self) {
        let mut conf = format!(
            "# Written by tests/it/support/irc.rs\n\
             [Global]\n\
             Name = {SERVER_NAME}\n\
             Info = Pincer test server\n\
             AdminInfo1 = Pincer tests\n\
             AdminInfo2 = 127.0.0.1\n\
             AdminEMail = tests@pincer.test\n\
             Listen = 127.0.0.1\n\
             Ports = {}\n\
             MotdPhrase = Pincer test server\n\
             {}\
             [Limits]\n\
             MaxConnectionsIP = 0\n\
             MaxJoins = 0\n\
             MaxNickLength = 30\n\
             PingTimeout = 120\n\
             PongTimeout = 20\n\
             {}\
             [Options]\n\
             DNS = no\n\
             Ident = no\n\
             PAM = no\n",
            self.port,
            self.options
                .password
                .as_ref()
                .map(|p| format!("Password = {p}\n"))
                .unwrap_or_default(),
            if self.options.flood_protection {
                ""
            } else {
                "MaxPenaltyTime = 0\n"
            },
        );
        if let Some(tls_port) = self.tls_port {
            let dir = self.dir.path();
            conf.push_str(&format!(
                "[SSL]\nCertFile = {}\nKeyFile = {}\nPorts = {tls_port}\n",
                dir.join("server.crt").display(),
                dir.join("server.key").display(),
            ));
        }
        std::fs::write(self.config_path(), conf).unwrap();
    }

    /// Starts `ngircd` and waits until it answers; the failure (the log's
    /// tail) otherwise, the server stopped.
    fn try_start(&self) -> Result<(), String> {
        let mut slot = self.child.lock().unwrap();
        assert!(slot.is_none(), "the IRC server is already running");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let logged = log.metadata().unwrap().len();
        let mut child = Command::new(&self.bin)
            .process_group(0)
            .arg("--nodaemon")
            .arg("--config")
            .arg(self.config_path())
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.bin.display()));
        std::fs::write(self.dir.path().join("ngircd.pid"), child.id().to_string()).unwrap();
        let new_log = || {
            let log = std::fs::read(self.log_path()).unwrap_or_default();
            String::from_utf8_lossy(log.get(usize::try_from(logged).unwrap()..).unwrap_or(&[]))
                .into_owned()
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!(
                    "ngircd exited ({status})\n--- {} ---\n{}",
                    self.log_path().display(),
                    new_log()
                ));
            }
            let log = new_log();
            // A port it could not bind: ngIRCd goes on with the others.
            if log.contains("Can't bind") {
                terminate(&mut child, Duration::from_secs(5));
                return Err(format!("Can't bind\n{log}"));
            }
            if log.contains("ready.") && self.answers() {
                *slot = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                terminate(&mut child, Duration::from_secs(5));
                return Err(format!(
                    "no answer within {READY_WITHIN:?}\n--- {} ---\n{log}",
                    self.log_path().display()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the plain port takes a connection and the server answers a
    /// line on it (`451 … :Connection not registered` to a `PING`), and the
    /// TLS port takes a connection.
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(self.addr()) else {
            return false;
        };
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        if stream.write_all(b"PING :ready\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 512];
        let answered = matches!(stream.read(&mut buf), Ok(n) if n > 0);
        let _ = stream.write_all(b"QUIT\r\n");
        answered
            && self
                .tls_port
                .is_none_or(|port| TcpStream::connect(("127.0.0.1", port)).is_ok())
    }

    /// Stops the server (`SIGTERM`: it says `ERROR :Server going down` to
    /// every client and closes). Stopping a stopped server does nothing.
    pub fn stop(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            terminate(&mut child, Duration::from_secs(10));
        }
        let _ = std::fs::remove_file(self.dir.path().join("ngircd.pid"));
    }

    /// Starts the server again after [`IrcServer::stop`] (or stops it
    /// first): same configuration, same ports. A port still held for a
    /// moment by the old connections is tried again until it binds.
    pub fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            match self.try_start() {
                Ok(()) => return,
                Err(why) if why.contains("Can't bind") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(why) => panic!("ngIRCd did not start again on port {}: {why}", self.port),
            }
        }
    }

    /// Whether the server process is running.
    pub fn is_running(&self) -> bool {
        self.child
            .lock()
            .unwrap()
            .as_mut()
            .is_some_and(|child| child.try_wait().unwrap().is_none())
    }

    /// The plain port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The plain port's address, 127.0.0.1.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The TLS port, when started with [`IrcOptions::tls`].
    pub fn tls_port(&self) -> Option<u16> {
        self.tls_port
    }

    /// The TLS port's address; panics without TLS.
    pub fn tls_addr(&self) -> SocketAddr {
        SocketAddr::from((
            [127, 0, 0, 1],
            self.tls_port.expect("the server was started without TLS"),
        ))
    }

    /// The CA certificate (PEM) the TLS port's certificate is signed by.
    pub fn ca_path(&self) -> PathBuf {
        assert!(self.options.tls, "the server was started without TLS");
        self.dir.path().join("ca.crt")
    }

    /// The server password, if any.
    pub fn password(&self) -> Option<&str> {
        self.options.password.as_deref()
    }

    pub fn options(&self) -> &IrcOptions {
        &self.options
    }

    /// The server this test binary shares (plain, no password, no flood
    /// penalties), started on first use: tests sharing it use nicknames and
    /// channels of their own. Never dropped; its watchdog stops it when the
    /// test process exits.
    pub fn shared() -> &'static IrcServer {
        static SHARED: OnceLock<IrcServer> = OnceLock::new();
        SHARED.get_or_init(IrcServer::start_default)
    }
}

impl Drop for IrcServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.get_mut().unwrap().take() {
            terminate(&mut child, Duration::from_secs(5));
        }
    }
}

/// One IRC line, parsed per RFC 1459/2812 (with IRCv3 message tags, which
/// ngIRCd never sends, understood when present).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IrcMessage {
    /// The line as received, without CR LF (invalid UTF-8 replaced).
    pub raw: String,
    /// The line's length in bytes as received, without CR LF.
    pub len: usize,
    /// IRCv3 tags (`@a=b;c`), unescaped; empty when absent.
    pub tags: Vec<(String, String)>,
    /// The prefix without its `:` (`nick!user@host` or a server name).
    pub prefix: Option<String>,
    /// The command, upper-cased, or a three-digit numeric.
    pub command: String,
    /// The parameters before the trailing one.
    pub params: Vec<String>,
    /// The trailing parameter (after ` :`), when the line has one.
    pub trailing: Option<String>,
}

impl IrcMessage {
    /// Parses a line (CR LF or LF at its end allowed); `None` when it has
    /// no command.
    pub fn parse(line: &str) -> Option<Self> {
        let raw = line.trim_end_matches(['\r', '\n']);
        let mut rest = raw;
        let mut tags = Vec::new();
        if let Some(tagged) = rest.strip_prefix('@') {
            let (tag_text, after) = tagged.split_once(' ')?;
            for tag in tag_text.split(';').filter(|t| !t.is_empty()) {
                let (key, value) = tag.split_once('=').unwrap_or((tag, ""));
                tags.push((key.to_owned(), unescape_tag(value)));
            }
            rest = after.trim_start_matches(' ');
        }
        let mut prefix = None;
        if let Some(prefixed) = rest.strip_prefix(':') {
            let (p, after) = prefixed.split_once(' ')?;
            prefix = Some(p.to_owned());
            rest = after.trim_start_matches(' ');
        }
        let (command, mut rest) = match rest.split_once(' ') {
            Some((command, after)) => (command, after),
            None => (rest, ""),
        };
        if command.is_empty() {
            return None;
        }
        let mut params = Vec::new();
        let mut trailing = None;
        loop {
            rest = rest.trim_start_matches(' ');
            if rest.is_empty() {
                break;
            }
            if let Some(t) = rest.strip_prefix(':') {
                trailing = Some(t.to_owned());
                break;
            }
            match rest.split_once(' ') {
                Some((param, after)) => {
                    params.push(param.to_owned());
                    rest = after;
                }
                None => {
                    params.push(rest.to_owned());
                    break;
                }
            }
        }
        Some(Self {
            raw: raw.to_owned(),
            len: raw.len(),
            tags,
            prefix,
            command: command.to_ascii_uppercase(),
            params,
            trailing,
        })
    }

    /// The nickname of a `nick!user@host` prefix (or the whole prefix when
    /// it is a server's name).
    pub fn nick(&self) -> Option<&str> {
        let prefix = self.prefix.as_deref()?;
        Some(prefix.split(['!', '@']).next().unwrap_or(prefix))
    }

    /// The user part of a `nick!user@host` prefix.
    pub fn user(&self) -> Option<&str> {
        let (_, after) = self.prefix.as_deref()?.split_once('!')?;
        Some(after.split('@').next().unwrap_or(after))
    }

    /// The host part of a `nick!user@host` prefix.
    pub fn host(&self) -> Option<&str> {
        Some(self.prefix.as_deref()?.split_once('@')?.1)
    }

    /// Every parameter, the trailing one last.
    pub fn args(&self) -> Vec<&str> {
        self.params
            .iter()
            .map(String::as_str)
            .chain(self.trailing.as_deref())
            .collect()
    }

    /// Parameter `i` of [`IrcMessage::args`].
    pub fn arg(&self, i: usize) -> Option<&str> {
        self.args().get(i).copied()
    }

    /// The last parameter (a message's text), or "".
    pub fn text(&self) -> &str {
        self.trailing
            .as_deref()
            .or(self.params.last().map(String::as_str))
            .unwrap_or("")
    }

    /// Whether this is `command` (case-insensitive).
    pub fn is(&self, command: &str) -> bool {
        self.command.eq_ignore_ascii_case(command)
    }
}

fn unescape_tag(value: &str) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(':') => out.push(';'),
            Some('s') => out.push(' '),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// How an [`IrcUser`] connects.
#[derive(Clone, Debug, Default)]
pub struct Connect {
    /// The password sent with `PASS`; `None` sends the server's own, if it
    /// has one.
    pub password: Option<String>,
    /// Sends no `PASS` at all, even to a server with a password.
    pub no_password: bool,
    /// Over the TLS port, checking the server against its CA.
    pub tls: bool,
    /// The `USER` name (the nickname when `None`).
    pub user: Option<String>,
    /// IRCv3 capabilities asked for before registering (`CAP LS 302`,
    /// `CAP REQ`); registration fails unless the server acknowledges them.
    pub caps: Vec<String>,
    /// SASL PLAIN as this account, with this password (`sasl` is asked for
    /// too); registration fails unless the server answers `903`.
    pub sasl: Option<(String, String)>,
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => s.get_ref(),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

/// A person on IRC: a blocking client that reads only when asked to
/// ([`IrcUser::expect`]), answering the server's `PING`s as it reads.
pub struct IrcUser {
    nick: String,
    stream: Stream,
    /// Bytes read, not yet a whole line.
    buffer: Vec<u8>,
    /// Lines read that no `expect` has taken yet, oldest first.
    pending: VecDeque<IrcMessage>,
    /// Everything read, in order.
    pub log: Vec<IrcMessage>,
    closed: bool,
    /// Our own `nick!user@host` as the server relays it (from `001`).
    mask: Option<String>,
}

impl IrcUser {
    /// Connects to the plain port and registers as `nick` (with the
    /// server's password, if it has one); panics when it cannot.
    pub fn connect(server: &IrcServer, nick: &str) -> Self {
        Self::connect_with(server, nick, &Connect::default())
            .unwrap_or_else(|refusal| panic!("{nick} could not register: {refusal}"))
    }

    /// Connects over the TLS port and registers as `nick`.
    pub fn connect_tls(server: &IrcServer, nick: &str) -> Self {
        Self::connect_with(
            server,
            nick,
            &Connect {
                tls: true,
                ..Connect::default()
            },
        )
        .unwrap_or_else(|refusal| panic!("{nick} could not register over TLS: {refusal}"))
    }

    /// Connects and registers as `options` say: the user, or what the
    /// server said instead of welcoming it (its `ERROR` or numeric line),
    /// or that it closed the connection.
    pub fn connect_with(server: &IrcServer, nick: &str, options: &Connect) -> Result<Self, String> {
        let addr = if options.tls {
            server.tls_addr()
        } else {
            server.addr()
        };
        let ca = options.tls.then(|| server.ca_path());
        let password = options.password.as_deref().or(server.password());
        Self::register(addr, ca.as_deref(), password, nick, options)
    }

    /// Connects to any server's plain port at `addr` and registers as
    /// `options` say (`options.tls` is not read).
    pub fn connect_to(addr: SocketAddr, nick: &str, options: &Connect) -> Result<Self, String> {
        Self::register(addr, None, options.password.as_deref(), nick, options)
    }

    /// Connects to `addr` (over TLS checked against `ca`, when given) and
    /// registers: `CAP` and SASL as `options` ask, `PASS password` (unless
    /// `options.no_password`), `NICK`, `USER`.
    fn register(
        addr: SocketAddr,
        ca: Option<&Path>,
        password: Option<&str>,
        nick: &str,
        options: &Connect,
    ) -> Result<Self, String> {
        let tcp = TcpStream::connect_timeout(&addr, TIMEOUT)
            .unwrap_or_else(|err| panic!("cannot connect to the IRC server at {addr}: {err}"));
        tcp.set_nodelay(true).unwrap();
        let stream = if let Some(ca) = ca {
            let config = tls_client_config(ca);
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let conn = rustls::ClientConnection::new(config, name).unwrap();
            Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)))
        } else {
            Stream::Plain(tcp)
        };
        let mut user = Self {
            nick: nick.to_owned(),
            stream,
            buffer: Vec::new(),
            pending: VecDeque::new(),
            log: Vec::new(),
            closed: false,
            mask: None,
        };
        let mut caps = options.caps.clone();
        if options.sasl.is_some() {
            caps.push("sasl".to_owned());
        }
        if !caps.is_empty() {
            user.send_raw("CAP LS 302");
        }
        if let Some(password) = password
            && !options.no_password
        {
            user.send_raw(&format!("PASS {password}"));
        }
        let user_name = options.user.as_deref().unwrap_or(nick);
        user.send_raw(&format!("NICK {nick}"));
        user.send_raw(&format!("USER {user_name} 0 * :{nick} (a test user)"));
        if !caps.is_empty() {
            user.negotiate(&caps, options.sasl.as_ref())?;
        }
        // 001 welcomes; an ERROR, or a numeric 4xx/5xx about the nick or
        // the password, refuses.
        let answer = user.try_expect(
            |m| {
                m.is("001")
                    || m.is("ERROR")
                    || ["431", "432", "433", "436", "461", "462", "464", "465"]
                        .contains(&m.command.as_str())
            },
            TIMEOUT,
        );
        match answer {
            Some(m) if m.is("001") => {
                user.mask = m.text().rsplit(' ').next().map(str::to_owned);
                // The end of the MOTD (or its absence) ends registration.
                user.expect(|m| m.is("376") || m.is("422"), TIMEOUT);
                Ok(user)
            }
            Some(m) => Err(m.raw),
            None if user.closed => Err("the server closed the connection".to_owned()),
            None => Err(format!("no welcome within {TIMEOUT:?}")),
        }
    }

    /// `CAP REQ` of `caps` once the server has listed its own, then SASL
    /// PLAIN when `sasl` is given, then `CAP END`; what the server said
    /// instead when it refuses.
    fn negotiate(
        &mut self,
        caps: &[String],
        sasl: Option<&(String, String)>,
    ) -> Result<(), String> {
        // The last line of `CAP * LS` (a `*` before the list says more follow).
        self.expect(
            |m| m.is("CAP") && m.arg(1) == Some("LS") && m.args().len() == 3,
            TIMEOUT,
        );
        self.send_raw(&format!("CAP REQ :{}", caps.join(" ")));
        let answer = self.expect(
            |m| m.is("CAP") && matches!(m.arg(1), Some("ACK" | "NAK")),
            TIMEOUT,
        );
        if answer.arg(1) == Some("NAK") {
            return Err(answer.raw);
        }
        if let Some((account, password)) = sasl {
            use base64::Engine as _;
            self.send_raw("AUTHENTICATE PLAIN");
            self.expect(|m| m.is("AUTHENTICATE"), TIMEOUT);
            let plain = base64::engine::general_purpose::STANDARD
                .encode(format!("{account}\0{account}\0{password}"));
            self.send_raw(&format!("AUTHENTICATE {plain}"));
            let done = self.expect(
                |m| ["903", "902", "904", "905", "906"].contains(&m.command.as_str()),
                TIMEOUT,
            );
            if !done.is("903") {
                return Err(done.raw);
            }
        }
        self.send_raw("CAP END");
        Ok(())
    }

    pub fn nick(&self) -> &str {
        &self.nick
    }

    /// Our `nick!~user@host` as the server put it in its welcome, the
    /// prefix it puts before what we say when it relays it.
    pub fn mask(&self) -> &str {
        self.mask.as_deref().unwrap_or(&self.nick)
    }

    /// Whether the server has closed the connection (seen while reading).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Sends exactly `bytes`.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
        self.stream.flush().unwrap();
    }

    /// Sends one line (CR LF added).
    pub fn send_raw(&mut self, line: &str) {
        assert!(!line.contains(['\r', '\n']), "one line at a time: {line:?}");
        self.send_bytes(format!("{line}\r\n").as_bytes());
    }

    /// Joins `channel` and waits until the server has said so (our own
    /// `JOIN` back and the end of the names list).
    pub fn join(&mut self, channel: &str) -> IrcMessage {
        self.send_raw(&format!("JOIN {channel}"));
        let nick = self.nick.clone();
        let joined = self.wait_for_join(&nick, channel);
        self.expect(
            |m| m.is("366") && m.arg(1).is_some_and(|c| c.eq_ignore_ascii_case(channel)),
            TIMEOUT,
        );
        joined
    }

    /// Leaves `channel`, waiting for the server's `PART` back.
    pub fn part(&mut self, channel: &str) {
        self.send_raw(&format!("PART {channel}"));
        let nick = self.nick.clone();
        self.expect(
            |m| {
                m.is("PART")
                    && m.nick().is_some_and(|n| n.eq_ignore_ascii_case(&nick))
                    && m.arg(0).is_some_and(|c| c.eq_ignore_ascii_case(channel))
            },
            TIMEOUT,
        );
    }

    /// Sends `text` to `target` (a nickname or a channel).
    pub fn privmsg(&mut self, target: &str, text: &str) {
        self.send_raw(&format!("PRIVMSG {target} :{text}"));
    }

    /// Sends `text` to `target` as a `NOTICE`.
    pub fn notice(&mut self, target: &str, text: &str) {
        self.send_raw(&format!("NOTICE {target} :{text}"));
    }

    /// The first line (kept from before, else read now) that `matches`,
    /// within `timeout`; panics otherwise, listing what did come.
    pub fn expect(
        &mut self,
        matches: impl FnMut(&IrcMessage) -> bool,
        timeout: Duration,
    ) -> IrcMessage {
        self.try_expect(matches, timeout).unwrap_or_else(|| {
            panic!(
                "{}: no matching line within {timeout:?}{}; lines not taken:\n{}",
                self.nick,
                if self.closed {
                    " (the server closed the connection)"
                } else {
                    ""
                },
                self.pending
                    .iter()
                    .map(|m| m.raw.as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })
    }

    /// Like [`IrcUser::expect`], `None` when no line matches in time (or
    /// the connection closes first). Lines that do not match are kept for
    /// later calls.
    pub fn try_expect(
        &mut self,
        mut matches: impl FnMut(&IrcMessage) -> bool,
        timeout: Duration,
    ) -> Option<IrcMessage> {
        if let Some(i) = self.pending.iter().position(&mut matches) {
            return self.pending.remove(i);
        }
        let deadline = Instant::now() + timeout;
        while let Some(message) = self.read_line(deadline) {
            if matches(&message) {
                return Some(message);
            }
            self.pending.push_back(message);
        }
        None
    }

    /// The lines read and not taken so far, and those that come within
    /// `within`, taken.
    pub fn drain(&mut self, within: Duration) -> Vec<IrcMessage> {
        let deadline = Instant::now() + within;
        while let Some(message) = self.read_line(deadline) {
            self.pending.push_back(message);
        }
        self.pending.drain(..).collect()
    }

    /// Waits for `nick` to join `channel` (the server's `JOIN` line).
    pub fn wait_for_join(&mut self, nick: &str, channel: &str) -> IrcMessage {
        self.expect(
            |m| {
                m.is("JOIN")
                    && m.nick().is_some_and(|n| n.eq_ignore_ascii_case(nick))
                    && m.arg(0).is_some_and(|c| c.eq_ignore_ascii_case(channel))
            },
            TIMEOUT,
        )
    }

    /// Waits for a `PRIVMSG` from `from` to `target` (our nick or a
    /// channel), returning it.
    pub fn expect_privmsg(&mut self, from: &str, target: &str) -> IrcMessage {
        self.expect(
            |m| {
                m.is("PRIVMSG")
                    && m.nick().is_some_and(|n| n.eq_ignore_ascii_case(from))
                    && m.arg(0).is_some_and(|t| t.eq_ignore_ascii_case(target))
            },
            TIMEOUT,
        )
    }

    /// Waits for the server to close the connection: its `ERROR` line, if
    /// it sent one.
    pub fn expect_closed(&mut self, timeout: Duration) -> Option<IrcMessage> {
        let error = self.try_expect(|m| m.is("ERROR"), timeout);
        let deadline = Instant::now() + timeout;
        while !self.closed && Instant::now() < deadline {
            if let Some(message) = self.read_line(deadline) {
                self.pending.push_back(message);
            }
        }
        assert!(
            self.closed,
            "{}: the server did not close the connection within {timeout:?}",
            self.nick
        );
        error
    }

    /// Says `QUIT` and waits for the server to close the connection.
    pub fn quit(mut self, message: &str) {
        self.send_raw(&format!("QUIT :{message}"));
        self.expect_closed(TIMEOUT);
    }

    /// The next whole line before `deadline` (answering `PING`s on the
    /// way: they are kept too), or `None` at the deadline or when the
    /// connection has closed.
    fn read_line(&mut self, deadline: Instant) -> Option<IrcMessage> {
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line);
                let Some(mut message) = IrcMessage::parse(&text) else {
                    continue;
                };
                message.len = line.len() - if line.ends_with(b"\r\n") { 2 } else { 1 };
                if message.is("PING") && !self.closed {
                    let token = message.text().to_owned();
                    let _ = self
                        .stream
                        .write_all(format!("PONG :{token}\r\n").as_bytes())
                        .and_then(|()| self.stream.flush());
                }
                self.log.push(message.clone());
                return Some(message);
            }
            if self.closed {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.stream
                .tcp()
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => self.closed = true,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // A reset, or TLS ending without close_notify: closed.
                Err(_) => self.closed = true,
            }
        }
    }
}
