//! The Synapse test harness (`support::matrix`) against the real server:
//! two people talk in a room (invite, join, message, edit, reaction,
//! redaction), a repeated transaction id sends one event (per device, also
//! across a restart), an encrypted room carries `m.room.encryption`, the
//! size limit, `/sync`'s long poll and invites, a restart that keeps the
//! data and the port, and one shared server that ends with the test process.
//! These are the facts `support/matrix.rs`'s doc comment records.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::matrix::{Event, MatrixUser, SERVER_NAME, Synapse, fresh_txn_id};

/// Generous: the machine may be loaded.
const WAIT: Duration = Duration::from_secs(30);

fn is_text(event: &Event, sender: &MatrixUser, body: &str) -> bool {
    event.kind == "m.room.message" && event.sender == sender.user_id && event.body() == Some(body)
}

/// Two fresh users on `server`.
fn alice_and_bob(server: &Synapse) -> (MatrixUser, MatrixUser) {
    let alice = server.register(&server.fresh_localpart("alice"), "alice-password", false);
    let bob = server.register(&server.fresh_localpart("bob"), "bob-password", false);
    (alice, bob)
}

#[test]
fn two_people_talk_edit_react_and_redact() {
    let server = Synapse::shared();
    let (alice, bob) = alice_and_bob(server);
    assert!(
        alice.user_id.starts_with("@alice-") && alice.user_id.ends_with(&format!(":{SERVER_NAME}")),
        "{}",
        alice.user_id
    );
    assert!(!alice.access_token.is_empty() && !alice.device_id.is_empty());

    // The invite reaches bob's /sync as stripped state under rooms.invite.
    let initial = bob.sync(None, 0);
    let since = initial["next_batch"].as_str().unwrap().to_owned();
    let room = alice.create_room("harness", &[&bob.user_id], false);
    let mut since = since;
    let invite = loop {
        let answer = bob.sync(Some(&since), 10_000);
        if let Some(invite) = answer["rooms"]["invite"].get(&room) {
            break invite.clone();
        }
        since = answer["next_batch"].as_str().unwrap().to_owned();
    };
    let stripped = invite["invite_state"]["events"].as_array().unwrap();
    let has = |kind: &str, check: &dyn Fn(&Value) -> bool| {
        stripped.iter().any(|e| e["type"] == kind && check(e))
    };
    assert!(
        has("m.room.member", &|e| e["state_key"] == bob.user_id.as_str()
            && e["content"]["membership"] == "invite"
            && e["sender"] == alice.user_id.as_str()),
        "{invite}"
    );
    assert!(
        has("m.room.name", &|e| e["content"]["name"] == "harness"),
        "{invite}"
    );
    assert!(has("m.room.create", &|_| true), "{invite}");
    assert!(has("m.room.join_rules", &|_| true), "{invite}");
    assert!(
        stripped.iter().all(|e| e.get("event_id").is_none()),
        "{invite}"
    );

    since = bob.sync(Some(&since), 0)["next_batch"]
        .as_str()
        .unwrap()
        .to_owned();
    bob.join(&room);
    assert!(bob.joined_rooms().contains(&room));
    // Once joined, the room is under rooms.join, no longer under rooms.invite.
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = bob.sync(Some(&since), 5_000);
        if answer["rooms"]["join"].get(&room).is_some() {
            assert!(answer["rooms"]["invite"].get(&room).is_none(), "{answer}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the join is not in /sync: {answer}"
        );
        since = answer["next_batch"].as_str().unwrap().to_owned();
    }
    let hello = alice.send_text(&room, "hello bob");
    let seen = bob.wait_for(&room, |e| is_text(e, &alice, "hello bob"), WAIT);
    assert_eq!(seen.event_id, hello);

    // An edit: latest_text shows the newest edit's new content.
    assert_eq!(
        bob.latest_text(&room, &alice.user_id).as_deref(),
        Some("hello bob")
    );
    alice.edit(&room, &hello, "hello bob, edited");
    let last_edit = alice.edit(&room, &hello, "hello bob, edited twice");
    bob.wait_for(&room, |e| e.event_id == last_edit, WAIT);
    assert_eq!(
        bob.latest_text(&room, &alice.user_id).as_deref(),
        Some("hello bob, edited twice")
    );
    // An edit by someone else does not count.
    let (status, _) = bob.try_send_raw(
        &room,
        "m.room.message",
        &json!({
            "msgtype": "m.text", "body": "* forged",
            "m.new_content": { "msgtype": "m.text", "body": "forged" },
            "m.relates_to": { "rel_type": "m.replace", "event_id": hello },
        }),
        &fresh_txn_id(),
    );
    assert_eq!(status, 200);
    assert_eq!(
        bob.latest_text(&room, &alice.user_id).as_deref(),
        Some("hello bob, edited twice")
    );

    // A reaction from bob arrives at alice.
    let reaction = bob.react(&room, &hello, "👍");
    let seen = alice.wait_for(&room, |e| e.event_id == reaction, WAIT);
    assert_eq!(seen.kind, "m.reaction");
    assert_eq!(seen.relation(), Some(("m.annotation", hello.as_str())));
    assert_eq!(seen.content["m.relates_to"]["key"], "👍");

    // A redaction empties the message.
    let gone = alice.send_text(&room, "to be redacted");
    let redaction = alice.redact(&room, &gone, Some("oops"));
    let seen = bob.wait_for(&room, |e| e.event_id == redaction, WAIT);
    assert_eq!(seen.redacts(), Some(gone.as_str()));
    let events = bob.messages(&room);
    let redacted = events.iter().find(|e| e.event_id == gone).unwrap();
    assert!(
        redacted.is_redacted() && redacted.body().is_none(),
        "{:?}",
        redacted.raw
    );
    // The newest message with a body is the edited one again.
    assert_eq!(
        bob.latest_text(&room, &alice.user_id).as_deref(),
        Some("hello bob, edited twice")
    );

    // messages() is oldest first, from the room's creation on.
    assert_eq!(events[0].kind, "m.room.create");
    assert!(
        events
            .windows(2)
            .all(|w| w[0].origin_server_ts <= w[1].origin_server_ts)
    );

    bob.leave(&room);
    assert!(!bob.joined_rooms().contains(&room));

    // Password login works, on a new device each time.
    let (token, device) = server.login(&alice.user_id, "alice-password");
    assert_ne!(token, alice.access_token);
    assert_ne!(device, alice.device_id);
    let (status, _) = server.request(
        "POST",
        "/_matrix/client/v3/login",
        Some(&json!({
            "type": "m.login.password",
            "identifier": { "type": "m.id.user", "user": alice.user_id },
            "password": "wrong",
        })),
    );
    assert_eq!(status, 403);
}

