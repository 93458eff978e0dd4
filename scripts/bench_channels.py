#!/usr/bin/env python3
"""The chat channels against real servers: throughput, first draft, idle memory.

Standard library only (Python 3.11+). Builds nothing: point --bin at a binary
built with `cargo build --release`. Starts its own servers on free loopback
ports, each in a temporary directory, configured as the test harnesses
configure them (tests/it/support/{matrix,irc,mail}.rs):

  Synapse   tests/fixtures/synapse/.venv (scripts/test-deps.sh makes it),
            SQLite, rate limits raised, registration by shared secret;
  ngIRCd    Debian's, flood penalties off for the people (MaxPenaltyTime 0;
            Pincer paces its own lines);
  Dovecot   IMAP, plain text on loopback, and tests/fixtures/mail/smtpd.py
            (aiosmtpd, tests/fixtures/mail/.venv) delivering into its Maildirs;
  Telegram  a stand-in Bot API of this script's own that answers `getUpdates`
            long polls with nothing (there is no message traffic on it);
  webhook   its route on the HTTP face, a callback URL nobody listens on.

The model is the scripted provider. Three phases:

1. throughput   `pincer serve --channel matrix --channel irc`, the model
   answering at once. --chats chats per platform (Matrix: direct rooms of
   one person and the bot; IRC: people writing to the bot in private), each
   one message per round, a round's messages sent all at once (8 Matrix
   senders in parallel; IRC lines written back to back), the next round when
   every reply of this one is committed. Round 1 starts a session per chat;
   later rounds find it. On Matrix, two more rounds with Pincer stopped
   (SIGTERM) while the messages are sent: started again, it reads them in
   its first /sync (a backlog, so Synapse's own intake does not pace it);
   the second with `live_drafts = false` (the reply then does not wait for
   the live draft's send to Synapse).
   The store is read (read-only SQLite, `channel_inbox` joined to
   `channel_outbox` on `reply:RUN`) every 20 ms: a reply intent counts once
   a read sees it, i.e. committed. Reported per round: messages/s from the
   first send to the last commit seen, and from Pincer's first receipt
   (`received_at`) to it; latency per message from the send, and from
   receipt, to the intent (`created_at`, just before its commit).
2. first draft  the same serve, the model writing "Draft ", then after
   --draft-delay-ms "complete.". --samples messages per platform, one at a
   time. Matrix: from the send to the bot's first event in the room as the
   person's own long-polled /sync delivers it (the live draft), and to the
   edit finalizing it. IRC (no edits, so no draft): from the send to the
   reply's first line, which comes only when the run ends (after the
   model's delay).
3. idle         a fresh `pincer serve --http` with every adapter connected
   (matrix, irc, email, telegram, webhook), all up by `GET /v1/channels`;
   VmRSS (and RssAnon, VmHWM, CPU time) from /proc every --sample-secs for
   --idle-secs.

    python3 scripts/bench_channels.py --bin target/release/pincer
    python3 scripts/bench_channels.py --bin target/release/pincer --idle-secs 60 --samples 20   # quick

Prints a Markdown report on stdout (and --json FILE); progress on stderr.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import http.client
import http.server
import json
import os
import queue
import secrets
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")
SHARED_SECRET = "pincer-bench-registration-secret"
SERVER_NAME = "example.org"
HTTP_TOKEN = "bench-channels-token-0123456789abcdef"
WEBHOOK_SECRET = "bench-channels-webhook-secret-0123456789"
TELEGRAM_TOKEN = "123456:bench-channels-token"
MAIL_PASSWORD = "pincer-password"
WAIT = 120.0


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


def now_ms() -> float:
    return time.time() * 1000.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what: str, ready, timeout: float = WAIT, every: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_channels: timed out waiting for {what}")
        time.sleep(every)


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-p * len(ordered) // 100))))
    return ordered[rank - 1]


def terminate(proc: subprocess.Popen, grace: float = 15.0) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def kill_group(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the process group the child leads, SIGKILL after `grace`."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, 15)
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    proc.wait()


# --- Synapse -----------------------------------------------------------------


class Http:
    """Blocking JSON over HTTP, one keep-alive connection per thread."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.local = threading.local()

    def request(self, method: str, path: str, body=None, token: str | None = None,
                timeout: float = 90.0) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        for attempt in range(3):
            conn = getattr(self.local, "conn", None)
            if conn is None or conn.timeout != timeout:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
                self.local.conn = conn
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                raw = response.read()
                try:
                    return response.status, json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return response.status, {"raw": raw.decode(errors="replace")}
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.1)
        raise AssertionError("unreachable")


