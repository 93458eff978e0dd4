//! The PostgreSQL harness's own tests ([`super::postgres`]): a server of
//! its own with fresh databases over the socket and TCP, a restart that
//! keeps committed rows, TLS that verifies for `localhost` and 127.0.0.1,
//! one shared server per test binary that ends with the test process, and
//! the watchdog behind that. The library's unit tests run them from
//! `src/testing.rs`; the integration tests include this file in
//! `tests/it/pg_harness.rs`, against their copy of the harness.

use std::process::Output;
use std::time::{Duration, Instant};

use super::postgres::{PgServer, shared};

/// A query's only value, panicking with `psql`'s words when it fails.
fn value(out: Output) -> String {
    assert!(
        out.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The database a harness URL names.
fn database(url: &str) -> &str {
    let url = url.split_once('?').map_or(url, |(url, _)| url);
    url.rsplit_once('/').unwrap().1
}

/// The process id of a server's postmaster.
fn postmaster(server: &PgServer) -> String {
    let pid = std::fs::read_to_string(server.dir().join("data/postmaster.pid")).unwrap();
    pid.lines().next().unwrap().to_owned()
}

/// Whether process `pid` runs (a zombie has ended).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
        !state.starts_with(['Z', 'X'])
    })
}

#[test]
fn fresh_databases_answer_and_keep_their_rows_across_a_restart() {
    let started = Instant::now();
    let server = PgServer::start();
    eprintln!(
        "a PostgreSQL test server started in {:?}",
        started.elapsed()
    );
    let port = server.port();
    let first = server.fresh_database();
    let second = server.fresh_database();
    assert_ne!(first, second);
    for url in [&first, &second] {
        assert!(
            url.starts_with(&format!("postgres://pincer@127.0.0.1:{port}/"))
                && url.ends_with("?sslmode=disable"),
            "{url}"
        );
        // Over the socket, and over TCP as the URL says.
        assert_eq!(value(server.psql(database(url), "SELECT 1")), "1");
        assert_eq!(value(server.psql_at(url, "SELECT 1")), "1");
    }
    assert_eq!(value(server.psql_at(&first, "SHOW fsync")), "on");
    assert_eq!(value(server.psql_at(&first, "SHOW max_connections")), "200");
    value(server.psql_at(
        &first,
        "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('committed')",
    ));

    server.stop();
    assert!(!server.is_running());
    assert!(!server.psql_at(&first, "SELECT 1").status.success());
    server.stop();
    server.start_again();
    assert_eq!(server.port(), port);
    assert_eq!(
        value(server.psql_at(&first, "SELECT v FROM kept")),
        "committed"
    );
    assert_eq!(value(server.psql_at(&second, "SELECT 1")), "1");
}

#[test]
fn a_tls_server_certificate_verifies_for_localhost_and_its_address() {
    let started = Instant::now();
    let server = PgServer::start_tls();
    eprintln!(
        "a PostgreSQL TLS test server started in {:?}",
        started.elapsed()
    );
    let url = server.fresh_database();
    assert!(
        url.contains(&format!("@localhost:{}/", server.port()))
            && url.contains("sslmode=verify-full")
            && url.contains(&format!("sslrootcert={}", server.ca_path().display())),
        "{url}"
    );
    let name = database(&url);
    let ssl = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";
    let conninfo = |host: &str, sslmode: &str| {
        format!(
            "host={host} hostaddr=127.0.0.1 port={} user=pincer dbname={name} \
             sslmode={sslmode} sslrootcert={}",
            server.port(),
            server.ca_path().display()
        )
    };
    // libpq checks the certificate against the CA and the host name.
    assert_eq!(value(server.psql_at(&url, ssl)), "t");
    assert_eq!(
        value(server.psql_at(&conninfo("localhost", "verify-full"), ssl)),
        "t"
    );
    assert_eq!(
        value(server.psql_at(&conninfo("127.0.0.1", "verify-full"), ssl)),
        "t"
    );
    // Another name does not verify; without TLS the server refuses.
    let out = server.psql_at(&conninfo("pincer.invalid", "verify-full"), ssl);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("does not match host name"),
        "{err}"
    );
    let out = server.psql_at(&conninfo("localhost", "disable"), ssl);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no encryption"),
        "{err}"
    );
}

/// Set in the test process [`the_shared_server_ends_with_the_test_process`]
/// starts, which runs [`one_shared_server_per_test_binary`] alone.
const CHILD: &str = "PINCER_TEST_PG_CHILD";

#[test]
fn one_shared_server_per_test_binary() {
    let server = shared();
    assert!(std::ptr::eq(server, shared()));
    let url = server.fresh_database();
    assert_eq!(value(server.psql_at(&url, "SELECT 1")), "1");
    if std::env::var_os(CHILD).is_some() {
        eprintln!(
            "shared server: pid={} dir={}",
            postmaster(server),
            server.dir().display()
        );
    }
}

/// The shared server lives in a static, never dropped: its watchdog
/// stops it and removes its directory when the test process exits.
#[test]
fn the_shared_server_ends_with_the_test_process() {
    let test = module_path!().split_once("::").unwrap().1;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("{test}::one_shared_server_per_test_binary"),
        ])
        .arg("--nocapture")
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find_map(|line| line.strip_prefix("shared server: "))
        .unwrap_or_else(|| panic!("the child named no server: {stderr}"));
    let (pid, dir) = line.split_once(" dir=").unwrap();
    let pid = pid.strip_prefix("pid=").unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while alive(pid) || std::path::Path::new(dir).exists() {
        assert!(
            Instant::now() < deadline,
            "the shared server (pid {pid}, {dir}) outlived its test process"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server is stopped and its directory removed once the process it
/// watches ends.
#[test]
fn the_watchdog_stops_the_server_when_the_process_ends() {
    let server = PgServer::start();
    let pid = postmaster(&server);
    let mut process = std::process::Command::new("sleep")
        .arg("0.1")
        .spawn()
        .unwrap();
    server.watch(process.id());
    process.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while server.dir().exists() {
        assert!(
            Instant::now() < deadline,
            "the server outlived the process it watched"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(&pid), "the server's postmaster {pid} still runs");
    assert!(!server.is_running());
}
