//! Real mail servers for tests: Dovecot serving IMAP, and an SMTP server
//! (aiosmtpd, `tests/fixtures/mail/smtpd.py`) delivering into the Maildirs
//! Dovecot serves; and a person on them.
//!
//! [`MailServer::start`] writes a `dovecot.conf` of its own into a
//! temporary directory (everything of Dovecot's there: `base_dir`,
//! `state_dir`, log, a `passwd-file` of users with plain-text passwords,
//! `mail_location = maildir:DIR/mail/%n/Maildir`), runs `dovecot -F -c FILE`
//! in the foreground with IMAP on a free 127.0.0.1 port, and `smtpd.py`
//! with the venv's Python on other free ports, waiting until both answer.
//! Several can run at once. Both are stopped, and the directory removed,
//! when dropped; a watchdog does both when the test process ends without
//! dropping it. Run as root, Dovecot runs as it ships (its `dovecot` and
//! `dovenull` users, login processes chrooted) and keeps mail as `nobody`;
//! run as another user, everything runs as that user (no chroot).
//! `scripts/test-deps.sh` installs Debian's `dovecot-imapd` and the venv
//! (`tests/fixtures/mail/.venv`, aiosmtpd) where they are missing.
//! Certificates are made with the `openssl` command line.
//!
//! Users ([`MailServer::add_user`]) can be added before or after the start:
//! Dovecot re-reads the passwd-file when it changes, and `smtpd.py` reads it
//! for every message. A user logs in to IMAP as `name` or
//! `name@example.org`; mail to any address whose local part is a user's
//! name is delivered to that user (the domain is not checked).
//!
//! Ports: IMAP ([`MailServer::imap_port`]; with [`MailOptions::tls`] it
//! offers `STARTTLS`, and [`MailServer::imaps_port`] takes TLS from the
//! first byte); SMTP submission ([`MailServer::smtp_port`], `STARTTLS`
//! offered with TLS, `AUTH PLAIN`/`LOGIN` required with
//! [`MailOptions::smtp_auth`]) and submissions ([`MailServer::smtps_port`],
//! implicit TLS); and an "MX" port without TLS or AUTH
//! ([`MailServer::mx_port`]) through which the person-side
//! [`MailServer::send`] delivers, as mail from outside arrives. So Pincer's
//! `tls = "none"`, `"starttls"` and `"implicit"` each have a port.
//!
//! A test can make the SMTP server keep its final `250` back after it has
//! delivered a message ([`MailServer::hold_replies`]), to kill a client
//! between the server taking its mail and the client learning it.
//!
//! What Dovecot 2.3.19 and this SMTP server do here, found with these
//! tests:
//! - `smtpd.py` delivers before it answers `250` to the message's data, so
//!   once [`MailServer::send`] (or Pincer's own SMTP client) has its `250`,
//!   the mail is in the Maildir and an IMAP `FETCH` sees it at once.
//! - IMAP `IDLE` works (capability `IDLE`): an idling client is told
//!   (`* N EXISTS`) about half a second after the delivery (Dovecot's
//!   inotify watch; `mailbox_idle_check_interval = 1 secs` is the fallback).
//! - Reading marks nothing seen unless the client asks (the person-side
//!   reader uses `EXAMINE` and `BODY.PEEK[]`).
//! - A failed IMAP login is answered at once (`auth_failure_delay = 0`;
//!   Dovecot's default waits two seconds).
//! - Dovecot counts a client whose address is the server's own (127.0.0.1
//!   to 127.0.0.1) as secured: it takes a plain-text `LOGIN` there even with
//!   `ssl = required` (see [`MailOptions::require_tls`]).
//! - Stopping takes about a second (Dovecot's master, on `SIGTERM`); an
//!   idling `imap` process would outlive it by ten, so the whole process
//!   group is killed after it. A restart takes one to two seconds.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use serde::Deserialize;

use super::free_port;
use super::irc::{is_root, make_certificates, on_path, tail, terminate, watch};

/// The domain of the users' addresses ([`MailServer::address`]).
pub const DOMAIN: &str = "example.org";

/// How long a server may take to answer after it is started.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Free ports tried when another process takes one picked first.
const PORT_ATTEMPTS: usize = 5;