def q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class Synapse:
    def __init__(self, root: Path) -> None:
        self.python = REPO / "tests/fixtures/synapse/.venv/bin/python"
        if not self.python.is_file():
            sys.exit(f"bench_channels: {self.python} is missing: run `bash scripts/test-deps.sh`")
        self.dir = root / "synapse"
        self.dir.mkdir()
        self.port = free_port()
        self.http = Http(self.port)
        seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        (self.dir / "signing.key").write_text(f"ed25519 a_bench {seed}\n")
        log_config = {
            "version": 1,
            "formatters": {"precise": {"format": "%(asctime)s - %(name)s - %(levelname)s - %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "formatter": "precise",
                                  "filename": str(self.dir / "homeserver.log"), "encoding": "utf8"}},
            "root": {"level": "WARNING", "handlers": ["file"]},
            "disable_existing_loggers": False,
        }
        (self.dir / "log.config.yaml").write_text(json.dumps(log_config))
        limit = {"per_second": 1000, "burst_count": 10000}
        config = {
            "server_name": SERVER_NAME,
            "public_baseurl": f"http://127.0.0.1:{self.port}/",
            "report_stats": False,
            "listeners": [{"port": self.port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                           "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
            "database": {"name": "sqlite3", "args": {"database": str(self.dir / "homeserver.db")}},
            "log_config": str(self.dir / "log.config.yaml"),
            "media_store_path": str(self.dir / "media"),
            "signing_key_path": str(self.dir / "signing.key"),
            "registration_shared_secret": SHARED_SECRET,
            "enable_registration": False,
            "macaroon_secret_key": secrets.token_hex(16),
            "form_secret": secrets.token_hex(16),
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            "presence": {"enabled": False},
            "url_preview_enabled": False,
            "enable_metrics": False,
            "rc_message": limit, "rc_registration": limit, "rc_registration_token_validity": limit,
            "rc_login": {"address": limit, "account": limit, "failed_attempts": limit},
            "rc_admin_redaction": limit, "rc_joins": {"local": limit, "remote": limit},
            "rc_joins_per_room": limit, "rc_3pid_validation": limit,
            "rc_invites": {"per_room": limit, "per_user": limit, "per_issuer": limit},
            "rc_third_party_invite": limit, "rc_room_creation": limit, "rc_media_create": limit,
            "rc_presence": {"per_user": limit}, "rc_delayed_event_mgmt": limit, "rc_reports": limit,
            "rc_user_directory": limit, "rc_profile": limit, "rc_key_requests": limit,
        }
        (self.dir / "homeserver.yaml").write_text(json.dumps(config, indent=1))
        console = open(self.dir / "console.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.python), "-m", "synapse.app.homeserver", "-c", str(self.dir / "homeserver.yaml")],
            cwd=self.dir, env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdin=subprocess.DEVNULL,
            stdout=console, stderr=console, start_new_session=True)

        def up() -> bool:
            if self.proc.poll() is not None:
                sys.exit(f"bench_channels: Synapse exited: {(self.dir / 'console.log').read_text()[-3000:]}")
            try:
                return self.http.request("GET", "/_matrix/client/versions", timeout=2)[0] == 200
            except OSError:
                return False

        wait_until("Synapse", up, every=0.05)

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def register(self, localpart: str, password: str = "bench-password") -> dict:
        path = "/_synapse/admin/v1/register"
        status, body = self.http.request("GET", path)
        assert status == 200, body
        nonce = body["nonce"]
        mac = hmac.new(SHARED_SECRET.encode(), b"\0".join(
            [nonce.encode(), localpart.encode(), password.encode(), b"notadmin"]), hashlib.sha1).hexdigest()
        status, body = self.http.request("POST", path, {"nonce": nonce, "username": localpart,
                                                        "password": password, "admin": False, "mac": mac})
        assert status == 200, body
        return {"user_id": body["user_id"], "token": body["access_token"]}

    def call(self, user: dict, method: str, path: str, body=None, timeout: float = 90.0) -> dict:
        status, answer = self.http.request(method, path, body, user["token"], timeout)
        if status != 200:
            raise SystemExit(f"bench_channels: {method} {path} as {user['user_id']}: {status} {answer}")
        return answer

    def direct_room(self, person: dict, bot: dict) -> str:
        """A private room of the person and the bot, both joined."""
        room = self.call(person, "POST", "/_matrix/client/v3/createRoom",
                         {"preset": "private_chat", "invite": [bot["user_id"]], "is_direct": True})["room_id"]
        self.call(bot, "POST", f"/_matrix/client/v3/join/{q(room)}", {})
        return room

    def send_text(self, user: dict, room: str, text: str) -> str:
        txn = f"bench-{secrets.token_hex(8)}"
        return self.call(user, "PUT", f"/_matrix/client/v3/rooms/{q(room)}/send/m.room.message/{txn}",
                         {"msgtype": "m.text", "body": text})["event_id"]

    def stop(self) -> None:
        kill_group(self.proc, 20)


class Syncer(threading.Thread):
    """A person's /sync long poll: every timeline event with the time it came."""

    def __init__(self, server: Synapse, user: dict) -> None:
        super().__init__(daemon=True)
        self.server, self.user = server, user
        self.events: queue.Queue = queue.Queue()
        self.http = Http(server.port)
        first = self.sync(None, 0)
        self.since = first["next_batch"]
        self.stopping = False

    def sync(self, since: str | None, timeout_ms: int) -> dict:
        path = f"/_matrix/client/v3/sync?timeout={timeout_ms}"
        if since:
            path += f"&since={q(since)}"
        else:
            path += "&filter=" + q(json.dumps({"room": {"timeline": {"limit": 1}}}))
        status, body = self.http.request("GET", path, None, self.user["token"], timeout=timeout_ms / 1000 + 30)
        if status != 200:
            raise SystemExit(f"bench_channels: /sync: {status} {body}")
        return body

    def run(self) -> None:
        while not self.stopping:
            try:
                body = self.sync(self.since, 30000)
            except OSError:
                continue
            seen = now_ms()
            self.since = body["next_batch"]
            for room, joined in body.get("rooms", {}).get("join", {}).items():
                for event in joined.get("timeline", {}).get("events", []):
                    self.events.put((seen, room, event))


# --- ngIRCd ------------------------------------------------------------------


class Ngircd:
    def __init__(self, root: Path) -> None:
        binary = shutil.which("ngircd") or "/usr/sbin/ngircd"
        if not os.path.exists(binary):
            sys.exit("bench_channels: ngircd is not installed (scripts/test-deps.sh installs it)")
        self.dir = root / "ngircd"
        self.dir.mkdir()
        self.port = free_port()
        (self.dir / "ngircd.conf").write_text(
            "[Global]\nName = irc.pincer.test\nInfo = Pincer bench server\nAdminInfo1 = bench\n"
            "AdminInfo2 = 127.0.0.1\nAdminEMail = bench@pincer.test\nListen = 127.0.0.1\n"
            f"Ports = {self.port}\nMotdPhrase = Pincer bench server\n"
            "[Limits]\nMaxConnectionsIP = 0\nMaxJoins = 0\nMaxNickLength = 30\nPingTimeout = 120\n"
            "PongTimeout = 20\nMaxPenaltyTime = 0\n"
            "[Options]\nDNS = no\nIdent = no\nPAM = no\n")
        self.proc = subprocess.Popen(
            [binary, "--nodaemon", "--config", str(self.dir / "ngircd.conf")], cwd=self.dir,
            stdin=subprocess.DEVNULL, stdout=open(self.dir / "ngircd.log", "ab"), stderr=subprocess.STDOUT,
            start_new_session=True)

        def up() -> bool:
            if self.proc.poll() is not None:
                sys.exit(f"bench_channels: ngircd exited: {(self.dir / 'ngircd.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                return False

        wait_until("ngIRCd", up)

    def stop(self) -> None:
        kill_group(self.proc)


class IrcUser:
    """A person on IRC: registers, answers PING, keeps what the bot says to it."""

    def __init__(self, port: int, nick: str, bot: str) -> None:
        self.nick, self.bot = nick, bot.lower()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.lines: queue.Queue = queue.Queue()
        self.welcomed = threading.Event()
        self.lock = threading.Lock()
        self.send(f"NICK {nick}")
        self.send(f"USER {nick} 0 * :{nick}")
        threading.Thread(target=self.read, daemon=True).start()
        if not self.welcomed.wait(30):
            raise SystemExit(f"bench_channels: IRC user {nick} was not welcomed")

    def send(self, line: str) -> None:
        with self.lock:
            self.sock.sendall(line.encode() + b"\r\n")

    def read(self) -> None:
        buffer = b""
        self.sock.settimeout(None)
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            seen = now_ms()
            buffer += chunk
            *lines, buffer = buffer.split(b"\r\n")
            for raw in lines:
                line = raw.decode(errors="replace")
                if line.startswith("PING"):
                    self.send("PONG" + line[4:])
                    continue
                parts = line.split(" ", 3)
                if len(parts) >= 2 and parts[1] == "001":
                    self.welcomed.set()
                if len(parts) == 4 and parts[1] == "PRIVMSG" and parts[0][1:].split("!")[0].lower() == self.bot:
                    self.lines.put((seen, parts[3][1:] if parts[3].startswith(":") else parts[3]))

    def privmsg(self, target: str, text: str) -> None:
        self.send(f"PRIVMSG {target} :{text}")

    def close(self) -> None:
        try:
            self.send("QUIT :bye")
            self.sock.close()
        except OSError:
            pass


# --- Dovecot + smtpd.py ------------------------------------------------------


class Mail:
    def __init__(self, root: Path) -> None:
        dovecot = shutil.which("dovecot") or "/usr/sbin/dovecot"
        python = REPO / "tests/fixtures/mail/.venv/bin/python"
        if not os.path.exists(dovecot) or not python.is_file():
            sys.exit("bench_channels: Dovecot or the aiosmtpd venv is missing: run `bash scripts/test-deps.sh`")
        self.dir = root / "mail"
        self.dir.mkdir()
        os.chmod(self.dir, 0o755)
        root_user = os.geteuid() == 0
        owner = (int(subprocess.check_output(["id", "-u", "nobody"])),
                 int(subprocess.check_output(["id", "-g", "nobody"]))) if root_user else (os.getuid(), os.getgid())
        mail_root = self.dir / "mail"
        mail_root.mkdir()
        os.chown(mail_root, *owner)
        users = {"pincer": MAIL_PASSWORD, "alice": "alice-password"}
        for name in users:
            maildir = mail_root / name / "Maildir"
            for sub in ("cur", "new", "tmp"):
                (maildir / sub).mkdir(parents=True)
            for path in (mail_root / name, maildir, *(maildir / s for s in ("cur", "new", "tmp"))):
                os.chmod(path, 0o700)
                os.chown(path, *owner)
        passwd = self.dir / "passwd"
        passwd.write_text("".join(f"{n}:{{PLAIN}}{p}::::::\n" for n, p in users.items()))
        os.chmod(passwd, 0o644)
        self.imap_port, self.smtp_port, self.mx_port = free_port(), free_port(), free_port()
        d = str(self.dir)
        conf = (
            f"protocols = imap\nlisten = 127.0.0.1\nbase_dir = {d}/run\nstate_dir = {d}/state\n"
            f"instance_name = {self.dir.parent.name}-mail\nlog_path = {d}/dovecot.log\n"
            f"info_log_path = {d}/dovecot.log\nauth_failure_delay = 0\nauth_mechanisms = plain login\n"
            f"disable_plaintext_auth = no\nssl = no\nmail_location = maildir:{d}/mail/%n/Maildir\n"
            "mail_fsync = never\nmailbox_idle_check_interval = 1 secs\nfirst_valid_uid = 1\nfirst_valid_gid = 1\n"
            f"passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN username_format=%n {d}/passwd\n}}\n"
            f"userdb {{\n  driver = static\n  args = uid={owner[0]} gid={owner[1]} home={d}/mail/%n allow_all_users=yes\n}}\n"
            "namespace inbox {\n  inbox = yes\n}\n"
            f"service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {self.imap_port}\n  }}\n"
            "  inet_listener imaps {\n    address = 127.0.0.1\n    port = 0\n  }\n")
        if root_user:
            conf += "}\n"
        else:
            user = subprocess.check_output(["id", "-un"], text=True).strip()
            group = subprocess.check_output(["id", "-gn"], text=True).strip()
            conf += (f"  chroot =\n}}\nservice anvil {{\n  chroot =\n}}\ndefault_internal_user = {user}\n"
                     f"default_internal_group = {group}\ndefault_login_user = {user}\n")
        (self.dir / "dovecot.conf").write_text(conf)
        os.chmod(self.dir / "dovecot.conf", 0o644)
        self.dovecot = subprocess.Popen(
            [dovecot, "-F", "-c", str(self.dir / "dovecot.conf")], cwd="/", stdin=subprocess.DEVNULL,
            stdout=open(self.dir / "dovecot.out", "ab"), stderr=subprocess.STDOUT, start_new_session=True)
        smtpd_log = self.dir / "smtpd.log"
        self.smtpd = subprocess.Popen(
            [str(python), "-u", str(REPO / "tests/fixtures/mail/smtpd.py"), "--listen", f"mx:{self.mx_port}",
             "--listen", f"submission:{self.smtp_port}", "--maildirs", str(mail_root), "--users", str(passwd),
             "--log", str(self.dir / "smtp-log.jsonl")], cwd=self.dir, stdin=subprocess.DEVNULL,
            stdout=open(smtpd_log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)

        def greets(port: int, greeting: bytes) -> bool:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.settimeout(5)
                    return s.recv(512).startswith(greeting)
            except OSError:
                return False

        def up() -> bool:
            for proc, log in ((self.dovecot, self.dir / "dovecot.out"), (self.smtpd, smtpd_log)):
                if proc.poll() is not None:
                    sys.exit(f"bench_channels: a mail server exited: {log.read_text()[-2000:]} "
                             f"{(self.dir / 'dovecot.log').read_text()[-2000:] if (self.dir / 'dovecot.log').exists() else ''}")
            return greets(self.imap_port, b"* OK") and "smtpd ready" in smtpd_log.read_text() \
                and greets(self.mx_port, b"220")

        wait_until("Dovecot and smtpd.py", up)

    def stop(self) -> None:
        kill_group(self.smtpd, 5)
        kill_group(self.dovecot, 15)


# --- the Telegram stand-in ---------------------------------------------------


class FakeTelegram:
    """Answers every Bot API call `ok`; `getUpdates` after holding its `timeout`."""

    def __init__(self) -> None:
        polls = self.polls = [0]

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.path.endswith("/getUpdates"):
                    polls[0] += 1
                    time.sleep(min(float(body.get("timeout", 0)), 60.0))
                    answer = {"ok": True, "result": []}
                else:
                    answer = {"ok": True, "result": {"message_id": 1, "chat": {"id": 1}, "date": int(time.time())}}
                data = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


# --- Pincer ------------------------------------------------------------------


class Pincer:
    def __init__(self, binary: str, root: Path, config: str, script_turn: list, channels: list[str],
                 env: dict) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        for sub in ("home", "config/pincer", "data", "ws"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        self.configure(config)
        # Every turn of every session plays the same line.
        (root / "script.jsonl").write_text((json.dumps(script_turn) + "\n") * 1000)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(root / "config"), "XDG_DATA_HOME": str(root / "data"),
            "PINCER_DATA_DIR": str(root / "data/pincer"), "PINCER_HTTP_TOKEN": HTTP_TOKEN,
            "RUST_LOG": os.environ.get("RUST_LOG", "warn"), "LANG": "C.UTF-8", **env,
        }
        # The HTTP face always: `--ready-file` is written only with it.
        self.argv = [binary, "serve", "--http", "127.0.0.1:0"]
        for name in channels:
            self.argv += ["--channel", name]
        self.argv += ["--ready-file", str(root / "ready"), "--provider", "scripted", "--script",
                      str(root / "script.jsonl")]
        self.db = root / "data/pincer/pincer.db"
        self.proc: subprocess.Popen | None = None
        self.started_ms = 0.0

    def configure(self, config: str) -> None:
        """The config file (read at the next start); the load is the benchmark's own, so no rate limit."""
        (self.root / "config/pincer/config.toml").write_text(
            "[http]\nrate_limit_per_minute = 0\n" + config.replace("WORKSPACE", str(self.root / "ws")))

    def start(self) -> None:
        ready = self.root / "ready"
        if ready.exists():
            ready.unlink()
        self.started_ms = now_ms()
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.root / "ws", stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=open(self.root / "stderr.log", "ab"))

        def up() -> bool:
            if self.proc.poll() is not None:
                sys.exit(f"bench_channels: pincer exited: {(self.root / 'stderr.log').read_text()[-3000:]}")
            return ready.exists() and bool(ready.read_text().strip())

        wait_until("pincer serve", up, every=0.02)
        self.addr = ready.read_text().strip()

    def stop(self) -> None:
        if self.proc:
            terminate(self.proc)

    def query(self, sql: str, args: tuple = ()) -> list:
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            return conn.execute(sql, args).fetchall()
        finally:
            conn.close()

    def answered(self, channel: str) -> dict:
        """Each inbound message's body -> (its `at`, received_at, run id, the reply intent's created_at or None)."""
        rows = self.query(
            "SELECT i.message, i.received_at, i.run_id, o.created_at FROM channel_inbox i "
            "LEFT JOIN channel_outbox o ON o.id = 'reply:' || i.run_id WHERE i.channel = ?", (channel,))
        out = {}
        for message, received_at, run_id, created_at in rows:
            parsed = json.loads(message)
            out[parsed["body"].strip()] = (parsed.get("at"), received_at, run_id, created_at)
        return out

    def intent_created(self, intent_id: str):
        rows = self.query("SELECT created_at FROM channel_outbox WHERE id = ?", (intent_id,))
        return rows[0][0] if rows else None

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK

    def status(self) -> dict:
        out = {}
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Threads"):
                parts = value.split()
                out[key] = int(parts[0]) if key == "Threads" else int(parts[0]) / 1024.0
        return out


def watch_round(pincer: Pincer, channel: str, bodies: dict[str, float]) -> dict[str, float]:
    """Polls the store until each body has a committed reply intent: body -> when a read first saw it."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + 600
    while len(seen) < len(bodies):
        t = now_ms()
        for body, (_at, _received, _run, created) in pincer.answered(channel).items():
            if body in bodies and created is not None and body not in seen:
                seen[body] = t
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_channels: {len(bodies) - len(seen)} {channel} replies never committed: "
                             f"{(pincer.root / 'stderr.log').read_text()[-3000:]}")
        time.sleep(0.02)
    return seen


def round_figures(pincer: Pincer, channel: str, sent: dict[str, float], seen: dict[str, float],
                  first_send: float, label: str) -> dict:
    rows = pincer.answered(channel)
    received = [rows[b][1] for b in sent]
    created = [rows[b][3] for b in sent]
    last_commit = max(seen.values())
    return {
        "round": label,
        "messages": len(sent),
        "runs": len({rows[b][2] for b in sent}),
        "send_s": (max(sent.values()) - first_send) / 1000.0,
        "per_s_from_send": len(sent) / ((last_commit - first_send) / 1000.0),
        "per_s_from_receipt": len(sent) / ((last_commit - min(received)) / 1000.0),
        "receipt_spread_s": (max(received) - min(received)) / 1000.0,
        "send_to_intent_ms": [rows[b][3] - sent[b] for b in sent],
        "receipt_to_intent_ms": [c - r for c, r in zip(created, received)],
        "last_commit_after_first_send_s": (last_commit - first_send) / 1000.0,
        # Where the platform edits (Matrix), the reply waits for the live
        # draft's first send: its intent, then the platform's answer.
        "draft_to_intent_ms": [rows[b][3] - d for b in sent
                               if (d := pincer.intent_created(f"draft:{rows[b][2]}")) is not None],
    }


def common_keys(coalesce: bool = True) -> str:
    return "workspace = \"WORKSPACE\"\n" + ("coalesce_ms = 0\n" if coalesce else "")


def matrix_keys(synapse: Synapse, bot: dict, allow: list[str]) -> str:
    return (f"[channels.matrix]\nkind = \"matrix\"\nhomeserver = \"{synapse.url()}\"\n"
            f"user_id = \"{bot['user_id']}\"\naccess_token_env = \"MATRIX_TOKEN\"\n"
            f"allow = {json.dumps(allow)}\n" + common_keys())


def irc_keys(irc: Ngircd, nick: str, allow: list[str]) -> str:
    return (f"[channels.irc]\nkind = \"irc\"\nserver = \"127.0.0.1:{irc.port}\"\nnick = \"{nick}\"\n"
            f"channels = [\"#bench\"]\nallow = {json.dumps(allow)}\n" + common_keys())


def throughput(args, root: Path, synapse: Synapse, irc: Ngircd, people: dict) -> list[dict]:
    bot, alice = people["bot"], people["alice"]
    say(f"throughput: {args.chats} Matrix rooms")
    with ThreadPoolExecutor(8) as pool:
        rooms = list(pool.map(lambda _: synapse.direct_room(alice, bot), range(args.chats)))
    probe_room = synapse.direct_room(alice, bot)
    nick = "pincer"
    users = [f"p{i}" for i in range(args.chats)]
    config = matrix_keys(synapse, bot, [alice["user_id"]]) + irc_keys(irc, nick, users + ["alice"])
    pincer = Pincer(args.bin, root / "throughput", config, [{"text": "ok"}], ["matrix", "irc"],
                    {"MATRIX_TOKEN": bot["token"]})
    pincer.start()
    say("throughput: pincer started; probing until it reads Matrix and IRC")
    probe_n = [0]

    def probe_matrix() -> bool:
        probe_n[0] += 1
        body = f"probe-{probe_n[0]}"
        synapse.send_text(alice, probe_room, body)
        return bool(wait_until_soft(lambda: body in pincer.answered("matrix"), 3.0))

    wait_until("Pincer to read Matrix", probe_matrix, every=0.0)
    say("throughput: connecting IRC people")
    irc_people = [IrcUser(irc.port, name, nick) for name in users]
    probe = IrcUser(irc.port, "alice", nick)

    def probe_irc() -> bool:
        probe_n[0] += 1
        body = f"probe-{probe_n[0]}"
        probe.privmsg(nick, body)
        return bool(wait_until_soft(lambda: body in pincer.answered("irc"), 3.0))

    wait_until("Pincer to read IRC", probe_irc, every=0.0)
    results = []

    def matrix_round(label: str, backlog: bool, drafts: bool = True) -> None:
        bodies = [f"bench-matrix-{label}-{int(drafts)}-{i}" for i in range(len(rooms))]
        sent: dict[str, float] = {}
        if backlog:
            pincer.stop()
        if not drafts:
            pincer.configure(config.replace("[channels.irc]", "live_drafts = false\n[channels.irc]"))
        first = now_ms()

        def send(i: int) -> None:
            t = now_ms()
            synapse.send_text(alice, rooms[i], bodies[i])
            sent[bodies[i]] = t

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(send, range(len(rooms))))
        if backlog:
            pincer.start()
            first = pincer.started_ms
        seen = watch_round(pincer, "matrix", dict.fromkeys(bodies, 0.0))
        figures = round_figures(pincer, "matrix", sent, seen, first, label)
        figures["platform"] = "matrix"
        if not drafts:
            figures["round"] += ", live_drafts = false"
        if backlog:
            # The sends happened while it was down: time from its start.
            figures["send_to_intent_ms"] = []
            figures["per_s_from_send"] = len(bodies) / ((max(seen.values()) - pincer.started_ms) / 1000.0)
        results.append(figures)
        say(f"matrix round {label}: {figures['per_s_from_send']:.0f}/s from the "
            f"{'start' if backlog else 'first send'}, {figures['per_s_from_receipt']:.0f}/s from receipt")

    def irc_round(label: str) -> None:
        bodies = [f"bench-irc-{label}-{i}" for i in range(len(irc_people))]
        sent: dict[str, float] = {}
        first = now_ms()
        for person, body in zip(irc_people, bodies):
            sent[body] = now_ms()
            person.privmsg(nick, body)
        seen = watch_round(pincer, "irc", dict.fromkeys(bodies, 0.0))
        figures = round_figures(pincer, "irc", sent, seen, first, label)
        figures["platform"] = "irc"
        results.append(figures)
        say(f"irc round {label}: {figures['per_s_from_send']:.0f}/s from the first send, "
            f"{figures['per_s_from_receipt']:.0f}/s from receipt")

    for r in range(1, args.rounds + 1):
        matrix_round(str(r), backlog=False)
    matrix_round("backlog", backlog=True)
    # The same without live drafts: the reply no longer waits for Synapse.
    matrix_round("backlog", backlog=True, drafts=False)
    for r in range(1, args.rounds + 1):
        irc_round(str(r))
    for person in irc_people + [probe]:
        person.close()
    pincer.stop()
    return results


def wait_until_soft(ready, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return True
        time.sleep(0.05)
    return False


def first_draft(args, root: Path, synapse: Synapse, irc: Ngircd, people: dict) -> dict:
    bot, alice = people["bot"], people["alice"]
    room = synapse.direct_room(alice, bot)
    nick = "pincer-d"
    turn = [{"text": "Draft "}, {"delay_ms": args.draft_delay_ms}, {"text": "complete."}]
    config = matrix_keys(synapse, bot, [alice["user_id"]]) + irc_keys(irc, nick, ["alice-d"])
    pincer = Pincer(args.bin, root / "draft", config, turn, ["matrix", "irc"], {"MATRIX_TOKEN": bot["token"]})
    pincer.start()
    syncer = Syncer(synapse, alice)
    syncer.start()
    person = IrcUser(irc.port, "alice-d", nick)
    out: dict = {"matrix": [], "irc": []}

    def next_event(predicate, timeout: float = 60.0):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit(f"bench_channels: no matching Matrix event: "
                                 f"{(pincer.root / 'stderr.log').read_text()[-3000:]}")
            try:
                seen, event_room, event = syncer.events.get(timeout=left)
            except queue.Empty:
                continue
            if event_room == room and predicate(event):
                return seen, event

    def from_bot(event) -> bool:
        return event.get("sender") == bot["user_id"] and event.get("type") == "m.room.message"

    def quiet(events: queue.Queue, secs: float) -> None:
        """Drops what comes until nothing has for `secs` (warm-up replies)."""
        while True:
            try:
                events.get(timeout=secs)
            except queue.Empty:
                return

    settle = args.draft_delay_ms / 1000 + 3.0
    # A first message until Pincer reads the room (its first /sync skips
    # history), then until its replies are done.
    for attempt in range(100):
        synapse.send_text(alice, room, f"warm-{attempt}")
        try:
            next_event(from_bot, 10.0)
            break
        except SystemExit:
            continue
    quiet(syncer.events, settle)
    say(f"first draft: Matrix, {args.samples} messages")
    for i in range(args.samples):
        body = f"draft-matrix-{i}"
        sent = now_ms()
        synapse.send_text(alice, room, body)
        shown, draft = next_event(lambda e: from_bot(e) and "m.relates_to" not in e["content"]
                                  and e.get("origin_server_ts", 0) >= sent - 1000)
        final, _ = next_event(lambda e: from_bot(e)
                              and e["content"].get("m.new_content", {}).get("body") == "Draft complete."
                              and e["content"].get("m.relates_to", {}).get("event_id") == draft["event_id"])
        out["matrix"].append({"sent": sent, "draft": shown, "final": final, "body": body,
                              "draft_text": draft["content"].get("body")})
    say(f"first draft: IRC, {args.samples} messages")
    for attempt in range(100):
        person.privmsg(nick, f"warm-{attempt}")
        try:
            person.lines.get(timeout=10.0 + args.draft_delay_ms / 1000)
            break
        except queue.Empty:
            continue
    quiet(person.lines, settle)
    for i in range(args.samples):
        body = f"draft-irc-{i}"
        sent = now_ms()
        person.privmsg(nick, body)
        shown, text = person.lines.get(timeout=60)
        out["irc"].append({"sent": sent, "draft": shown, "final": shown, "body": body, "draft_text": text})
        # The bot paces its lines (a burst of three, then one a second).
        time.sleep(0.5)
    # Pincer's own share: receipt and the draft intent from the store.
    for platform in ("matrix", "irc"):
        rows = pincer.answered(platform)
        for sample in out[platform]:
            _at, received, run_id, reply = rows[sample["body"]]
            sample["received"] = received
            sample["reply_intent"] = reply
            sample["draft_intent"] = pincer.intent_created(f"draft:{run_id}")
    syncer.stopping = True
    person.close()
    pincer.stop()
    return out


def idle(args, root: Path, synapse: Synapse, irc: Ngircd, mail: Mail, telegram: FakeTelegram,
         people: dict) -> dict:
    bot, alice = people["bot"], people["alice"]
    config = (
        matrix_keys(synapse, bot, [alice["user_id"]])
        + irc_keys(irc, "pincer-i", ["alice"])
        + f"[channels.mail]\nkind = \"email\"\nimap = \"127.0.0.1:{mail.imap_port}\"\n"
        f"smtp = \"127.0.0.1:{mail.smtp_port}\"\ntls = \"none\"\nusername = \"pincer\"\n"
        "password_env = \"MAIL_PASSWORD\"\naddress = \"pincer@example.org\"\nallow = [\"alice@example.org\"]\n"
        + common_keys()
        + f"[channels.telegram]\napi_base = \"http://127.0.0.1:{telegram.port}\"\nallow = [\"1\"]\n"
        + common_keys()
        + f"[channels.webhook]\ncallback_url = \"http://127.0.0.1:{free_port()}/pincer\"\nallow = [\"u1\"]\n"
        + common_keys()
    )
    channels = ["matrix", "irc", "mail", "telegram", "webhook"]
    pincer = Pincer(args.bin, root / "idle", config, [{"text": "ok"}], channels,
                    {"MATRIX_TOKEN": bot["token"], "MAIL_PASSWORD": MAIL_PASSWORD,
                     "TELEGRAM_BOT_TOKEN": TELEGRAM_TOKEN, "PINCER_WEBHOOK_SECRET": WEBHOOK_SECRET})
    pincer.start()
    host, port = pincer.addr.rsplit(":", 1)
    face = Http(int(port))

    def all_up():
        status, body = face.request("GET", "/v1/channels", token=HTTP_TOKEN)
        listed = body.get("channels", body) if isinstance(body, dict) else body
        if status != 200 or not isinstance(listed, list):
            return None
        names = {c.get("name"): c for c in listed}
        ups = [n for n in channels if names.get(n, {}).get("connected")]
        return body if len(ups) == len(channels) else None

    status_body = wait_until_soft(lambda: all_up() is not None, 90.0)
    _, channels_body = face.request("GET", "/v1/channels", token=HTTP_TOKEN)
    if not status_body:
        say(f"idle: not every channel reports up: {json.dumps(channels_body)[:2000]}")
    say(f"idle: {len(channels)} channels connected; sampling every {args.sample_secs} s for {args.idle_secs} s")
    samples = []
    polls_at_start = telegram.polls[0]
    start = time.monotonic()
    cpu0 = pincer.cpu_seconds()
    while True:
        elapsed = time.monotonic() - start
        samples.append({"t": elapsed, "cpu": pincer.cpu_seconds() - cpu0, **pincer.status()})
        if elapsed >= args.idle_secs:
            break
        time.sleep(max(0.0, args.sample_secs - (time.monotonic() - start - elapsed)))
    _, channels_after = face.request("GET", "/v1/channels", token=HTTP_TOKEN)
    pincer.stop()
    return {"samples": samples, "channels_before": channels_body, "channels_after": channels_after,
            "all_up": bool(status_body), "telegram_polls": telegram.polls[0] - polls_at_start}


def fmt_ms(values: list[float]) -> str:
    if not values:
        return "—"
    return f"{statistics.median(values):.0f} / {pct(values, 99):.0f} / {max(values):.0f}"


def report(args, meta: dict, tp: list[dict], drafts: dict, idle_result: dict) -> str:
    out = [f"load average {meta['load_before']} before, {meta['load_after']} after; "
           f"`uptime` before: {meta['uptime_before']}; after: {meta['uptime_after']}", ""]
    if tp:
        out += ["| platform | round | messages (runs) | sent in | messages/s, first send → last reply intent committed "
                "| messages/s, first receipt → last committed | send → intent, ms p50 / p99 / max "
                "| receipt → intent, ms p50 / p99 / max | of which draft intent → reply intent, ms p50 / p99 / max |",
                "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in tp:
            backlog = r["round"].startswith("backlog")
            first = "start → " if backlog else ""
            sent_in = "(while stopped)" if backlog else f"{r['send_s']:.2f} s"
            out.append(
                f"| {r['platform']} | {r['round']} | {r['messages']} ({r['runs']}) | {sent_in} | "
                f"{first}{r['per_s_from_send']:.0f} | {r['per_s_from_receipt']:.0f} | "
                f"{fmt_ms(r['send_to_intent_ms'])} | {fmt_ms(r['receipt_to_intent_ms'])} | "
                f"{fmt_ms(r['draft_to_intent_ms']) if r['draft_to_intent_ms'] else '— (no draft)'} |")
        out.append("")
    if drafts:
        out += ["| platform | n | send → first visible, ms p50 / p90 / p99 / max | send → whole reply visible, ms p50 / p99 "
                "| send → received by Pincer, ms p50 / p99 | received → draft intent, ms p50 / p99 |",
                "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for platform, samples in drafts.items():
            first = [s["draft"] - s["sent"] for s in samples]
            whole = [s["final"] - s["sent"] for s in samples]
            recv = [s["received"] - s["sent"] for s in samples]
            pincer_share = [s["draft_intent"] - s["received"] for s in samples if s["draft_intent"]]
            share = (f"{statistics.median(pincer_share):.0f} / {pct(pincer_share, 99):.0f}"
                     if pincer_share else "— (no draft)")
            out.append(
                f"| {platform} | {len(samples)} | {statistics.median(first):.0f} / {pct(first, 90):.0f} / "
                f"{pct(first, 99):.0f} / {max(first):.0f} | {statistics.median(whole):.0f} / {pct(whole, 99):.0f} | "
                f"{statistics.median(recv):.0f} / {pct(recv, 99):.0f} | "
                f"{share} |")
        out.append("")
    if idle_result:
        s = idle_result["samples"]
        rss = [x["VmRSS"] for x in s]
        anon = [x["RssAnon"] for x in s]
        minute = max(1, int(60 / args.sample_secs))
        first_min = statistics.mean(rss[:minute])
        last_min = statistics.mean(rss[-minute:])
        out += [f"idle: every channel up: {idle_result['all_up']}; {len(s)} samples over {s[-1]['t']:.0f} s; "
                f"Telegram polls answered: {idle_result['telegram_polls']}", "",
                "| measure | start | end | min | max |", "| --- | ---: | ---: | ---: | ---: |",
                f"| VmRSS, MiB | {rss[0]:.1f} | {rss[-1]:.1f} | {min(rss):.1f} | {max(rss):.1f} |",
                f"| RssAnon, MiB | {anon[0]:.1f} | {anon[-1]:.1f} | {min(anon):.1f} | {max(anon):.1f} |",
                f"| VmHWM, MiB | {s[0]['VmHWM']:.1f} | {s[-1]['VmHWM']:.1f} | — | — |",
                f"| threads | {s[0]['Threads']} | {s[-1]['Threads']} | — | — |",
                f"| CPU time used, s | 0 | {s[-1]['cpu']:.2f} | — | — |", "",
                f"VmRSS mean of the first minute {first_min:.2f} MiB, of the last {last_min:.2f} MiB "
                f"(change {last_min - first_min:+.2f} MiB)", "",
                "VmRSS every sample (MiB): " + ", ".join(f"{x:.1f}" for x in rss)]
    return "\n".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=str(REPO / "target/release/pincer"))
    parser.add_argument("--chats", type=int, default=100, help="chats per platform in the throughput phase")
    parser.add_argument("--rounds", type=int, default=3, help="messages per chat (rounds) in the throughput phase")
    parser.add_argument("--samples", type=int, default=100, help="messages per platform in the first-draft phase")
    parser.add_argument("--draft-delay-ms", type=int, default=1000)
    parser.add_argument("--idle-secs", type=int, default=600)
    parser.add_argument("--sample-secs", type=int, default=10)
    parser.add_argument("--phases", default="throughput,draft,idle")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    args = parser.parse_args()
    args.bin = str(Path(args.bin).resolve())
    if not Path(args.bin).is_file():
        sys.exit(f"bench_channels: no binary at {args.bin} (cargo build --release first)")
    phases = set(args.phases.split(","))
    meta = {"load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "uptime_before": subprocess.check_output(["uptime"], text=True).strip(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    say(f"uptime: {meta['uptime_before']}")
    root = Path(tempfile.mkdtemp(prefix="pincer-bench-channels-"))
    os.chmod(root, 0o755)
    servers: list = []
    tp, drafts, idle_result = [], {}, {}
    try:
        say("starting Synapse, ngIRCd")
        synapse = Synapse(root)
        servers.append(synapse)
        irc = Ngircd(root)
        servers.append(irc)
        people = {"bot": synapse.register("pincer"), "alice": synapse.register("alice")}
        if "throughput" in phases:
            tp = throughput(args, root, synapse, irc, people)
        if "draft" in phases:
            drafts = first_draft(args, root, synapse, irc, people)
        if "idle" in phases:
            say("starting Dovecot and smtpd.py, the Telegram stand-in")
            mail = Mail(root)
            servers.append(mail)
            telegram = FakeTelegram()
            servers.append(telegram)
            idle_result = idle(args, root, synapse, irc, mail, telegram, people)
    finally:
        for server in reversed(servers):
            server.stop()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            say(f"kept {root}")
    meta["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    meta["uptime_after"] = subprocess.check_output(["uptime"], text=True).strip()
    say(f"uptime: {meta['uptime_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "throughput": tp, "draft": drafts, "idle": idle_result},
                                              indent=1))
    print(report(args, meta, tp, drafts, idle_result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
