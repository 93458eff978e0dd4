#!/usr/bin/env python3
"""Regenerates scripts/startup-symbols-PROFILE.txt: the functions of the pincer binary
that `pincer --version` runs, then those `pincer acp` adds from spawn through
`initialize` and `session/new` (with and without a provider key), each run
in the order callgrind lists them.

build.rs hands the list to lld (`--symbol-ordering-file`) for release builds,
which lays those functions out together so start-up faults in a few hundred
KiB of text instead of ~8 MiB scattered over the binary. Names carry rustc's
hashes, which move with the code, dependencies and toolchain; a stale list
only loses effect. The release and dist profiles inline differently, so
each has its own list (one list for both dilutes each with functions the
other calls at start-up). Regenerate after such changes, then rebuild:

    cargo build --release --locked && cargo build --profile dist --locked
    python3 scripts/startup_order.py --profile release    # needs valgrind
    python3 scripts/startup_order.py --profile dist
    cargo build --release --locked && cargo build --profile dist --locked   # relink

`--check` writes nothing: it traces the binary the same way and fails when
start-up runs more than `--max-missing` (default 32) functions the list
does not name, listing them and the command that regenerates it. Each such
function may cost the 64 KiB of text around it (the kernel's fault-around),
so a list a few percent stale already doubles the resident text; this is
exact, where a measurement of memory moves with the page cache. `.ci/run`
checks the release list so (scripts/ci/startup.sh).

    python3 scripts/startup_order.py --profile release --check

Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DUMMY_KEY = "sk-bench-dummy-0000000000000000000000000000"
SCRIPTS = Path(__file__).resolve().parent


def trace_version(binary: Path, out: Path) -> None:
    subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}",
                    str(binary), "--version"], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def trace(binary: Path, with_key: bool, out: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix="pincer-order-"))
    for sub in ("home", "config", "data", "work"):
        (root / sub).mkdir()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "LANG": "C.UTF-8",
        "PINCER_DATA_DIR": str(root / "pincer-data"),
    }
    if with_key:
        env["OPENAI_API_KEY"] = DUMMY_KEY
    argv = ["valgrind", "--tool=callgrind", "--demangle=no", f"--callgrind-out-file={out}", str(binary), "acp"]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=root / "work")
    assert proc.stdin is not None and proc.stdout is not None
    buf = b""

    def request(message: dict) -> None:
        nonlocal buf
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 120
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                try:
                    reply = json.loads(line)
                except ValueError:
                    continue
                if reply.get("id") == message["id"]:
                    if "error" in reply:
                        sys.exit(f"request {message['id']} failed: {reply['error']}")
                    return
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(proc.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                sys.exit(f"no answer to request {message['id']}")
            buf += chunk

    request({"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    request({"jsonrpc": "2.0", "id": 2, "method": "session/new",
             "params": {"cwd": str(root / "work"), "mcpServers": []}})
    # Work a session starts in the background (none today: the forwarder
    # starts from the commands offered with the response) would run or not
    # by timing; a pause before the end makes it part of every trace alike.
    time.sleep(1.0)
    proc.stdin.close()
    proc.wait(timeout=120)


def functions(callgrind_out: Path, binary: Path) -> list[str]:
    """Functions with cost in `binary`, in file order. Callgrind compresses
    names: `ob=(3) /path` defines id 3, later `ob=(3)` refers to it."""
    objects: dict[str, str] = {}
    names: dict[str, str] = {}
    current = None
    hit: list[tuple[str | None, str]] = []
    for line in callgrind_out.read_text(errors="replace").splitlines():
        m = re.match(r"^(c?)(ob|fn)=\((\d+)\)(?: (.*))?$", line)
        if not m:
            continue
        called, kind, ident, name = m.groups()
        if name is not None:
            (objects if kind == "ob" else names)[ident] = name
        if called:
            continue
        if kind == "ob":
            current = ident
        else:
            hit.append((current, ident))
    target = str(binary.resolve())
    out = []
    for ob, fn in hit:
        if objects.get(ob or "") == target:
            name = re.sub(r"'\d+$", "", names[fn])  # 'N marks recursion depth
            if not name.startswith("0x"):
                out.append(name)
    return out


def traced(binary: Path) -> list[str]:
    """The binary's functions start-up runs (`--version`, then `acp` through
    `session/new` with a key and without), first-run order, each once."""
    seen: set[str] = set()
    order: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        # What `--version` runs first: the path every command shares (clap,
        # logging) then packs into the fewest pages for all of them.
        runs = [Path(tmp) / "callgrind-version.out"]
        trace_version(binary, runs[0])
        for with_key in (True, False):
            runs.append(Path(tmp) / f"callgrind-acp-{with_key}.out")
            trace(binary, with_key, runs[-1])
        for out in runs:
            for name in functions(out, binary):
                if name not in seen:
                    seen.add(name)
                    order.append(name)
    return order


def check(binary: Path, listed: Path, profile: str, max_missing: int) -> int:
    """Fails when start-up runs more than `max_missing` functions the list
    does not name: each may cost the 64 KiB of text around it."""
    names = set(listed.read_text().split())
    run = traced(binary)
    missing = [n for n in run if n not in names]
    print(f"{listed.name}: start-up runs {len(run):,} of the binary's functions; {len(missing):,} of them "
          f"not in the list (at most {max_missing} allowed)")
    for name in missing[:20]:
        print(f"    {name}")
    if len(missing) > 20:
        print(f"    … and {len(missing) - 20:,} more")
    if len(missing) > max_missing:
        print(f"the start-up list is stale: regenerate it (valgrind) and rebuild:\n"
              f"    python3 scripts/startup_order.py --profile {profile} && "
              f"cargo build --locked --profile {profile}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="release", choices=["release", "dist"],
                        help="the profile whose binary is traced and whose list is written")
    parser.add_argument("--bin", help="the binary [default: target/PROFILE/pincer]")
    parser.add_argument("-o", "--output", help="where to write the list "
                        "[default: scripts/startup-symbols-PROFILE.txt]")
    parser.add_argument("--check", action="store_true",
                        help="only check that the list names what start-up runs")
    parser.add_argument("--max-missing", type=int, default=32,
                        help="--check: how many functions start-up runs may be missing from the list")
    args = parser.parse_args()
    args.bin = args.bin or f"target/{args.profile}/pincer"
    args.output = args.output or str(SCRIPTS / f"startup-symbols-{args.profile}.txt")
    binary = Path(args.bin).resolve()
    if not binary.is_file():
        print(f"no binary at {binary}: build it first (cargo build --locked --profile {args.profile})",
              file=sys.stderr)
        return 2
    if args.check:
        return check(binary, Path(args.output), args.profile, args.max_missing)
    order = traced(binary)
    Path(args.output).write_text("".join(f"{n}\n" for n in order))
    print(f"{len(order)} functions -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
