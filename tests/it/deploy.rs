//! `deploy/`: the compose file's and the systemd unit's command line is
//! one, and it serves with the deployment's configuration on a PostgreSQL
//! store; the environment they name is what Pincer reads.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::{BIN, TIMEOUT, TestDir, postgres};

fn deploy(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The instances' command in compose.yaml (`command: ["…", …]`).
fn compose_command() -> Vec<String> {
    let text = deploy("compose.yaml");
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("command:"))
        .expect("compose.yaml names the instances' command");
    serde_json::from_str(line.trim()).unwrap()
}

/// The unit's `ExecStart=`.
fn unit_command() -> Vec<String> {
    let text = deploy("systemd/pincer.service");
    text.lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("the unit has ExecStart")
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_deployments_command_serves_its_configuration_on_postgres() {
    let compose = compose_command();
    assert_eq!(
        compose,
        unit_command(),
        "compose.yaml and the unit run different commands"
    );
    assert_eq!(compose[0], "/usr/local/bin/pincer");
    // Each variable the files set is one Pincer reads.
    let help = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    for variable in ["PINCER_CONFIG", "PINCER_DATA_DIR", "PINCER_STORE_URL"] {
        assert!(deploy("compose.yaml").contains(variable), "{variable}");
        assert!(
            help.contains(variable),
            "pincer --help does not name {variable}"
        );
    }
    for variable in ["PINCER_HTTP_TOKEN", "OPENAI_API_KEY"] {
        assert!(deploy("pincer.env.example").contains(&format!("{variable}=")));
    }

    // The same command, its port made free, with deploy/config.toml.
    let dir = TestDir::new();
    let url = postgres::shared().fresh_database();
    let config: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/config.toml");
    let ready = dir.path().join("ready");
    let args: Vec<String> = compose[1..]
        .iter()
        .map(|a| {
            if a == "0.0.0.0:8080" {
                "0.0.0.0:0".to_owned()
            } else {
                a.clone()
            }
        })
        .collect();
    let mut child = dir
        .command()
        .env("PINCER_CONFIG", &config)
        .env("PINCER_STORE_URL", &url)
        .env("PINCER_HTTP_TOKEN", "deploy-test-token-0123456789")
        .env("OPENAI_API_KEY", "sk-deploy-test-0000000000000000")
        .args(&args)
        .arg("--ready-file")
        .arg(&ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
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
            started.elapsed() < TIMEOUT && child.try_wait().unwrap().is_none(),
            "the deployment's command did not serve: {}",
            std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let port = addr.rsplit_once(':').unwrap().1;
    let mut stream = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
    use std::io::{Read, Write};
    stream
        .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let stderr = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap();
    assert!(!stderr.contains("ERROR"), "{stderr}");
}
