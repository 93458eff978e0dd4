//! A real PostgreSQL server for tests: `initdb` into a temporary directory,
//! started on a free loopback port (and a socket in that directory), stopped
//! when dropped — or, for the one server a test binary shares
//! ([`shared`]), by a watchdog when the test process exits. As root the
//! server runs as the `postgres` user (PostgreSQL refuses root).
//! `scripts/test-deps.sh` installs Debian's `postgresql` where it is missing.
//!
//! The library's unit tests include this file as `crate::testing::postgres`;
//! the integration tests as `support::postgres`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The user the server's superuser is named after, with trust auth on loopback.
const USER: &str = "pincer";

/// One running server.
pub struct PgServer {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
    tls: bool,
    databases: AtomicUsize,
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`: Debian's newest
/// under `/usr/lib/postgresql`, else wherever `PATH` has `pg_ctl`.
fn binaries() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .find(|dir| dir.join("pg_ctl").exists() && dir.join("initdb").exists())
        .unwrap_or_else(|| {
            panic!(
                "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or PATH): \
                 run scripts/test-deps.sh, which installs Debian's postgresql"
            )
        })
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

impl PgServer {
    /// A server of its own, for a test that stops and starts it.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// A server that speaks TLS only with a certificate for `localhost` and
    /// 127.0.0.1 signed by a CA of its own ([`PgServer::ca_path`]).
    pub fn start_tls() -> Self {
        Self::start_with(true)
    }

    fn start_with(tls: bool) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pincer-pg-")
            .tempdir()
            .unwrap();
        let as_postgres = is_root();
        let server = Self {
            bin: binaries(),
            port: free_port(),
            as_postgres,
            tls,
            databases: AtomicUsize::new(0),
            dir,
        };
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(server.dir.path())
                .status()
                .unwrap();
            assert!(
                ok.success(),
                "cannot hand the test directory to the postgres user"
            );
        }
        let data = server.data_dir();
        let out = server
            .tool("initdb")
            .arg("-D")
            .arg(&data)
            .args([
                "--auth=trust",
                "-U",
                USER,
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\nmax_connections = 200\nshared_buffers = 32MB\n",
            server.port,
            server.dir.path().display()
        );
        if tls {
            server.make_certificates();
            conf.push_str("ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
            // Only TLS connections over TCP.
            std::fs::write(
                data.join("pg_hba.conf"),
                "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
            )
            .unwrap();
        }
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        std::io::Write::write_all(&mut file, conf.as_bytes()).unwrap();
        server.start_again();
        server
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// A PostgreSQL program, run as the `postgres` user when this is root.
    fn tool(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        if self.as_postgres {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(program);
            cmd
        } else {
            Command::new(program)
        }
    }

    /// The CA certificate a `verify-full` client checks the server against.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn make_certificates(&self) {
        let dir = self.dir.path();
        let data = self.data_dir();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
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
            dir.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(&[
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
        run(&[
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
            "san.ext",
            "-out",
            "server.crt",
        ]);
        for file in ["server.crt", "server.key"] {
            std::fs::copy(dir.join(file), data.join(file)).unwrap();
        }
        if self.as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir)
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let ok = Command::new("chmod")
            .arg("600")
            .arg(data.join("server.key"))
            .status()
            .unwrap();
        assert!(ok.success());
        // The CA is read by the test process too.
        let ok = Command::new("chmod")
            .args(["a+rx"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Starts the server (again, after [`PgServer::stop`]): same data, same port.
    pub fn start_again(&self) {
        let out = self
            .tool("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_path())
            .args(["-w", "-t", "30", "start"])
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "PostgreSQL did not start: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.log_path()).unwrap_or_default()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.psql("postgres", "SELECT 1").status.success() {
            assert!(
                Instant::now() < deadline,
                "PostgreSQL does not answer: {}",
                std::fs::read_to_string(self.log_path()).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A fast shutdown: sessions are ended, committed data is kept.
    pub fn stop(&self) {
        let _ = self
            .tool("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL of `database` on this server, for Pincer.
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

    /// Runs one statement with `psql` over the socket directory.
    pub fn psql(&self, database: &str, sql: &str) -> std::process::Output {
        Command::new("psql")
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(self.dir.path())
            .args([
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-d",
                database,
                "-c",
                sql,
            ])
            .output()
            .unwrap()
    }

    /// A new, empty database; its URL.
    pub fn fresh_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            self.databases.fetch_add(1, Ordering::SeqCst)
        );
        let out = self.psql("postgres", &format!("CREATE DATABASE {name}"));
        assert!(
            out.status.success(),
            "CREATE DATABASE {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }

    /// Stops the server when process `pid` exits (for the shared server,
    /// whose static is never dropped).
    fn stop_with(&self, pid: u32) {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.data_dir();
        let stop = if self.as_postgres {
            format!(
                "runuser -u postgres -- {} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            )
        } else {
            format!(
                "{} -D {} -m immediate stop",
                pg_ctl.display(),
                data.display()
            )
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop} >/dev/null 2>&1; rm -rf {}",
            self.dir.path().display()
        );
        let _ = Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .tool("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// The server this test binary shares: each test takes a fresh database.
pub fn shared() -> &'static PgServer {
    static SHARED: OnceLock<PgServer> = OnceLock::new();
    SHARED.get_or_init(|| {
        let server = PgServer::start();
        server.stop_with(std::process::id());
        server
    })
}
