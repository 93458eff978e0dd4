//! A real IRC network with accounts for tests: InspIRCd 3 with Anope 2.0's
//! NickServ linked to it, and people on it.
//!
//! [`IrcNetwork::start`] writes an `inspircd.conf` and an Anope
//! `services.conf` of its own into a temporary directory and runs
//! `inspircd --nofork --nopid --config FILE` on a free 127.0.0.1 port for
//! clients (and another for the services' link), then `anope --nofork`,
//! which links to it, waiting until NickServ is there. Both are stopped, and
//! the directory removed, when dropped; a watchdog does both when the test
//! process ends without dropping it (the network a test module shares,
//! [`IrcNetwork::shared`], lives in a static, which is never dropped). Run
//! as root, both run as `nobody` (InspIRCd refuses root unless told
//! otherwise; Anope only warns), and the directory is given to `nobody`.
//! `scripts/test-deps.d/21-inspircd-anope.sh` installs Debian's `inspircd`
//! and `anope` where they are missing.
//!
//! Accounts are made as a person makes them: [`IrcNetwork::register`]
//! connects as the account's nick and sends NickServ `REGISTER PASSWORD
//! EMAIL` (no confirmation mail: `registration = "none"`, mail off).
//!
//! # What InspIRCd 3.15 and Anope 2.0.12 (Debian 12) do, found with these tests
//!
//! - **Capabilities.** `CAP LS 302` lists `account-notify account-tag
//!   away-notify extended-join … sasl=EXTERNAL,PLAIN` (the modules this
//!   configuration loads: `cap`, `ircv3`, `ircv3_accounttag`, `sasl`,
//!   `services_account`; Anope's link needs `hidechans` too). `sasl` is
//!   listed only while the services are
//!   linked.
//! - **SASL.** InspIRCd relays `AUTHENTICATE` to Anope (`<sasl target>`),
//!   which checks the account's password: `900 nick mask ACCOUNT :You are
//!   now logged in as ACCOUNT` and `903`, or `904 :SASL authentication
//!   failed` for a wrong password (registration then goes on, not logged
//!   in). `WHOIS` shows the account (`330 me nick ACCOUNT :is logged in
//!   as`).
//! - **account-tag.** A client that acknowledged it gets `@account=NAME` on
//!   what a logged-in user sends (`PRIVMSG`, `NOTICE`, `JOIN`, …), and no
//!   tag from a user not logged in. The account is the one logged in to,
//!   whatever the nick.
//! - **Nicks.** A registered nick can be used by anyone not logged in (the
//!   accounts here are made without `killprotect`, so NickServ only says the
//!   nick is registered and renames nobody).
//! - **Casemapping.** Anope must use `rfc1459`, InspIRCd's; `ascii` fails
//!   the link (`CAPAB negotiation failed`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use super::irc::{Connect, IrcUser, TIMEOUT, is_root, on_path, tail, terminate, watch};

/// The IRC server's name.
pub const SERVER_NAME: &str = "irc.pincer.test";
/// The services' server name.
pub const SERVICES_NAME: &str = "services.pincer.test";

/// How long the network may take to come up.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// Free ports tried when another process takes one picked first.
const PORT_ATTEMPTS: usize = 5;
/// `nobody`, whom both servers run as when the tests run as root.
const NOBODY: u32 = 65534;

/// One InspIRCd with Anope linked to it.
pub struct IrcNetwork {
    dir: tempfile::TempDir,
    port: u16,
    link_port: u16,
    ircd: Mutex<Option<Child>>,
    services: Mutex<Option<Child>>,
}

fn binary(name: &str) -> PathBuf {
    on_path(name).unwrap_or_else(|| {
        panic!(
            "{name} is not installed (not on PATH nor in /usr/sbin): run \
             `bash scripts/test-deps.sh`, which installs Debian's inspircd and anope"
        )
    })
}