#[test]
fn a_repeated_transaction_id_sends_one_event_per_device() {
    let server = Synapse::shared();
    let (alice, _) = alice_and_bob(server);
    let room = alice.create_room("txn", &[], false);
    let content = json!({ "msgtype": "m.text", "body": "once" });
    let txn = fresh_txn_id();
    let first = alice.send_raw(&room, "m.room.message", &content, &txn);
    let (status, answer) = alice.try_send_raw(&room, "m.room.message", &content, &txn);
    eprintln!("a repeated txn id answers {status} {answer}");
    assert_eq!(status, 200);
    assert_eq!(answer["event_id"], first.as_str(), "{answer}");
    // Other content under the same txn id is not looked at.
    let other = json!({ "msgtype": "m.text", "body": "other" });
    assert_eq!(alice.send_raw(&room, "m.room.message", &other, &txn), first);
    let count = |body: &str| {
        alice
            .messages(&room)
            .iter()
            .filter(|e| e.body() == Some(body))
            .count()
    };
    assert_eq!(count("once"), 1);
    assert_eq!(count("other"), 0);

    // The same device with a new token: still the first event.
    let same_device = server.login_as(&alice.user_id, "alice-password", Some(&alice.device_id));
    assert_eq!(same_device.device_id, alice.device_id);
    assert_ne!(same_device.access_token, alice.access_token);
    assert_eq!(
        same_device.send_raw(&room, "m.room.message", &content, &txn),
        first
    );
    // A new device: a new event under the same txn id.
    let new_device = server.login_as(&alice.user_id, "alice-password", None);
    assert_ne!(new_device.device_id, alice.device_id);
    let second = new_device.send_raw(&room, "m.room.message", &content, &txn);
    assert_ne!(second, first);
    assert_eq!(count("once"), 2);
}