/// How long the person-side helpers wait for a server by default.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// How the servers are set up.
#[derive(Clone, Debug, Default)]
pub struct MailOptions {
    /// TLS with a certificate for `localhost` and 127.0.0.1 signed by a CA
    /// of the server's own ([`MailServer::ca_path`]): `STARTTLS` on the IMAP
    /// and SMTP submission ports, and the implicit-TLS ports
    /// [`MailServer::imaps_port`] and [`MailServer::smtps_port`].
    pub tls: bool,
    /// With [`MailOptions::tls`]: SMTP submission refuses everything but
    /// `EHLO`/`STARTTLS` before `STARTTLS`. Dovecot is set to
    /// `ssl = required` too, but it counts a client whose address is the
    /// server's own (127.0.0.1 to 127.0.0.1) as secured, so on loopback it
    /// still takes a plain-text `LOGIN`: a test cannot see IMAP refuse one.
    pub require_tls: bool,
    /// SMTP submission (both ports) requires `AUTH PLAIN` or `AUTH LOGIN`
    /// as a user, with the user's password.
    pub smtp_auth: bool,
    /// SMTP refuses (`550`) recipients who are not users; otherwise their
    /// mail is accepted and only logged ([`MailServer::smtp_log`]).
    pub reject_unknown_recipients: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Ports {
    imap: u16,
    imaps: Option<u16>,
    submission: u16,
    submissions: Option<u16>,
    mx: u16,
}

struct Users {
    passwords: BTreeMap<String, String>,
    /// The passwd-file's last modification time as set: each write moves
    /// it on by at least a second, so Dovecot, which re-reads the file
    /// when its time or size changes, never misses one.
    stamp: SystemTime,
}

/// Dovecot and the SMTP server, running (or stopped).
pub struct MailServer {
    dir: tempfile::TempDir,
    dovecot: PathBuf,
    python: PathBuf,
    options: MailOptions,
    ports: Ports,
    /// As root: the user and group mail is kept as (`nobody`).
    mail_owner: Option<(u32, u32)>,
    users: Mutex<Users>,
    dovecot_child: Mutex<Option<Child>>,
    smtpd_child: Mutex<Option<Child>>,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mail")
}

/// The venv's Python (with aiosmtpd).
fn python() -> PathBuf {
    let python = fixtures().join(".venv/bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `bash scripts/test-deps.sh`, which makes the venv with aiosmtpd",
        python.display()
    );
    python
}

fn dovecot_binary() -> PathBuf {
    on_path("dovecot").unwrap_or_else(|| {
        panic!(
            "Dovecot is not installed (no dovecot on PATH nor in /usr/sbin): \
             run `bash scripts/test-deps.sh`, which installs Debian's dovecot-imapd"
        )
    })
}

/// `id ARGS`' answer.
fn id(args: &[&str]) -> String {
    let out = Command::new("id")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "id {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn chown(path: &Path, owner: Option<(u32, u32)>) {
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid)).unwrap();
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The bytes of `path` past `offset`, as text.
fn log_since(path: &Path, offset: u64) -> String {
    let log = std::fs::read(path).unwrap_or_default();
    String::from_utf8_lossy(log.get(usize::try_from(offset).unwrap()..).unwrap_or(&[])).into_owned()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// Reads from `addr` until a line starting with `greeting` comes (within a
/// few seconds): whether it did.
fn greets(addr: SocketAddr, greeting: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 512];
    while !got.contains(&b'\n') {
        match stream.read(&mut chunk) {
            Ok(n) if n > 0 => got.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
    got.starts_with(greeting.as_bytes())
}

impl MailServer {
    /// Dovecot and the SMTP server, set up as `options` say, with no users
    /// yet.
    pub fn start(options: MailOptions) -> Self {
        let dovecot = dovecot_binary();
        let python = python();
        let dir = tempfile::Builder::new()
            .prefix("pincer-mail-")
            .tempdir()
            .unwrap();
        let mail_owner = is_root().then(|| {
            (
                id(&["-u", "nobody"]).parse().unwrap(),
                id(&["-g", "nobody"]).parse().unwrap(),
            )
        });
        let mut server = Self {
            dir,
            dovecot,
            python,
            options,
            ports: Ports::default(),
            mail_owner,
            users: Mutex::new(Users {
                passwords: BTreeMap::new(),
                stamp: SystemTime::UNIX_EPOCH,
            }),
            dovecot_child: Mutex::new(None),
            smtpd_child: Mutex::new(None),
        };
        // Before anything runs: a test process killed mid-start leaves nothing.
        watch(
            server.dir.path(),
            &["dovecot.pid", "smtpd.pid"],
            std::process::id(),
            "a Dovecot and SMTP test server",
        );
        let dir = server.dir.path().to_owned();
        // Dovecot's processes (other users when this is root) go through it.
        set_mode(&dir, 0o755);
        std::fs::create_dir(server.mail_root()).unwrap();
        chown(&server.mail_root(), server.mail_owner);
        if server.options.tls {
            make_certificates(&dir);
        }
        server.write_passwd(&mut server.users.lock().unwrap());
        server.start_dovecot_on_free_ports();
        server.start_smtpd_on_free_ports();
        server
    }

    /// Plain IMAP and SMTP, no AUTH on SMTP, no TLS.
    pub fn start_default() -> Self {
        Self::start(MailOptions::default())
    }

    /// Adds a user (or sets a user's password), before or after the start;
    /// its Maildir is made at once. Names are local parts (`pincer`), the
    /// password without `:` or line breaks.
    pub fn add_user(&self, name: &str, password: &str) {
        assert!(
            !name.is_empty()
                && !name.contains([':', '@', '/', '\n', '\r'])
                && !password.contains([':', '\n', '\r']),
            "a user name without : @ / and line breaks, a password without : and line breaks"
        );
        let mut users = self.users.lock().unwrap();
        users.passwords.insert(name.to_owned(), password.to_owned());
        let maildir = self.maildir(name);
        for sub in ["", "cur", "new", "tmp"] {
            let path = maildir.join(sub);
            if !path.is_dir() {
                std::fs::create_dir_all(&path).unwrap();
                set_mode(&path, 0o700);
            }
        }
        for path in [maildir.parent().unwrap().to_owned(), maildir.clone()]
            .into_iter()
            .chain(["cur", "new", "tmp"].map(|d| maildir.join(d)))
        {
            chown(&path, self.mail_owner);
        }
        self.write_passwd(&mut users);
    }

    /// A user's password.
    pub fn password(&self, name: &str) -> String {
        self.users
            .lock()
            .unwrap()
            .passwords
            .get(name)
            .cloned()
            .unwrap_or_else(|| panic!("no user {name}: add_user it first"))
    }

    /// `name@example.org`.
    pub fn address(&self, name: &str) -> String {
        format!("{name}@{DOMAIN}")
    }

    fn write_passwd(&self, users: &mut Users) {
        let text: String = users
            .passwords
            .iter()
            .map(|(name, password)| format!("{name}:{{PLAIN}}{password}::::::\n"))
            .collect();
        let path = self.passwd_path();
        let new = path.with_extension("new");
        std::fs::write(&new, text).unwrap();
        // Readable by Dovecot's auth process (another user when root).
        set_mode(&new, 0o644);
        let stamp = SystemTime::now().max(users.stamp + Duration::from_secs(1));
        std::fs::File::options()
            .write(true)
            .open(&new)
            .unwrap()
            .set_modified(stamp)
            .unwrap();
        users.stamp = stamp;
        std::fs::rename(&new, &path).unwrap();
    }

    fn passwd_path(&self) -> PathBuf {
        self.dir.path().join("passwd")
    }

    fn mail_root(&self) -> PathBuf {
        self.dir.path().join("mail")
    }

    /// A user's Maildir (`cur`, `new`, `tmp`; Dovecot's INBOX).
    pub fn maildir(&self, name: &str) -> PathBuf {
        self.mail_root().join(name).join("Maildir")
    }

    /// The temporary directory: configuration, logs, certificates, mail.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Dovecot's log.
    pub fn dovecot_log_path(&self) -> PathBuf {
        self.dir.path().join("dovecot.log")
    }

    /// The SMTP server's output.
    pub fn smtpd_log_path(&self) -> PathBuf {
        self.dir.path().join("smtpd.log")
    }

    /// The SMTP server's JSON-lines log of envelopes.
    pub fn smtp_log_path(&self) -> PathBuf {
        self.dir.path().join("smtp-log.jsonl")
    }

    /// The senders whose final `250` the SMTP server holds back
    /// ([`MailServer::hold_replies`]).
    fn hold_path(&self) -> PathBuf {
        self.dir.path().join("hold")
    }

    /// From now on, a message whose envelope sender is `mail_from` is
    /// delivered (and logged, `held` set) as usual, but the SMTP server
    /// keeps its final `250` back until [`MailServer::release_replies`] or
    /// `up_to` has passed: a client killed meanwhile has had its mail taken
    /// without learning it.
    pub fn hold_replies(&self, mail_from: &str, up_to: Duration) {
        self.write_holds(|holds| {
            holds.insert(mail_from.to_ascii_lowercase(), up_to.as_secs_f64());
        });
    }

    /// Ends [`MailServer::hold_replies`] for `mail_from`: the held `250`s
    /// go out.
    pub fn release_replies(&self, mail_from: &str) {
        self.write_holds(|holds| {
            holds.remove(&mail_from.to_ascii_lowercase());
        });
    }

    fn write_holds(&self, change: impl FnOnce(&mut BTreeMap<String, f64>)) {
        static LOCK: Mutex<()> = Mutex::new(());
        let _guard = LOCK.lock().unwrap();
        let path = self.hold_path();
        let mut holds: BTreeMap<String, f64> = std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (address, secs) = l.split_once(' ')?;
                Some((address.to_owned(), secs.parse().ok()?))
            })
            .collect();
        change(&mut holds);
        let text: String = holds
            .iter()
            .map(|(address, secs)| format!("{address} {secs}\n"))
            .collect();
        let new = path.with_extension("new");
        std::fs::write(&new, text).unwrap();
        std::fs::rename(&new, &path).unwrap();
    }

    fn dovecot_config_path(&self) -> PathBuf {
        self.dir.path().join("dovecot.conf")
    }

    /// The CA certificate (PEM) the servers' certificate is signed by.
    pub fn ca_path(&self) -> PathBuf {
        assert!(self.options.tls, "the mail server was started without TLS");
        self.dir.path().join("ca.crt")
    }

    pub fn options(&self) -> &MailOptions {
        &self.options
    }

    pub fn imap_port(&self) -> u16 {
        self.ports.imap
    }

    /// The implicit-TLS IMAP port; panics without TLS.
    pub fn imaps_port(&self) -> u16 {
        self.ports
            .imaps
            .expect("the mail server was started without TLS")
    }

    /// The SMTP submission port (`STARTTLS` with TLS, `AUTH` with
    /// [`MailOptions::smtp_auth`]).
    pub fn smtp_port(&self) -> u16 {
        self.ports.submission
    }

    /// The implicit-TLS SMTP submission port; panics without TLS.
    pub fn smtps_port(&self) -> u16 {
        self.ports
            .submissions
            .expect("the mail server was started without TLS")
    }

    /// The SMTP port mail from outside comes in through: no TLS, no AUTH.
    pub fn mx_port(&self) -> u16 {
        self.ports.mx
    }

    /// 127.0.0.1 and `port`.
    pub fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn write_dovecot_config(&self) {
        let dir = self.dir.path().display().to_string();
        let name = self
            .dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let (uid, gid) = match self.mail_owner {
            Some((uid, gid)) => (uid.to_string(), gid.to_string()),
            None => (id(&["-u"]), id(&["-g"])),
        };
        let tls = self.options.tls;
        let ssl = match (tls, self.options.require_tls) {
            (false, _) => "no",
            (true, false) => "yes",
            (true, true) => "required",
        };
        let mut conf = format!(
            "# Written by tests/it/support/mail.rs\n\
             protocols = imap\n\
             listen = 127.0.0.1\n\
             base_dir = {dir}/run\n\
             state_dir = {dir}/state\n\
             instance_name = {name}\n\
             log_path = {dir}/dovecot.log\n\
             info_log_path = {dir}/dovecot.log\n\
             auth_verbose = yes\n\
             auth_failure_delay = 0\n\
             auth_mechanisms = plain login\n\
             disable_plaintext_auth = {}\n\
             ssl = {ssl}\n\
             mail_location = maildir:{dir}/mail/%n/Maildir\n\
             mail_fsync = never\n\
             mailbox_idle_check_interval = 1 secs\n\
             first_valid_uid = 1\n\
             first_valid_gid = 1\n\
             passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%n {dir}/passwd\n}}\n\
             userdb {{\n  driver = static\n  args = uid={uid} gid={gid} home={dir}/mail/%n allow_all_users=yes\n}}\n\
             namespace inbox {{\n  inbox = yes\n\
             \x20 mailbox Drafts {{\n    special_use = \\Drafts\n  }}\n\
             \x20 mailbox Sent {{\n    special_use = \\Sent\n  }}\n\
             \x20 mailbox Trash {{\n    special_use = \\Trash\n  }}\n\
             \x20 mailbox Junk {{\n    special_use = \\Junk\n  }}\n}}\n",
            if self.options.require_tls {
                "yes"
            } else {
                "no"
            },
        );
        if tls {
            conf.push_str(&format!(
                "ssl_cert = <{dir}/server.crt\nssl_key = <{dir}/server.key\n\
                 ssl_min_protocol = TLSv1.2\n"
            ));
        }
        conf.push_str(&format!(
            "service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {}\n  }}\n\
             \x20 inet_listener imaps {{\n    address = 127.0.0.1\n    port = {}\n    ssl = yes\n  }}\n",
            self.ports.imap,
            self.ports.imaps.unwrap_or(0),
        ));
        if self.mail_owner.is_none() {
            // Not root: no chroot, and Dovecot's own processes as this user.
            let (user, group) = (id(&["-un"]), id(&["-gn"]));
            conf.push_str(&format!(
                "  chroot =\n}}\nservice anvil {{\n  chroot =\n}}\n\
                 default_internal_user = {user}\ndefault_internal_group = {group}\n\
                 default_login_user = {user}\n"
            ));
        } else {
            conf.push_str("}\n");
        }
        std::fs::write(self.dovecot_config_path(), conf).unwrap();
        set_mode(&self.dovecot_config_path(), 0o644);
    }

    fn start_dovecot_on_free_ports(&mut self) {
        for attempt in 1..=PORT_ATTEMPTS {
            self.ports.imap = free_port();
            self.ports.imaps = self.options.tls.then(free_port);
            self.write_dovecot_config();
            match self.try_start_dovecot() {
                Ok(()) => return,
                Err(why) if attempt < PORT_ATTEMPTS && why.contains("Address already in use") => {}
                Err(why) => panic!("Dovecot did not start on port {}: {why}", self.ports.imap),
            }
        }
    }

    /// Starts `dovecot -F` and waits until IMAP greets; the failure (the
    /// log's tail) otherwise, the server stopped.
    fn try_start_dovecot(&self) -> Result<(), String> {
        let mut slot = self.dovecot_child.lock().unwrap();
        assert!(slot.is_none(), "Dovecot is already running");
        let log_path = self.dovecot_log_path();
        let logged = file_len(&log_path);
        let output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("dovecot.out"))
            .unwrap();
        let out_logged = output.metadata().unwrap().len();
        let mut child = Command::new(&self.dovecot)
            .process_group(0)
            .arg("-F")
            .arg("-c")
            .arg(self.dovecot_config_path())
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.dovecot.display()));
        std::fs::write(self.dir.path().join("dovecot.pid"), child.id().to_string()).unwrap();
        let failure = |what: &str| {
            format!(
                "{what}\n--- {} ---\n{}{}\n(is Debian's dovecot-imapd installed? \
                 `bash scripts/test-deps.sh` installs it)",
                log_path.display(),
                log_since(&log_path, logged),
                log_since(&self.dir.path().join("dovecot.out"), out_logged),
            )
        };
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(failure(&format!("dovecot exited ({status})")));
            }
            if greets(Self::addr(self.ports.imap), "* OK")
                && self
                    .ports
                    .imaps
                    .is_none_or(|port| TcpStream::connect(Self::addr(port)).is_ok())
            {
                *slot = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                terminate(&mut child, Duration::from_secs(10));
                return Err(failure(&format!(
                    "no IMAP greeting within {READY_WITHIN:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn start_smtpd_on_free_ports(&mut self) {
        for attempt in 1..=PORT_ATTEMPTS {
            self.ports.mx = free_port();
            self.ports.submission = free_port();
            self.ports.submissions = self.options.tls.then(free_port);
            match self.try_start_smtpd() {
                Ok(()) => return,
                Err(why) if attempt < PORT_ATTEMPTS && why.contains("cannot listen") => {}
                Err(why) => panic!("the SMTP server did not start: {why}"),
            }
        }
    }

    /// Starts `smtpd.py` and waits until it says it is ready and greets
    /// on the MX port; the failure otherwise, the server stopped.
    fn try_start_smtpd(&self) -> Result<(), String> {
        let mut slot = self.smtpd_child.lock().unwrap();
        assert!(slot.is_none(), "the SMTP server is already running");
        let log_path = self.smtpd_log_path();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .unwrap();
        let logged = log.metadata().unwrap().len();
        let dir = self.dir.path();
        let mut command = Command::new(&self.python);
        command
            .arg("-u")
            .arg(fixtures().join("smtpd.py"))
            .arg("--listen")
            .arg(format!("mx:{}", self.ports.mx))
            .arg("--listen")
            .arg(format!("submission:{}", self.ports.submission))
            .arg("--maildirs")
            .arg(self.mail_root())
            .arg("--users")
            .arg(self.passwd_path())
            .arg("--log")
            .arg(self.smtp_log_path())
            .arg("--hold-file")
            .arg(self.hold_path());
        if let Some(port) = self.ports.submissions {
            command.arg("--listen").arg(format!("submissions:{port}"));
        }
        if self.options.tls {
            command
                .arg("--cert")
                .arg(dir.join("server.crt"))
                .arg("--key")
                .arg(dir.join("server.key"));
        }
        if self.options.smtp_auth {
            command.arg("--auth");
        }
        if self.options.tls && self.options.require_tls {
            command.arg("--require-starttls");
        }
        if self.options.reject_unknown_recipients {
            command.arg("--reject-unknown");
        }
        let mut child = command
            .process_group(0)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot run {}: {err}", self.python.display()));
        std::fs::write(dir.join("smtpd.pid"), child.id().to_string()).unwrap();
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let said = log_since(&log_path, logged);
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!(
                    "smtpd.py exited ({status})\n--- {} ---\n{said}",
                    log_path.display()
                ));
            }
            if said.contains("smtpd ready") && greets(Self::addr(self.ports.mx), "220") {
                *slot = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                terminate(&mut child, Duration::from_secs(5));
                return Err(format!(
                    "not ready within {READY_WITHIN:?}\n--- {} ---\n{said}",
                    log_path.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops both servers (Dovecot ends its IMAP sessions). Stopping
    /// stopped servers does nothing.
    pub fn stop(&self) {
        if let Some(mut child) = self.smtpd_child.lock().unwrap().take() {
            terminate(&mut child, Duration::from_secs(5));
        }
        if let Some(mut child) = self.dovecot_child.lock().unwrap().take() {
            terminate(&mut child, Duration::from_secs(15));
        }
        let _ = std::fs::remove_file(self.dir.path().join("smtpd.pid"));
        let _ = std::fs::remove_file(self.dir.path().join("dovecot.pid"));
    }

    /// Starts both again after [`MailServer::stop`] (or stops them first):
    /// same configuration, users, mail and ports. A port still held for a
    /// moment is tried again until it binds.
    pub fn restart(&self) {
        self.stop();
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            match self.try_start_dovecot() {
                Ok(()) => break,
                Err(why) if why.contains("Address already in use") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(why) => panic!("Dovecot did not start again: {why}"),
            }
        }
        loop {
            match self.try_start_smtpd() {
                Ok(()) => break,
                Err(why) if why.contains("cannot listen") && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(why) => panic!("the SMTP server did not start again: {why}"),
            }
        }
    }

    /// Whether both servers are running.
    pub fn is_running(&self) -> bool {
        let running = |slot: &Mutex<Option<Child>>| {
            slot.lock()
                .unwrap()
                .as_mut()
                .is_some_and(|child| child.try_wait().unwrap().is_none())
        };
        running(&self.dovecot_child) && running(&self.smtpd_child)
    }

    /// The last lines of both logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "--- {} ---\n{}\n--- {} ---\n{}",
            self.dovecot_log_path().display(),
            tail(&self.dovecot_log_path()),
            self.smtpd_log_path().display(),
            tail(&self.smtpd_log_path())
        )
    }

    // The person side.

    /// Sends a plain-text mail from `from` (an address, or `Name <address>`)
    /// to `to` through the MX port, as mail from outside arrives; `headers`
    /// are added (a `Message-ID` among them replaces the one made up). The
    /// body's line ends become CR LF; a non-ASCII subject is encoded per
    /// RFC 2047. Its `Message-ID`, with the angle brackets.
    pub fn send(
        &self,
        from: &str,
        to: &str,
        subject: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> String {
        let (head, message_id) = Self::head(from, to, subject, headers);
        let message = format!(
            "{head}MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{}",
            crlf(body)
        );
        self.send_raw(from, &[to], message.as_bytes());
        message_id
    }

    /// Sends a `multipart/alternative` mail with a text and an HTML part,
    /// as [`MailServer::send`] does; its `Message-ID`.
    pub fn send_alternative(
        &self,
        from: &str,
        to: &str,
        subject: &str,
        text: &str,
        html: &str,
        headers: &[(&str, &str)],
    ) -> String {
        let (head, message_id) = Self::head(from, to, subject, headers);
        let boundary = format!("=_pincer_{}", uuid::Uuid::now_v7().simple());
        let message = format!(
            "{head}MIME-Version: 1.0\r\n\
             Content-Type: multipart/alternative; boundary=\"{boundary}\"\r\n\r\n\
             This is a multi-part message in MIME format.\r\n\
             --{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{}\r\n\
             --{boundary}\r\nContent-Type: text/html; charset=utf-8\r\n\
             Content-Transfer-Encoding: 8bit\r\n\r\n{}\r\n\
             --{boundary}--\r\n",
            crlf(text),
            crlf(html)
        );
        self.send_raw(from, &[to], message.as_bytes());
        message_id
    }

    /// `From`, `To`, `Subject`, `Date`, `Message-ID` and `headers`, each
    /// line with its CR LF; and the `Message-ID`.
    fn head(from: &str, to: &str, subject: &str, headers: &[(&str, &str)]) -> (String, String) {
        let message_id = headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("Message-ID"))
            .map_or_else(
                || format!("<{}@person.test>", uuid::Uuid::now_v7()),
                |(_, value)| (*value).to_owned(),
            );
        let subject = if subject.is_ascii() {
            subject.to_owned()
        } else {
            format!(
                "=?utf-8?b?{}?=",
                base64::engine::general_purpose::STANDARD.encode(subject)
            )
        };
        let date = jiff::fmt::rfc2822::DateTimePrinter::new()
            .timestamp_to_string(&jiff::Timestamp::now())
            .unwrap();
        let mut head = format!(
            "From: {from}\r\nTo: {to}\r\nSubject: {subject}\r\nDate: {date}\r\nMessage-ID: {message_id}\r\n"
        );
        for (name, value) in headers {
            if !name.eq_ignore_ascii_case("Message-ID") {
                head.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        (head, message_id)
    }

    /// Sends `message` (the bytes exactly, CR LF line ends expected) from
    /// `from` to each of `to` through the MX port; panics when the server
    /// refuses.
    pub fn send_raw(&self, from: &str, to: &[&str], message: &[u8]) {
        let mut smtp = SmtpClient::connect(self, self.mx_port(), TlsMode::None);
        smtp.send_mail(from, to, message)
            .unwrap_or_else(|err| panic!("the SMTP server refused the mail: {err}"));
        smtp.quit();
    }

    /// Every mail in `user`'s INBOX, read over IMAP (read-only: nothing is
    /// marked seen), oldest first.
    pub fn fetch_all(&self, user: &str) -> Vec<ReceivedMail> {
        self.fetch_mailbox(user, "INBOX")
    }

    /// Every mail in one of `user`'s mailboxes, read over IMAP.
    pub fn fetch_mailbox(&self, user: &str, mailbox: &str) -> Vec<ReceivedMail> {
        let password = self.password(user);
        let out = Command::new(&self.python)
            .arg(fixtures().join("imap_fetch.py"))
            .args([
                "127.0.0.1",
                &self.imap_port().to_string(),
                user,
                &password,
                mailbox,
            ])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|err| panic!("cannot run imap_fetch.py: {err}"));
        assert!(
            out.status.success(),
            "imap_fetch.py failed for {user}: {}\n{}",
            String::from_utf8_lossy(&out.stderr).trim_end(),
            self.logs()
        );
        #[derive(Deserialize)]
        struct Fetched {
            messages: Vec<ReceivedMail>,
        }
        let fetched: Fetched = serde_json::from_slice(&out.stdout).unwrap_or_else(|err| {
            panic!(
                "imap_fetch.py printed no JSON ({err}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        fetched.messages
    }

    /// Waits until a mail in `user`'s INBOX matches, reading it over IMAP
    /// every 100 ms; panics at `timeout`, listing what is there.
    pub fn wait_for(
        &self,
        user: &str,
        mut matches: impl FnMut(&ReceivedMail) -> bool,
        timeout: Duration,
    ) -> ReceivedMail {
        let deadline = Instant::now() + timeout;
        loop {
            let mails = self.fetch_all(user);
            if let Some(mail) = mails.iter().find(|m| matches(m)) {
                return mail.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no matching mail for {user} within {timeout:?}; the INBOX has: {:#?}\n{}",
                mails
                    .iter()
                    .map(|m| (&m.headers.subject, &m.headers.message_id))
                    .collect::<Vec<_>>(),
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every envelope the SMTP server has taken, oldest first.
    pub fn smtp_log(&self) -> Vec<SmtpEnvelope> {
        std::fs::read_to_string(self.smtp_log_path())
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Waits until an envelope in the SMTP log matches.
    pub fn wait_for_smtp(
        &self,
        mut matches: impl FnMut(&SmtpEnvelope) -> bool,
        timeout: Duration,
    ) -> SmtpEnvelope {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.smtp_log();
            if let Some(envelope) = log.iter().find(|e| matches(e)) {
                return envelope.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no matching envelope within {timeout:?}; the log has: {log:#?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The server this test binary shares (plain, no AUTH), started on
    /// first use: tests sharing it add users of their own. Never dropped;
    /// its watchdog stops it when the test process exits.
    pub fn shared() -> &'static MailServer {
        static SHARED: OnceLock<MailServer> = OnceLock::new();
        SHARED.get_or_init(MailServer::start_default)
    }
}

impl Drop for MailServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `text` with every line end CR LF.
fn crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// A mail as read back over IMAP (`tests/fixtures/mail/imap_fetch.py`).
#[derive(Clone, Debug, Deserialize)]
pub struct ReceivedMail {
    pub uid: Option<u32>,
    /// IMAP flags (`\Seen`, `\Answered`, `\Recent`, …).
    pub flags: Vec<String>,
    pub size: usize,
    /// The message's bytes, base64 (see [`ReceivedMail::bytes`]).
    pub raw: String,
    pub headers: MailHeaders,
    /// Every header, in order, decoded (RFC 2047).
    pub all_headers: Vec<(String, String)>,
    /// The first text/plain part that is not an attachment, decoded, its
    /// line ends LF.
    pub text: Option<String>,
    /// The first text/html part that is not an attachment, decoded, its
    /// line ends LF.
    pub html: Option<String>,
    /// The attachments' file names.
    pub attachments: Vec<Option<String>>,
}

/// The headers a conversation is threaded and addressed by, decoded.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct MailHeaders {
    pub message_id: Option<String>,
    pub in_reply_to: Option<String>,
    pub references: Option<String>,
    pub subject: Option<String>,
    pub from: Option<String>,
    pub to: Option<String>,
    pub cc: Option<String>,
    pub date: Option<String>,
}

impl ReceivedMail {
    /// The message's bytes as Dovecot serves them.
    pub fn bytes(&self) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.raw)
            .unwrap()
    }

    /// Every value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.all_headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// One envelope the SMTP server took.
#[derive(Clone, Debug, Deserialize)]
pub struct SmtpEnvelope {
    pub mail_from: String,
    pub rcpt_tos: Vec<String>,
    /// The users it was delivered to (recipients' local parts that are users).
    pub delivered_to: Vec<String>,
    pub message_id: Option<String>,
    /// When it was taken (RFC 3339, UTC).
    pub time: String,
    pub size: usize,
    /// `mx`, `submission` or `submissions`.
    pub listener: String,
    /// Whether it came over TLS (`STARTTLS` or implicit).
    pub tls: bool,
    /// Who logged in with `AUTH`, if anyone.
    pub auth_user: Option<String>,
    /// Whether its final `250` was held back ([`MailServer::hold_replies`]).
    #[serde(default)]
    pub held: bool,
}

/// How a person-side client secures its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    None,
    StartTls,
    Implicit,
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
    Upgrading,
}

/// A connection read line by line (CR LF), plain or over TLS, that can
/// turn to TLS (`STARTTLS`).
struct Lines {
    stream: Stream,
    buffer: Vec<u8>,
    /// The server closed the connection (seen while reading).
    closed: bool,
}

impl Lines {
    fn connect(addr: SocketAddr, tls: TlsMode, ca: Option<&Path>) -> Self {
        let tcp = TcpStream::connect_timeout(&addr, TIMEOUT)
            .unwrap_or_else(|err| panic!("cannot connect to {addr}: {err}"));
        tcp.set_nodelay(true).unwrap();
        let mut lines = Self {
            stream: Stream::Plain(tcp),
            buffer: Vec::new(),
            closed: false,
        };
        if tls == TlsMode::Implicit {
            lines.start_tls(ca.expect("TLS needs the server's CA"));
        }
        lines
    }

    /// Turns the connection to TLS, checking the server's certificate for
    /// `localhost` against `ca`.
    fn start_tls(&mut self, ca: &Path) {
        assert!(
            self.buffer.is_empty(),
            "the server said more before TLS began"
        );
        let Stream::Plain(tcp) = std::mem::replace(&mut self.stream, Stream::Upgrading) else {
            panic!("TLS is already on");
        };
        let config = super::irc::tls_client_config(ca);
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let conn = rustls::ClientConnection::new(config, name).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.sock.set_read_timeout(Some(TIMEOUT)).unwrap();
        while tls.conn.is_handshaking() {
            tls.conn
                .complete_io(&mut tls.sock)
                .unwrap_or_else(|err| panic!("the TLS handshake failed: {err}"));
        }
        self.stream = Stream::Tls(Box::new(tls));
    }

    fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    fn tcp(&self) -> &TcpStream {
        match &self.stream {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref(),
            Stream::Upgrading => unreachable!(),
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        let result = match &mut self.stream {
            Stream::Plain(s) => s.write_all(bytes).and_then(|()| s.flush()),
            Stream::Tls(s) => s.write_all(bytes).and_then(|()| s.flush()),
            Stream::Upgrading => unreachable!(),
        };
        result.unwrap();
    }

    fn write_line(&mut self, line: &str) {
        self.write(format!("{line}\r\n").as_bytes());
    }

    /// The next line without its CR LF, or `None` when the connection
    /// closes or nothing comes within `timeout`.
    fn read_line(&mut self, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(end) = self.buffer.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                let text = String::from_utf8_lossy(&line);
                return Some(text.trim_end_matches(['\r', '\n']).to_owned());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || self.closed {
                return None;
            }
            self.tcp().set_read_timeout(Some(left)).unwrap();
            let mut chunk = [0u8; 8192];
            let read = match &mut self.stream {
                Stream::Plain(s) => s.read(&mut chunk),
                Stream::Tls(s) => s.read(&mut chunk),
                Stream::Upgrading => unreachable!(),
            };
            match read {
                Ok(0) => self.closed = true,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                // A reset, or TLS ending without close_notify: closed.
                Err(_) => self.closed = true,
            }
        }
    }
}

/// A person's SMTP client (plain std TCP, rustls for TLS).
pub struct SmtpClient {
    lines: Lines,
    ca: Option<PathBuf>,
    /// What the server's last `EHLO` answer offered (`STARTTLS`,
    /// `AUTH PLAIN LOGIN`, …).
    pub extensions: Vec<String>,
}

impl SmtpClient {
    /// Connects to `port` of `server`, reads the greeting and says `EHLO`;
    /// with [`TlsMode::StartTls`] it then says `STARTTLS` and `EHLO` again.
    pub fn connect(server: &MailServer, port: u16, tls: TlsMode) -> Self {
        let ca = (tls != TlsMode::None).then(|| server.ca_path());
        let mut client = Self {
            lines: Lines::connect(MailServer::addr(port), tls, ca.as_deref()),
            ca,
            extensions: Vec::new(),
        };
        let (code, text) = client.reply();
        assert_eq!(code, 220, "the SMTP greeting: {text:?}");
        client.ehlo();
        if tls == TlsMode::StartTls {
            let (code, text) = client.command("STARTTLS");
            assert_eq!(code, 220, "STARTTLS: {text:?}");
            let ca = client.ca.clone().unwrap();
            client.lines.start_tls(&ca);
            client.ehlo();
        }
        client
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        self.lines.is_tls()
    }

    fn ehlo(&mut self) {
        let (code, lines) = self.command("EHLO person.test");
        assert_eq!(code, 250, "EHLO: {lines:?}");
        self.extensions = lines.into_iter().skip(1).collect();
    }

    /// One reply: its code and its lines' texts.
    pub fn reply(&mut self) -> (u16, Vec<String>) {
        let mut texts = Vec::new();
        loop {
            let line = self
                .lines
                .read_line(TIMEOUT)
                .unwrap_or_else(|| panic!("no SMTP reply within {TIMEOUT:?} after {texts:?}"));
            let code = line.get(..3).and_then(|c| c.parse().ok()).unwrap_or(0);
            texts.push(line.get(4..).unwrap_or("").to_owned());
            if line.as_bytes().get(3) != Some(&b'-') {
                return (code, texts);
            }
        }
    }

    /// Sends one command line and reads the reply.
    pub fn command(&mut self, line: &str) -> (u16, Vec<String>) {
        self.lines.write_line(line);
        self.reply()
    }

    /// `AUTH PLAIN`: whether the server accepted it (`235`).
    pub fn auth_plain(&mut self, user: &str, password: &str) -> Result<(), String> {
        let token =
            base64::engine::general_purpose::STANDARD.encode(format!("\0{user}\0{password}"));
        match self.command(&format!("AUTH PLAIN {token}")) {
            (235, _) => Ok(()),
            (code, text) => Err(format!("{code} {}", text.join(" "))),
        }
    }

    /// `AUTH LOGIN` (user name and password each in a reply to the
    /// server's challenge): whether the server accepted it (`235`).
    pub fn auth_login(&mut self, user: &str, password: &str) -> Result<(), String> {
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        for (line, want) in [
            ("AUTH LOGIN".to_owned(), 334),
            (b64(user), 334),
            (b64(password), 235),
        ] {
            match self.command(&line) {
                (code, _) if code == want => {}
                (code, text) => return Err(format!("{code} {}", text.join(" "))),
            }
        }
        Ok(())
    }

    /// `MAIL FROM`, `RCPT TO` for each of `to`, `DATA` with `message`
    /// (dot-stuffed here); the first refusal (`code text`).
    pub fn send_mail(&mut self, from: &str, to: &[&str], message: &[u8]) -> Result<(), String> {
        let check = |(code, text): (u16, Vec<String>), want: u16| {
            if code == want {
                Ok(())
            } else {
                Err(format!("{code} {}", text.join(" ")))
            }
        };
        let utf8 = if from.is_ascii() && to.iter().all(|t| t.is_ascii()) {
            ""
        } else {
            " SMTPUTF8"
        };
        check(
            self.command(&format!(
                "MAIL FROM:<{}> BODY=8BITMIME{utf8}",
                envelope_address(from)
            )),
            250,
        )?;
        for rcpt in to {
            check(
                self.command(&format!("RCPT TO:<{}>", envelope_address(rcpt))),
                250,
            )?;
        }
        check(self.command("DATA"), 354)?;
        let mut data = Vec::with_capacity(message.len() + 16);
        for line in message.split_inclusive(|&b| b == b'\n') {
            if line.first() == Some(&b'.') {
                data.push(b'.');
            }
            data.extend_from_slice(line);
        }
        if !data.ends_with(b"\r\n") {
            data.extend_from_slice(b"\r\n");
        }
        data.extend_from_slice(b".\r\n");
        self.lines.write(&data);
        check(self.reply(), 250)
    }

    /// Says `QUIT`.
    pub fn quit(mut self) {
        self.lines.write_line("QUIT");
        let _ = self.lines.read_line(Duration::from_secs(5));
    }
}

/// The address of `Name <address>`, or `text` itself.
pub fn envelope_address(text: &str) -> &str {
    match (text.rfind('<'), text.rfind('>')) {
        (Some(start), Some(end)) if start < end => &text[start + 1..end],
        _ => text.trim(),
    }
}

/// A person's IMAP client for what needs no literals: `LOGIN`, `SELECT`,
/// `IDLE`, `NOOP`, `CAPABILITY`, `STARTTLS`. Mail itself is read with
/// [`MailServer::fetch_all`].
pub struct ImapClient {
    lines: Lines,
    tag: u32,
    /// The capabilities the server announced last.
    pub capabilities: Vec<String>,
}

impl ImapClient {
    /// Connects to IMAP: the plain port for [`TlsMode::None`] and
    /// [`TlsMode::StartTls`] (which then says `STARTTLS`), the implicit-TLS
    /// port for [`TlsMode::Implicit`]; reads the greeting.
    pub fn connect(server: &MailServer, tls: TlsMode) -> Self {
        let port = if tls == TlsMode::Implicit {
            server.imaps_port()
        } else {
            server.imap_port()
        };
        let ca = (tls != TlsMode::None).then(|| server.ca_path());
        let mut client = Self {
            lines: Lines::connect(MailServer::addr(port), tls, ca.as_deref()),
            tag: 0,
            capabilities: Vec::new(),
        };
        let greeting = client.lines.read_line(TIMEOUT).expect("an IMAP greeting");
        assert!(
            greeting.starts_with("* OK"),
            "the IMAP greeting: {greeting}"
        );
        client.capabilities = capabilities_in(&greeting);
        if tls == TlsMode::StartTls {
            client.command("STARTTLS").unwrap();
            client.lines.start_tls(ca.as_deref().unwrap());
        }
        client.command("CAPABILITY").unwrap();
        client
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        self.lines.is_tls()
    }

    /// Sends a tagged command and reads until its tagged answer: the
    /// untagged lines before it, or the answer's text unless it is `OK`.
    pub fn command(&mut self, command: &str) -> Result<Vec<String>, String> {
        self.tag += 1;
        let tag = format!("p{}", self.tag);
        self.lines.write_line(&format!("{tag} {command}"));
        let mut untagged = Vec::new();
        loop {
            let line = self
                .lines
                .read_line(TIMEOUT)
                .unwrap_or_else(|| panic!("no answer to {command:?} within {TIMEOUT:?}"));
            if let Some(rest) = line.strip_prefix(&format!("{tag} ")) {
                let caps = capabilities_in(rest);
                if !caps.is_empty() {
                    self.capabilities = caps;
                }
                return if rest.starts_with("OK") {
                    Ok(untagged)
                } else {
                    Err(rest.to_owned())
                };
            }
            if let Some(caps) = line.strip_prefix("* CAPABILITY ") {
                self.capabilities = caps.split(' ').map(str::to_owned).collect();
            }
            untagged.push(line);
        }
    }

    /// `LOGIN user password`.
    pub fn login(&mut self, user: &str, password: &str) -> Result<(), String> {
        self.command(&format!("LOGIN {} {}", quote(user), quote(password)))
            .map(drop)
    }

    /// `SELECT mailbox`: how many messages it has.
    pub fn select(&mut self, mailbox: &str) -> u32 {
        let lines = self.command(&format!("SELECT {}", quote(mailbox))).unwrap();
        lines
            .iter()
            .find_map(|l| l.strip_prefix("* ")?.strip_suffix(" EXISTS")?.parse().ok())
            .unwrap_or(0)
    }

    /// Starts `IDLE` (after [`ImapClient::select`]); the server's `+`
    /// continuation is read.
    pub fn idle(&mut self) {
        self.tag += 1;
        let tag = format!("p{}", self.tag);
        self.lines.write_line(&format!("{tag} IDLE"));
        let line = self.lines.read_line(TIMEOUT).expect("IDLE's continuation");
        assert!(line.starts_with('+'), "IDLE: {line}");
    }

    /// While idling: the next untagged line the server pushes within
    /// `timeout`, such as `* 3 EXISTS`.
    pub fn next_push(&mut self, timeout: Duration) -> Option<String> {
        self.lines.read_line(timeout)
    }

    /// While idling: waits for `* N EXISTS` and returns `N`.
    pub fn wait_exists(&mut self, timeout: Duration) -> Option<u32> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.read_line(left)?;
            if let Some(n) = line
                .strip_prefix("* ")
                .and_then(|l| l.strip_suffix(" EXISTS"))
                .and_then(|n| n.parse().ok())
            {
                return Some(n);
            }
        }
    }

    /// Ends `IDLE` (`DONE`), reading up to its tagged `OK`.
    pub fn done(&mut self) {
        self.lines.write_line("DONE");
        let tag = format!("p{} ", self.tag);
        loop {
            let line = self.lines.read_line(TIMEOUT).expect("IDLE's end");
            if let Some(rest) = line.strip_prefix(&tag) {
                assert!(rest.starts_with("OK"), "IDLE ended with {line}");
                return;
            }
        }
    }

    /// `LOGOUT`.
    pub fn logout(mut self) {
        let _ = self.command("LOGOUT");
    }

    /// Whether the server has closed the connection (a read within
    /// `timeout` finds its end).
    pub fn closed_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.lines.closed && Instant::now() < deadline {
            let _ = self
                .lines
                .read_line(deadline.saturating_duration_since(Instant::now()));
        }
        self.lines.closed
    }
}

/// The capabilities in a `[CAPABILITY …]` response code, if any.
fn capabilities_in(text: &str) -> Vec<String> {
    text.split_once("[CAPABILITY ")
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(caps, _)| caps.split(' ').map(str::to_owned).collect())
        .unwrap_or_default()
}

/// An IMAP quoted string.
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}