impl IrcNetwork {
    /// A network of its own.
    pub fn start() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pincer-ircnet-")
            .tempdir()
            .unwrap();
        let mut network = Self {
            dir,
            port: 0,
            link_port: 0,
            ircd: Mutex::new(None),
            services: Mutex::new(None),
        };
        // Before anything runs: a test process killed mid-start leaves nothing.
        watch(
            network.dir.path(),
            &["ircd.pid", "services.pid"],
            std::process::id(),
            "an InspIRCd and Anope test network",
        );
        for sub in ["anope", "anope/data", "anope/logs"] {
            std::fs::create_dir_all(network.dir.path().join(sub)).unwrap();
        }
        for attempt in 1..=PORT_ATTEMPTS {
            network.port = super::free_port();
            network.link_port = super::free_port();
            network.write_config();
            match network.start_ircd() {
                Ok(()) => break,
                Err(why) if attempt < PORT_ATTEMPTS => {
                    eprintln!("InspIRCd did not start on port {}: {why}", network.port);
                }
                Err(why) => panic!("InspIRCd did not start on port {}: {why}", network.port),
            }
        }
        network.start_services();
        network
    }

    /// The network this test module shares, started on first use: tests
    /// sharing it use nicks, accounts and channels of their own. Never
    /// dropped; its watchdog stops it when the test process exits.
    pub fn shared() -> &'static IrcNetwork {
        static SHARED: OnceLock<IrcNetwork> = OnceLock::new();
        SHARED.get_or_init(IrcNetwork::start)
    }

    /// The clients' port's address, 127.0.0.1.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The temporary directory: configurations, logs, the services' data.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// InspIRCd's log.
    pub fn ircd_log(&self) -> PathBuf {
        self.dir.path().join("inspircd.log")
    }

    /// What Anope wrote to its standard output (its log as well).
    pub fn services_log(&self) -> PathBuf {
        self.dir.path().join("services.out")
    }

    /// The last lines of both logs, for failure messages.
    pub fn logs(&self) -> String {
        format!(
            "--- {} ---\n{}\n--- {} ---\n{}\n--- {} ---\n{}",
            self.ircd_log().display(),
            tail(&self.ircd_log()),
            self.dir.path().join("ircd.out").display(),
            tail(&self.dir.path().join("ircd.out")),
            self.services_log().display(),
            tail(&self.services_log()),
        )
    }

    fn write_config(&self) {
        let dir = self.dir.path().display().to_string();
        let (port, link) = (self.port, self.link_port);
        std::fs::write(self.dir.path().join("motd.txt"), "Pincer test network\n").unwrap();
        std::fs::write(
            self.dir.path().join("inspircd.conf"),
            format!(
                r#"# Written by tests/it/support/inspircd.rs
<server name="{SERVER_NAME}" description="Pincer test server" network="PincerTest">
<admin name="Pincer tests" nick="admin" email="tests@pincer.test">
<bind address="127.0.0.1" port="{port}" type="clients">
<bind address="127.0.0.1" port="{link}" type="servers">
<connect name="main" allow="*" timeout="60" pingfreq="120" hardsendq="1M" softsendq="64K" recvq="16K" threshold="1000" commandrate="100000" fakelag="no" localmax="1000" globalmax="1000" useident="no" resolvehostnames="no" limit="5000">
<cidr ipv4clone="32" ipv6clone="128">
<files motd="{dir}/motd.txt">
<log method="file" type="* -USERINPUT -USEROUTPUT" level="default" target="{dir}/inspircd.log">
<limits maxnick="30" maxchan="64" maxmodes="20" maxident="10" maxhost="64" maxquit="255" maxtopic="307" maxkick="255" maxreal="128" maxgecos="128" maxaway="200">
<security hideulines="no" flatlinks="no" hidesplits="no" announceinvites="dynamic" maxtargets="20">
<performance netbuffersize="10240" somaxconn="128" softlimit="1024" clonesonconnect="no" quietbursts="yes">
<module name="spanningtree">
<module name="services_account">
<module name="sasl">
<module name="cap">
<module name="ircv3">
<module name="ircv3_accounttag">
<module name="hidechans">
<uline server="{SERVICES_NAME}" silent="yes">
<link name="{SERVICES_NAME}" ipaddr="127.0.0.1" port="{link}" allowmask="127.0.0.0/8" sendpass="pincer-link" recvpass="pincer-link">
<sasl target="{SERVICES_NAME}" requiressl="no">
"#
            ),
        )
        .unwrap();
        let anope = format!("{dir}/anope");
        std::fs::write(format!("{anope}/services.motd"), "Pincer test services\n").unwrap();
        std::fs::write(
            format!("{anope}/services.conf"),
            format!(
                r#"/* Written by tests/it/support/inspircd.rs */
uplink {{ host = "127.0.0.1"; ipv6 = no; ssl = no; port = {link}; password = "pincer-link"; }}
serverinfo {{ name = "{SERVICES_NAME}"; description = "Pincer test services"; pid = "{anope}/anope.pid"; motd = "{anope}/services.motd"; }}
module {{ name = "inspircd3"; use_server_side_mlock = yes; use_server_side_topiclock = yes; }}
networkinfo {{ networkname = "PincerTest"; nicklen = 30; userlen = 10; hostlen = 64; chanlen = 32; modelistsize = 100; vhost_chars = "abcdefghijklmnopqrstuvwxyz.-"; allow_undotted_vhosts = false; disallow_start_or_end = ".-"; }}
options {{ casemap = "rfc1459"; seed = 1234567890; strictpasswords = no; badpasslimit = 0; badpasstimeout = 1h; updatetimeout = 5m; expiretimeout = 30m; readtimeout = 5s; warningtimeout = 4h; timeoutcheck = 3s; retrywait = 1s; hideprivilegedcommands = yes; hideregisteredcommands = yes; }}
log {{ target = "services.log"; admin = "*"; commands = "*"; servers = "*"; users = "connect disconnect nick"; other = "*"; rawio = no; debug = no; }}
mail {{ usemail = no; }}
service {{ nick = "NickServ"; user = "services"; host = "{SERVICES_NAME}"; gecos = "Nickname Registration Service"; }}
module {{ name = "nickserv"; client = "NickServ"; forceemail = no; confirmemailchanges = no; defaults = "hide_email hide_mask"; regdelay = 0s; expire = 0; secureadmins = yes; modeonid = yes; killquick = 20s; kill = 60s; enforceruser = "enforcer"; enforcerhost = "{SERVICES_NAME}"; releasetimeout = 1m; guestnickprefix = "Guest"; nonicknameownership = no; passlen = 32; }}
command {{ service = "NickServ"; name = "HELP"; command = "generic/help"; }}
module {{ name = "ns_register"; registration = "none"; resenddelay = 90s; }}
command {{ service = "NickServ"; name = "REGISTER"; command = "nickserv/register"; }}
module {{ name = "ns_identify"; maxlogins = 10; }}
command {{ service = "NickServ"; name = "IDENTIFY"; command = "nickserv/identify"; }}
module {{ name = "ns_info" }}
command {{ service = "NickServ"; name = "INFO"; command = "nickserv/info"; }}
module {{ name = "m_sasl" }}
module {{ name = "enc_sha256" }}
module {{ name = "db_flatfile"; database = "anope.db"; keepbackups = 0; fork = no; }}
"#
            ),
        )
        .unwrap();
        if is_root() {
            chown_tree(self.dir.path());
        }
    }

    /// `command` as `nobody` when the tests run as root, in a process
    /// group of its own, its output appended to `log` in the directory.
    fn spawn(&self, mut command: Command, log: &str, pid_file: &str) -> Child {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(log))
            .unwrap();
        if is_root() {
            command.uid(NOBODY).gid(NOBODY);
        }
        let child = command
            .process_group(0)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {log}: {err}"));
        std::fs::write(self.dir.path().join(pid_file), child.id().to_string()).unwrap();
        child
    }

    /// Starts InspIRCd and waits until its port takes connections; the
    /// failure (its output) otherwise, the server stopped.
    fn start_ircd(&self) -> Result<(), String> {
        let mut command = Command::new(binary("inspircd"));
        command
            .args(["--nofork", "--nopid", "--config"])
            .arg(self.dir.path().join("inspircd.conf"));
        let mut child = self.spawn(command, "ircd.out", "ircd.pid");
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!("inspircd exited ({status})\n{}", self.logs()));
            }
            let out = std::fs::read_to_string(self.dir.path().join("ircd.out")).unwrap_or_default();
            if out.contains("is now running") && TcpStream::connect(self.addr()).is_ok() {
                *self.ircd.lock().unwrap() = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                terminate(&mut child, Duration::from_secs(5));
                return Err(format!(
                    "no answer within {READY_WITHIN:?}\n{}",
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts Anope and waits until NickServ is on the network.
    fn start_services(&self) {
        let anope = self.dir.path().join("anope");
        let mut command = Command::new(binary("anope"));
        command
            .arg("--nofork")
            .arg(format!("--confdir={}", anope.display()))
            .arg(format!("--dbdir={}", anope.join("data").display()))
            .arg(format!("--logdir={}", anope.join("logs").display()))
            .arg("--modulesdir=/usr/lib/anope")
            .arg("--config=services.conf");
        let child = self.spawn(command, "services.out", "services.pid");
        *self.services.lock().unwrap() = Some(child);
        let deadline = Instant::now() + READY_WITHIN;
        let mut probe = IrcUser::connect_to(self.addr(), "probe", &Connect::default())
            .unwrap_or_else(|why| panic!("cannot connect to InspIRCd: {why}\n{}", self.logs()));
        loop {
            if Self::account_of(&mut probe, "NickServ").is_some() {
                probe.quit("ready");
                return;
            }
            let exited = self
                .services
                .lock()
                .unwrap()
                .as_mut()
                .and_then(|child| child.try_wait().unwrap());
            if let Some(status) = exited {
                panic!("anope exited ({status})\n{}", self.logs());
            }
            assert!(
                Instant::now() < deadline,
                "Anope's NickServ did not come within {READY_WITHIN:?}\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Makes account `account` with `password`, as a person does: connected
    /// as the nick `account`, `REGISTER` to NickServ. Panics unless
    /// NickServ says it is registered.
    pub fn register(&self, account: &str, password: &str) {
        let mut user = IrcUser::connect_to(self.addr(), account, &Connect::default())
            .unwrap_or_else(|why| panic!("{account} could not connect: {why}\n{}", self.logs()));
        user.privmsg(
            "NickServ",
            &format!("REGISTER {password} {account}@pincer.test"),
        );
        let answer = user.expect(|m| m.is("NOTICE") && m.nick() == Some("NickServ"), TIMEOUT);
        assert!(
            answer.text().contains("registered"),
            "NickServ did not register {account}: {}",
            answer.raw
        );
        user.quit("registered");
    }

    /// Connects as `nick`, logged in to `account` with SASL PLAIN, with
    /// `account-tag` acknowledged.
    pub fn login(&self, nick: &str, account: &str, password: &str) -> IrcUser {
        IrcUser::connect_to(
            self.addr(),
            nick,
            &Connect {
                caps: vec!["account-tag".to_owned()],
                sasl: Some((account.to_owned(), password.to_owned())),
                ..Connect::default()
            },
        )
        .unwrap_or_else(|why| panic!("{nick} could not log in as {account}: {why}"))
    }

    /// Connects as `nick`, logged in to no account, with `account-tag`
    /// acknowledged.
    pub fn guest(&self, nick: &str) -> IrcUser {
        IrcUser::connect_to(
            self.addr(),
            nick,
            &Connect {
                caps: vec!["account-tag".to_owned()],
                ..Connect::default()
            },
        )
        .unwrap_or_else(|why| panic!("{nick} could not connect: {why}"))
    }

    /// What `WHOIS nick` asked by `asker` says: `None` when there is no
    /// such nick, else `Some` of the account it is logged in to (`330`),
    /// itself `None` when it is logged in to none.
    pub fn account_of(asker: &mut IrcUser, nick: &str) -> Option<Option<String>> {
        asker.send_raw(&format!("WHOIS {nick}"));
        let (mut there, mut account) = (false, None);
        loop {
            let line = asker.expect(
                |m| {
                    ["311", "330", "318"].contains(&m.command.as_str())
                        && m.arg(1).is_some_and(|n| n.eq_ignore_ascii_case(nick))
                },
                TIMEOUT,
            );
            match line.command.as_str() {
                "311" => there = true,
                "330" => account = line.arg(2).map(str::to_owned),
                _ => return there.then_some(account),
            }
        }
    }

    /// Stops both servers. Stopping a stopped network does nothing.
    pub fn stop(&self) {
        for slot in [&self.services, &self.ircd] {
            if let Some(mut child) = slot.lock().unwrap().take() {
                terminate(&mut child, Duration::from_secs(5));
            }
        }
    }
}

impl Drop for IrcNetwork {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Gives `dir` and everything in it to `nobody`.
fn chown_tree(dir: &Path) {
    std::os::unix::fs::chown(dir, Some(NOBODY), Some(NOBODY)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            chown_tree(&path);
        } else {
            std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).unwrap();
        }
    }
}