#[test]
fn an_encrypted_room_and_the_size_limit() {
    let server = Synapse::shared();
    let (alice, bob) = alice_and_bob(server);
    let room = alice.create_room("secret", &[&bob.user_id], true);
    let encryption = alice
        .state(&room)
        .into_iter()
        .find(|e| e.kind == "m.room.encryption")
        .expect("m.room.encryption in the room's state");
    assert_eq!(encryption.content["algorithm"], "m.megolm.v1.aes-sha2");
    let plain = alice.create_room("plain", &[], false);
    assert!(
        alice
            .state(&plain)
            .iter()
            .all(|e| e.kind != "m.room.encryption")
    );
    // The invitee sees the encryption in the invite's stripped state too.
    let answer = bob.sync(None, 0);
    let stripped = answer["rooms"]["invite"][&room]["invite_state"]["events"].clone();
    assert!(
        stripped
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["type"] == "m.room.encryption")),
        "{answer}"
    );

    // 65,536 bytes per event, the whole event's JSON.
    let fits = "x".repeat(64_000);
    let event = alice.send_text(&plain, &fits);
    assert!(event.starts_with('$'));
    for size in [65_536, 70_000] {
        let (status, answer) = alice.try_send_raw(
            &plain,
            "m.room.message",
            &json!({ "msgtype": "m.text", "body": "x".repeat(size) }),
            &fresh_txn_id(),
        );
        assert_eq!(status, 413, "{size}: {answer}");
        assert_eq!(answer["errcode"], "M_TOO_LARGE", "{answer}");
    }
}

#[test]
fn sync_long_polls_until_an_event_or_the_timeout() {
    let server = Synapse::shared();
    let (alice, bob) = alice_and_bob(server);
    let room = alice.create_room("poll", &[&bob.user_id], false);
    bob.join(&room);
    // Catch up first: the join and whatever came before it.
    let mut since = bob.sync(None, 0)["next_batch"].as_str().unwrap().to_owned();
    loop {
        let answer = bob.sync(Some(&since), 0);
        let next = answer["next_batch"].as_str().unwrap().to_owned();
        if next == since {
            break;
        }
        since = next;
    }

    // Nothing new: held for about the timeout.
    let started = Instant::now();
    let answer = bob.sync(Some(&since), 2_000);
    let held = started.elapsed();
    eprintln!("an idle /sync with timeout=2000 answered after {held:?}");
    assert!(held >= Duration::from_millis(1_800), "{held:?}");
    assert!(answer["rooms"]["join"].get(&room).is_none(), "{answer}");
    let since = answer["next_batch"].as_str().unwrap().to_owned();

    // A message wakes it long before its timeout.
    let sender = alice.clone();
    let room_id = room.clone();
    let send = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        sender.send_text(&room_id, "wake up")
    });
    let started = Instant::now();
    let answer = bob.sync(Some(&since), 60_000);
    let woke = started.elapsed();
    let event_id = send.join().unwrap();
    eprintln!("a /sync with timeout=60000 answered {woke:?} after it began, on a message");
    assert!(woke < Duration::from_secs(30), "{woke:?}");
    let timeline = answer["rooms"]["join"][&room]["timeline"]["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        timeline.iter().any(|e| e["event_id"] == event_id.as_str()),
        "{answer}"
    );
}

#[test]
fn a_restart_keeps_the_data_the_port_and_sync_tokens() {
    let started = Instant::now();
    let server = Synapse::start();
    eprintln!("a Synapse test server started in {:?}", started.elapsed());
    let port = server.port();
    assert_eq!(server.base_url(), format!("http://127.0.0.1:{port}"));
    let (alice, bob) = alice_and_bob(&server);
    let room = alice.create_room("kept", &[&bob.user_id], false);
    bob.join(&room);
    let txn = fresh_txn_id();
    let content = json!({ "msgtype": "m.text", "body": "before the restart" });
    let before = alice.send_raw(&room, "m.room.message", &content, &txn);
    bob.wait_for(&room, |e| e.event_id == before, WAIT);
    let since = bob.sync(None, 0)["next_batch"].as_str().unwrap().to_owned();

    let pid = server.pid().unwrap();
    let restarted = Instant::now();
    server.restart();
    eprintln!(
        "a Synapse test server stopped and started again in {:?}",
        restarted.elapsed()
    );
    assert!(server.is_running());
    assert_ne!(server.pid(), Some(pid));
    assert_eq!(server.port(), port);

    // The users, their tokens and the room are kept.
    assert!(bob.joined_rooms().contains(&room));
    assert_eq!(
        bob.latest_text(&room, &alice.user_id).as_deref(),
        Some("before the restart")
    );
    // A repeat of the txn id after the restart: the same event.
    let (status, answer) = alice.try_send_raw(&room, "m.room.message", &content, &txn);
    eprintln!("a txn id repeated after a restart answers {status} {answer}");
    assert_eq!(answer["event_id"], before.as_str(), "{answer}");

    // A since token from before the restart delivers what came after it.
    let after = alice.send_text(&room, "after the restart");
    let mut since = since;
    let deadline = Instant::now() + WAIT;
    loop {
        let answer = bob.sync(Some(&since), 5_000);
        let timeline = answer["rooms"]["join"][&room]["timeline"]["events"].clone();
        if timeline
            .as_array()
            .is_some_and(|events| events.iter().any(|e| e["event_id"] == after.as_str()))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no 'after the restart' in /sync: {answer}"
        );
        since = answer["next_batch"].as_str().unwrap().to_owned();
    }

    // Synapse logs to its file at WARNING; its console holds no traceback
    // (a logging configuration Python cannot use would print one there).
    let log = std::fs::read_to_string(server.log_path()).unwrap();
    assert!(log.contains("STARTING SERVER"), "{log}");
    let console = std::fs::read_to_string(server.console_path()).unwrap_or_default();
    assert!(!console.contains("Traceback"), "{console}");

    server.stop();
    assert!(!server.is_running());
    assert_eq!(server.request("GET", "/_matrix/client/versions", None).0, 0);
    server.stop();
    server.restart();
    assert_eq!(
        server.request("GET", "/_matrix/client/versions", None).0,
        200
    );
}

