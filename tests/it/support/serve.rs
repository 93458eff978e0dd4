//! `pincer serve --http 127.0.0.1:0` as a test starts it: a token in the
//! environment, a ready file for the address, stderr kept in a file, and
//! SIGTERM then a bounded wait when the test is done (or dropped).

use std::path::PathBuf;
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{TIMEOUT, TestDir};

/// The token every test server takes.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running `pincer serve --http`.
pub struct HttpServe {
    child: Option<Child>,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    stderr_path: PathBuf,
}

impl HttpServe {
    /// Starts the server with this configuration file (if any) and these
    /// extra arguments (`--script FILE`, `--channel NAME`…).
    pub fn start(dir: &TestDir, config: Option<&str>, args: &[&str]) -> Self {
        Self::start_with_env(dir, config, args, &[])
    }

    /// Like [`HttpServe::start`], with these environment variables too.
    pub fn start_with_env(
        dir: &TestDir,
        config: Option<&str>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        if let Some(text) = config {
            let path = dir.path().join("config/pincer/config.toml");
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap();
        }
        let ready = dir.path().join(format!("ready-{}", super::unique()));
        let stderr_path = dir.path().join(format!("serve-{}.log", super::unique()));
        let child = dir
            .command()
            .env("PINCER_HTTP_TOKEN", TOKEN)
            .envs(env.iter().copied())
            .args(["serve", "--http", "127.0.0.1:0", "--ready-file"])
            .arg(&ready)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let addr = loop {
            if let Ok(text) = std::fs::read_to_string(&ready)
                && !text.trim().is_empty()
            {
                break text.trim().to_owned();
            }
            assert!(
                started.elapsed() < TIMEOUT,
                "the server did not start: {}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        Self {
            child: Some(child),
            addr,
            stderr_path,
        }
    }

    /// `http://127.0.0.1:PORT` and the path.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// What the server logged so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_path).unwrap_or_default()
    }

    /// `kill -9`: no shutdown, no flush.
    pub fn crash(mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, then the exit status.
    pub fn stop(mut self) -> ExitStatus {
        self.terminate().expect("the server was already stopped")
    }

    fn terminate(&mut self) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Some(status);
            }
            if started.elapsed() > TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the server did not stop within {TIMEOUT:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for HttpServe {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
