//! Temporary: a development server named by PINCER_DEV_PG.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub struct PgServer {
    base: String,
}

static SHARED: std::sync::OnceLock<PgServer> = std::sync::OnceLock::new();
static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

pub fn shared() -> &'static PgServer {
    SHARED.get_or_init(|| PgServer {
        base: std::env::var("PINCER_DEV_PG").unwrap(),
    })
}

impl PgServer {
    pub fn fresh_database(&self) -> String {
        let name = format!(
            "t_{}_{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        );
        let ok = std::process::Command::new("psql")
            .arg(format!("{}/postgres", self.base))
            .arg("-qc")
            .arg(format!("CREATE DATABASE {name}"))
            .status()
            .unwrap();
        assert!(ok.success());
        format!("{}/{name}?sslmode=disable", self.base)
    }
}