#[test]
fn a_server_with_lowered_limits_answers_429() {
    let server = Synapse::start_with(json!({
        "rc_message": { "per_second": 0.1, "burst_count": 3 },
    }));
    let alice = server.register("alice", "alice-password", false);
    let room = alice.create_room("limited", &[], false);
    let mut refused = None;
    for n in 0..10 {
        let (status, answer) = alice.try_send_raw(
            &room,
            "m.room.message",
            &json!({ "msgtype": "m.text", "body": format!("message {n}") }),
            &fresh_txn_id(),
        );
        if status != 200 {
            refused = Some((n, status, answer));
            break;
        }
    }
    let (n, status, answer) = refused.expect("ten messages at once were all accepted");
    eprintln!("with rc_message burst_count 3, message {n} answered {status} {answer}");
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["errcode"], "M_LIMIT_EXCEEDED", "{answer}");
    assert!(
        answer["retry_after_ms"].as_u64().is_some_and(|ms| ms > 0),
        "{answer}"
    );
}

/// Set in the test process [`the_shared_server_ends_with_the_test_process`]
/// starts, which runs [`one_shared_server_per_test_binary`] alone.
const CHILD: &str = "PINCER_TEST_SYNAPSE_CHILD";

#[test]
fn one_shared_server_per_test_binary() {
    let server = Synapse::shared();
    assert!(std::ptr::eq(server, Synapse::shared()));
    let (status, _) = server.request("GET", "/_matrix/client/versions", None);
    assert_eq!(status, 200);
    if std::env::var_os(CHILD).is_some() {
        eprintln!(
            "shared server: pid={} dir={}",
            server.pid().unwrap(),
            server.dir().display()
        );
    }
}

/// Whether process `pid` runs (a zombie has ended).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit(')').next().unwrap_or_default().trim_start();
        !state.starts_with(['Z', 'X'])
    })
}

/// The shared server lives in a static, never dropped: its watchdog kills
/// it and removes its directory when the test process exits.
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

/// Media as the Matrix channel sends a reply's files: uploaded with `POST
/// /_matrix/media/v3/upload` (the file's type, `filename`), answered with
/// an `mxc://` URI of this server; downloaded by anyone logged in through
/// authenticated media (`/_matrix/client/v1/media/download`), and not
/// through the unauthenticated `/_matrix/media/v3/download`, which
/// Synapse freezes for media uploaded since it turned authenticated media
/// on (1.120).
#[test]
fn media_is_uploaded_and_downloaded_with_a_token_only() {
    let server = Synapse::shared();
    let (alice, bob) = alice_and_bob(server);
    let bytes = b"--- a/x\n+++ b/x\n-old\n+n\xc3\xa9w\n";
    let (status, answer) = crate::support::matrix::request_raw(
        "POST",
        &format!(
            "{}/_matrix/media/v3/upload?filename=changes.diff",
            server.base_url()
        ),
        Some(&alice.access_token),
        "text/x-diff",
        bytes,
    );
    assert_eq!(status, 200, "{answer}");
    let uri = answer["content_uri"].as_str().unwrap();
    let prefix = format!("mxc://{SERVER_NAME}/");
    assert!(uri.starts_with(&prefix), "{uri}");
    assert_eq!(bob.download(uri), bytes);
    let id = &uri[prefix.len()..];
    let (status, answer) = crate::support::matrix::request(
        "GET",
        &format!(
            "{}/_matrix/media/v3/download/{SERVER_NAME}/{id}",
            server.base_url()
        ),
        None,
        None,
    );
    assert_eq!(
        (status, answer["errcode"].as_str()),
        (404, Some("M_NOT_FOUND")),
        "{answer}"
    );
}
