//! A real PostgreSQL server for tests: `initdb` into a temporary directory,
//! started on a free loopback port (and a socket in that directory), stopped
//! and removed when dropped. A watchdog stops it, and removes the directory,
//! when the test process ends without dropping it: the one server a test
//! binary shares ([`shared`]) lives in a static, which is never dropped.
//! As root, `initdb`, `pg_ctl` and the server run as the `postgres` user
//! (PostgreSQL refuses root), in a directory handed to it.
//!
//! The binaries are Debian's newest under `/usr/lib/postgresql/*/bin`, else
//! `initdb` and `pg_ctl` on `PATH`; `scripts/test-deps.sh` installs
//! Debian's `postgresql` where they are missing. TLS certificates are made
//! with the `openssl` command line. No async runtime: `psql` creates the
//! databases.
//!
//! The library's unit tests include this file as `crate::testing::postgres`;
//! the integration tests as `support::postgres`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The server's superuser, trusted without a password (loopback and socket).
pub const USER: &str = "pincer";

/// How long a server may take to accept connections.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// Free ports tried when another process takes the one picked first.
const PORT_ATTEMPTS: usize = 5;

/// One running server.
pub struct PgServer {
    dir: tempfile::TempDir,
    /// `initdb`, `pg_ctl` and `postgres`.
    bin: PathBuf,
    psql: PathBuf,
    port: u16,
    /// Running as root: PostgreSQL's programs run as the `postgres` user.
    as_postgres: bool,
    tls: bool,
    databases: AtomicUsize,
}

/// The directory holding `initdb` and `pg_ctl` (Debian's newest under
/// `/usr/lib/postgresql`, else `PATH`'s), and `psql` (beside them, else
/// `PATH`'s).
fn binaries() -> (PathBuf, PathBuf) {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()).then_some((version, bin))
        })
        .collect();
    versions.sort();
    let on_path = |program: &str| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|file| file.is_file())
    };
    let bin = versions
        .pop()
        .map(|(_, bin)| bin)
        .or_else(|| {
            on_path("initdb")
                .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
                .filter(|dir| dir.join("pg_ctl").is_file())
        })
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed: no initdb and pg_ctl in /usr/lib/postgresql/*/bin \
                 or on PATH (scripts/test-deps.sh installs Debian's postgresql)"
            )
        });
    let psql = Some(bin.join("psql"))
        .filter(|psql| psql.is_file())
        .or_else(|| on_path("psql"))
        .unwrap_or_else(|| {
            panic!(
                "psql is not installed: not in {} nor on PATH \
                 (scripts/test-deps.sh installs Debian's postgresql)",
                bin.display()
            )
        });
    (bin, psql)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command`, panicking with `what` it is when it cannot be started.
fn run(command: &mut Command, what: &str) -> Output {
    command
        .output()
        .unwrap_or_else(|err| panic!("cannot run {what}: {err}"))
}

/// Runs `command`, panicking with its error output unless it succeeds.
fn run_ok(command: &mut Command, what: &str) {
    let out = run(command, what);
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr).trim_end()
    );
}

/// The last lines of a log file, for failure messages.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

/// `text` quoted for `sh`.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

impl PgServer {
    /// A server of its own (for a test that stops and starts it, or wants
    /// one nobody else uses).
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A server that takes TLS connections only, over TCP, with a
    /// certificate for `localhost` and 127.0.0.1 signed by a CA of its own
    /// ([`PgServer::ca_path`]); [`PgServer::url`] asks for `verify-full`.
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        let (bin, psql) = binaries();
        let dir = tempfile::Builder::new()
            .prefix("pincer-pg-")
            .tempdir()
            .unwrap();
        let mut server = Self {
            dir,
            bin,
            psql,
            port: 0,
            as_postgres: is_root(),
            tls,
            databases: AtomicUsize::new(0),
        };
        server.hand_over();
        // Before anything runs: a test process killed mid-start leaves nothing.
        server.watch(std::process::id());
        server.initdb();
        if tls {
            server.make_certificates();
        }
        let data = server.data_dir();
        let initial = std::fs::read_to_string(data.join("postgresql.conf")).unwrap();
        for attempt in 1..=PORT_ATTEMPTS {
            server.port = free_port();
            let conf = format!(
                "{initial}\n# pincer tests\nlisten_addresses = '127.0.0.1'\nport = {}\n\
                 unix_socket_directories = '{}'\nmax_connections = 200\nshared_buffers = 32MB\n{}",
                server.port,
                server.dir.path().display(),
                if tls {
                    "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n"
                } else {
                    ""
                }
            );
            std::fs::write(data.join("postgresql.conf"), conf).unwrap();
            let logged = std::fs::metadata(server.log_path()).map_or(0, |m| m.len());
            match server.try_start() {
                Ok(()) => {
                    server.wait_ready();
                    return server;
                }
                // Another process took the port between our probe and the
                // server's bind: another one.
                Err(_) if attempt < PORT_ATTEMPTS && server.bind_failed_since(logged) => {}
                Err(why) => panic!("PostgreSQL did not start on port {}: {why}", server.port),
            }
        }
        unreachable!("the last attempt returns or panics")
    }

    /// As root, gives the directory to the `postgres` user.
    fn hand_over(&self) {
        if self.as_postgres {
            run_ok(
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(self.dir.path()),
                "chown postgres (is there a postgres user? scripts/test-deps.sh installs \
                 Debian's postgresql, which makes it)",
            );
        }
    }

    fn initdb(&self) {
        let out = run(
            self.tool("initdb")
                .arg("-D")
                .arg(self.data_dir())
                .args(["--auth=trust", "-U", USER])
                .args(["--encoding=UTF8", "--no-locale"])
                // Only initdb skips its fsync; the server keeps `fsync = on`.
                .arg("--no-sync"),
            "initdb",
        );
        assert!(
            out.status.success(),
            "initdb failed{}: {}",
            if self.as_postgres {
                format!(
                    " (it runs as the postgres user, who must reach {})",
                    self.dir.path().display()
                )
            } else {
                String::new()
            },
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
        if self.tls {
            // TLS connections only over TCP; the socket for `psql`.
            std::fs::write(
                self.data_dir().join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The temporary directory: data (`data/`), log, socket, certificates.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A PostgreSQL program, run as the `postgres` user when this is root.
    fn tool(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        let mut cmd = if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        };
        // A working directory the postgres user can read, there before
        // the server and after.
        cmd.current_dir("/").stdin(Stdio::null());
        cmd
    }

    fn pg_ctl(&self) -> Command {
        let mut cmd = self.tool("pg_ctl");
        cmd.arg("-D").arg(self.data_dir());
        cmd
    }

    /// The CA certificate a `verify-full` client checks the server against.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn make_certificates(&self) {
        let dir = self.dir.path();
        let openssl = |args: &[&str]| {
            run_ok(
                Command::new("openssl").args(args).current_dir(dir),
                "openssl (scripts/test-deps.sh installs it)",
            );
        };
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=pincer test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ]);
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName = DNS:localhost, IP:127.0.0.1\nbasicConstraints = CA:FALSE\n\
             keyUsage = digitalSignature, keyEncipherment\nextendedKeyUsage = serverAuth\n",
        )
        .unwrap();
        openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
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
        let data = self.data_dir();
        for file in ["server.crt", "server.key"] {
            std::fs::copy(dir.join(file), data.join(file)).unwrap();
        }
        self.hand_over();
        // The server refuses a key others can read; clients of any user
        // read the CA.
        let mode = |path: &Path, mode| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        mode(&data.join("server.key"), 0o600);
        mode(dir, 0o755);
        mode(&self.ca_path(), 0o644);
    }

    /// `pg_ctl start`, waiting until it accepts connections; the failure
    /// (`pg_ctl`'s words and the log's tail) otherwise.
    fn try_start(&self) -> Result<(), String> {
        let out = run(
            self.pg_ctl().arg("-l").arg(self.log_path()).args([
                "-w",
                "-t",
                &READY_WITHIN.as_secs().to_string(),
                "start",
            ]),
            "pg_ctl",
        );
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{}\n--- {} ---\n{}",
            String::from_utf8_lossy(&out.stderr).trim_end(),
            self.log_path().display(),
            tail(&self.log_path())
        ))
    }

    /// Whether the log, past its first `offset` bytes, says the port was taken.
    fn bind_failed_since(&self, offset: u64) -> bool {
        let log = std::fs::read(self.log_path()).unwrap_or_default();
        let new = log
            .get(usize::try_from(offset).unwrap_or(0)..)
            .unwrap_or(&[]);
        let new = String::from_utf8_lossy(new);
        new.contains("could not bind") || new.contains("Address already in use")
    }

    /// Waits until `SELECT 1` answers.
    fn wait_ready(&self) {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let out = self.psql("postgres", "SELECT 1");
            if out.status.success() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "PostgreSQL does not answer on port {} within {READY_WITHIN:?}: {}\n--- {} ---\n{}",
                self.port,
                String::from_utf8_lossy(&out.stderr).trim_end(),
                self.log_path().display(),
                tail(&self.log_path())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the server again after [`PgServer::stop`]: same data, same port.
    pub fn start_again(&self) {
        if let Err(why) = self.try_start() {
            panic!(
                "PostgreSQL did not start again on port {}: {why}",
                self.port
            );
        }
        self.wait_ready();
    }

    /// A fast shutdown (`pg_ctl stop -m fast`): sessions are ended, every
    /// committed transaction is kept. Stopping a stopped server does nothing.
    pub fn stop(&self) {
        let out = run(self.pg_ctl().args(["-m", "fast", "-w", "stop"]), "pg_ctl");
        assert!(
            out.status.success() || !self.is_running(),
            "PostgreSQL did not stop: {}\n--- {} ---\n{}",
            String::from_utf8_lossy(&out.stderr).trim_end(),
            self.log_path().display(),
            tail(&self.log_path())
        );
    }

    /// Whether the server is running (`pg_ctl status`).
    pub fn is_running(&self) -> bool {
        run(self.pg_ctl().arg("status"), "pg_ctl").status.success()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL of `database` on this server, for Pincer: `sslmode=disable`,
    /// or, on a TLS server, `verify-full` against [`PgServer::ca_path`].
    pub fn url(&self, database: &str) -> String {
        if self.tls {
            format!(
                "postgres://{USER}@localhost:{}/{database}?sslmode=verify-full&sslrootcert={}",
                self.port,
                self.ca_path().display()
            )
        } else {
            format!(
                "postgres://{USER}@127.0.0.1:{}/{database}?sslmode=disable",
                self.port
            )
        }
    }

    /// `psql` stopping at the first error, printing values only (unaligned,
    /// tuples only), without `~/.psqlrc` or a service or address from the
    /// environment.
    fn psql_command(&self) -> Command {
        let mut cmd = Command::new(&self.psql);
        cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .env_remove("PGSERVICE")
            .env_remove("PGHOSTADDR")
            .stdin(Stdio::null());
        cmd
    }

    /// Runs SQL in `database` with `psql` over the socket in the server's
    /// directory: its output.
    pub fn psql(&self, database: &str, sql: &str) -> Output {
        run(
            self.psql_command()
                .arg("-h")
                .arg(self.dir.path())
                .args(["-p", &self.port.to_string(), "-U", USER, "-d", database])
                .args(["-c", sql]),
            "psql",
        )
    }

    /// Runs SQL with `psql` connecting as `conninfo` says (a URL, or
    /// `key=value` pairs such as `host=localhost sslmode=verify-full …`),
    /// to check what a client sees over TCP and TLS: its output.
    pub fn psql_at(&self, conninfo: &str, sql: &str) -> Output {
        run(
            self.psql_command().args(["-d", conninfo, "-c", sql]),
            "psql",
        )
    }

    /// A new, empty database with a name of its own; its URL.
    pub fn fresh_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.databases.fetch_add(1, Ordering::SeqCst)
        );
        let out = self.psql("postgres", &format!("CREATE DATABASE {name}"));
        assert!(
            out.status.success(),
            "CREATE DATABASE {name} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
        self.url(&name)
    }

    /// Stops this server (immediately) and removes its directory once
    /// process `pid` has ended, unless the directory is gone by then (the
    /// server was dropped). A detached `sh` that polls twice a second, in
    /// a process group of its own, so that a Ctrl-C or a kill of the test
    /// process's group does not take it along.
    pub fn watch(&self, pid: u32) {
        let dir = shell_quote(&self.dir.path().display().to_string());
        let pg_ctl = shell_quote(&self.bin.join("pg_ctl").display().to_string());
        let data = shell_quote(&self.data_dir().display().to_string());
        let runuser = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "(while kill -0 {pid} 2>/dev/null && [ -d {dir} ]; do sleep 0.5; done; \
             if [ -d {dir} ]; then {runuser}{pg_ctl} -D {data} -m immediate -w stop; rm -rf {dir}; fi) \
             </dev/null >/dev/null 2>&1 &"
        );
        // The outer `sh` returns at once; the loop is left to init.
        run_ok(
            Command::new("sh")
                .args(["-c", &script])
                .current_dir("/")
                .stdin(Stdio::null())
                .process_group(0),
            "sh (the watchdog of a PostgreSQL test server)",
        );
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .pg_ctl()
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The server this test binary shares, started on first use: each test
/// takes a [`PgServer::fresh_database`]. Never dropped; its watchdog stops
/// it when the test process exits.
pub fn shared() -> &'static PgServer {
    static SHARED: OnceLock<PgServer> = OnceLock::new();
    SHARED.get_or_init(PgServer::start)
}
