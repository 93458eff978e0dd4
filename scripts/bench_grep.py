#!/usr/bin/env python3
"""Benchmark Pincer's grep tool against ripgrep on a generated tree.

Standard library only (Python 3.11+).

Generates, once, a tree of --files files of --file-size bytes each (default
50,000 x 10 KiB, about 500 MB) under --dir: nested directories of source-like
text with a few needles. Beside them, and skipped by both tools, sit a
directory listed in a root `.ignore`, a hidden directory and a few binary
files, all holding needles too, so both sides must apply the same rules
(ignore files, hidden files, binary files) to report the same lines. The
tree is kept and reused while its parameters stay the same (they are recorded
in the hidden `.bench-tree.json`).

Then, for each pattern, it warms the page cache with one untimed run of each
side and times --runs runs of each, alternating:

  * ripgrep with its defaults: `rg PATTERN DIR`, output to a pipe;
  * Pincer: the `grep` bench binary (benches/grep.rs), which builds a tool
    context around DIR and runs the grep tool's plan and execute once, with
    the result cap out of reach so every match is rendered, and prints the
    tool's text, so both sides send the same lines down a pipe.

Both are timed as whole processes (spawn to exit), so process start-up counts
on both sides; the Pincer binary also reports the time inside the process.
Each side's matching lines are counted and must agree.

    python3 scripts/bench_grep.py
    python3 scripts/bench_grep.py --runs 9 --write /tmp/grep.md

ripgrep must be installed: `apt-get install -y ripgrep` or
`cargo install ripgrep`. The Pincer binary is built with
`cargo bench --bench grep --no-run` unless --bin names one.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.5
MANIFEST = ".bench-tree.json"
TREE_VERSION = 1

DEFAULT_PATTERNS = [
    # Rare: a literal prefix the searcher can skip to.
    r"needle_[0-9a-f]{8}",
    # Frequent, with no literal at the start of the match.
    r"\w+_handler\(",
]

VERBS = ["get", "set", "load", "store", "parse", "render", "build", "open",
         "close", "read", "write", "send", "recv", "spawn", "join", "merge",
         "split", "flush", "check", "apply", "update", "reset", "encode", "decode"]
NOUNS = ["config", "buffer", "session", "token", "request", "response", "index",
         "cache", "stream", "frame", "record", "table", "entry", "header", "body",
         "queue", "worker", "event", "state", "path", "node", "edge", "graph", "batch"]
TYPES = ["u32", "u64", "usize", "String", "Vec<u8>", "Option<Node>", "Result<(), Error>",
         "HashMap<String, Value>", "bool", "f64", "&str", "Arc<Mutex<State>>"]
WORDS = ("the a of to and in is it that for on with as was at by this be from or "
         "an are not but have which one all were when we there can more if will "
         "about so into some could them other than then now only its over also "
         "after use two how our work first well way even new want because any").split()
EXTENSIONS = ["rs", "py", "ts", "go", "c", "md"]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# The tree


def ident(rng: random.Random) -> str:
    return f"{rng.choice(VERBS)}_{rng.choice(NOUNS)}"


def line_pool(rng: random.Random, size: int) -> list[str]:
    """Source-like lines; about 1 in 400 defines or calls a `*_handler(`."""
    templates = [
        lambda: f"    let {rng.choice(NOUNS)} = {rng.choice(NOUNS)}.{ident(rng)}({rng.choice(NOUNS)});",
        lambda: f"fn {ident(rng)}({rng.choice(NOUNS)}: {rng.choice(TYPES)}) -> {rng.choice(TYPES)} {{",
        lambda: f"    if {rng.choice(NOUNS)}.len() > {rng.randint(0, 4096)} {{",
        lambda: f"        return Err(Error::new(\"{' '.join(rng.choices(WORDS, k=5))}\"));",
        lambda: "    }",
        lambda: "}",
        lambda: "",
        lambda: f"// {' '.join(rng.choices(WORDS, k=rng.randint(4, 14)))}",
        lambda: f"    {rng.choice(NOUNS)}.{ident(rng)}(&mut {rng.choice(NOUNS)}, {rng.randint(0, 999)})?;",
        lambda: f"    # {' '.join(rng.choices(WORDS, k=rng.randint(3, 10)))}",
        lambda: f"import {rng.choice(NOUNS)}.{rng.choice(NOUNS)} as {rng.choice(NOUNS)}",
        lambda: f"    const {rng.choice(NOUNS).upper()}_{rng.choice(NOUNS).upper()}: {rng.choice(TYPES)} = {rng.randint(0, 65535)};",
        lambda: f"    match {rng.choice(NOUNS)} {{ Some(x) => x, None => {rng.randint(0, 9)} }}",
    ]
    lines = []
    for _ in range(size):
        if rng.random() < 1 / 400:
            lines.append(f"    {ident(rng)}_handler({rng.choice(NOUNS)});")
        else:
            lines.append(rng.choice(templates)())
    return lines


def file_text(rng: random.Random, pool: list[str], size: int, needles: int) -> bytes:
    lines: list[str] = []
    length = 0
    while length < size:
        line = rng.choice(pool)
        lines.append(line)
        length += len(line) + 1
    for _ in range(needles):
        lines.insert(rng.randrange(len(lines)),
                     f"    let needle_{rng.getrandbits(32):08x} = {ident(rng)}();")
    text = ("\n".join(lines) + "\n").encode()[:size]
    return text[:-1] + b"\n"


def tree_params(args: argparse.Namespace) -> dict:
    return {"version": TREE_VERSION, "files": args.files, "file_size": args.file_size}


def ensure_tree(args: argparse.Namespace) -> Path:
    root = Path(args.dir)
    manifest = root / MANIFEST
    params = tree_params(args)
    if not args.regen and manifest.exists():
        try:
            if json.loads(manifest.read_text()) == params:
                log(f"using the tree at {root}")
                return root
        except (OSError, ValueError):
            pass
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    log(f"generating {args.files} files of {args.file_size} bytes under {root} ...")
    started = time.perf_counter()
    rng = random.Random(0x5EED)
    pool = line_pool(rng, 5000)
    made_dirs: set[Path] = set()
    for index in range(args.files):
        rel = Path(f"crate_{index // 5000:02d}/mod_{index // 500 % 10:02d}/"
                   f"part_{index // 50 % 10:02d}/"
                   f"{ident(rng)}_{index:05d}.{EXTENSIONS[index % len(EXTENSIONS)]}")
        path = root / rel
        if path.parent not in made_dirs:
            path.parent.mkdir(parents=True, exist_ok=True)
            made_dirs.add(path.parent)
        needles = rng.randint(1, 3) if rng.random() < 0.01 else 0
        path.write_bytes(file_text(rng, pool, args.file_size, needles))
        if index % 10000 == 9999:
            log(f"  {index + 1} files")
    # Skipped by both sides: an ignored directory, a hidden one, binary files.
    (root / ".ignore").write_text("vendor/\n")
    for name, count in (("vendor", 200), (".cache", 100)):
        for index in range(count):
            path = root / name / f"dep_{index:03d}" / "lib.rs"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(file_text(rng, pool, args.file_size, 2))
    for index in range(50):
        blob = b"\x7fELF\x00\x01" + file_text(rng, pool, args.file_size, 2)
        (root / f"crate_{index % 10:02d}" / f"blob_{index:02d}.bin").write_bytes(blob)
    manifest.write_text(json.dumps(params))
    log(f"generated in {time.perf_counter() - started:.0f} s")
    return root


def tree_size(root: Path) -> tuple[int, int]:
    files = 0
    total = 0
    for dirpath, _, names in os.walk(root):
        for name in names:
            files += 1
            total += os.path.getsize(os.path.join(dirpath, name))
    return files, total


# --------------------------------------------------------------------------
# The two sides


def find_rg(explicit: str | None) -> str:
    rg = explicit or shutil.which("rg")
    if not rg:
        log("ripgrep (rg) is not installed; install it with `apt-get install -y ripgrep` "
            "or `cargo install ripgrep`, or pass --rg PATH")
        sys.exit(2)
    return rg


def build_pincer_bench() -> str:
    log("building the grep bench (cargo bench --bench grep --no-run) ...")
    result = subprocess.run(
        ["cargo", "bench", "--bench", "grep", "--no-run", "--message-format=json"],
        cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        log(result.stderr)
        sys.exit(1)
    for line in result.stdout.splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if (message.get("reason") == "compiler-artifact"
                and message.get("target", {}).get("name") == "grep"
                and message.get("executable")):
            return message["executable"]
    log("cargo built no `grep` bench executable")
    sys.exit(1)


def timed(command: list[str]) -> tuple[float, float, bytes]:
    """Wall time, CPU time (user + system, all threads) and stdout of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # rg exits 1 when nothing matched; anything else is a failure.
    if result.returncode not in (0, 1):
        log(f"{command[0]} failed ({result.returncode}): {result.stderr.decode(errors='replace')}")
        sys.exit(1)
    return elapsed, cpu, result.stdout


def pincer_report(stdout: bytes) -> tuple[float, int]:
    """The in-process time and match count the bench binary prints around the
    tool's text (`elapsed_ms MS` first, `matches N` last)."""
    first, _, rest = stdout.partition(b"\n")
    last = rest.rstrip(b"\n").rpartition(b"\n")[2]
    if not first.startswith(b"elapsed_ms ") or not last.startswith(b"matches "):
        log("unexpected output from the grep bench binary")
        sys.exit(1)
    return float(first.split()[1]) / 1000, int(last.split()[1])


def bench_pattern(pattern: str, root: Path, rg: str, pincer: str, runs: int) -> dict:
    rg_cmd = [rg, pattern, str(root)]
    # --print: the tool's text goes down the pipe too, as rg's lines do.
    pincer_cmd = [pincer, str(root), pattern, "--print"]
    # Warm-up: fills the page cache and checks that both sides agree.
    _, _, rg_out = timed(rg_cmd)
    rg_matches = rg_out.count(b"\n")
    _, _, out = timed(pincer_cmd)
    _, pincer_matches = pincer_report(out)
    rg_times, rg_cpu, pincer_times, pincer_cpu, pincer_inner = [], [], [], [], []
    for _ in range(runs):
        elapsed, cpu, _ = timed(rg_cmd)
        rg_times.append(elapsed)
        rg_cpu.append(cpu)
        elapsed, cpu, out = timed(pincer_cmd)
        pincer_times.append(elapsed)
        pincer_cpu.append(cpu)
        pincer_inner.append(pincer_report(out)[0])
    rg_median = statistics.median(rg_times)
    pincer_median = statistics.median(pincer_times)
    return {
        "pattern": pattern,
        "rg_matches": rg_matches,
        "pincer_matches": pincer_matches,
        "rg_s": rg_times,
        "rg_cpu_s": rg_cpu,
        "pincer_s": pincer_times,
        "pincer_cpu_s": pincer_cpu,
        "pincer_inner_s": pincer_inner,
        "rg_median_s": rg_median,
        "pincer_median_s": pincer_median,
        "rg_cpu_median_s": statistics.median(rg_cpu),
        "pincer_cpu_median_s": statistics.median(pincer_cpu),
        "pincer_inner_median_s": statistics.median(pincer_inner),
        "ratio": pincer_median / rg_median,
    }


# --------------------------------------------------------------------------
# Report


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def report(results: list[dict], meta: dict) -> str:
    lines = [
        "## grep vs ripgrep",
        "",
        f"Measured {meta['date']} with `scripts/bench_grep.py` on {meta['cpu']}, "
        f"{meta['cores']} cores; load average {meta['load_before']} before, "
        f"{meta['load_after']} after.",
        f"Tree: {meta['files']:,} files, {meta['bytes'] / 1e6:,.0f} MB at `{meta['dir']}` "
        f"({meta['tree_files']:,} files generated, of which those in a `.ignore`d directory, "
        "a hidden directory and binary files hold needles that neither side reports).",
        f"{meta['rg_version']} with its defaults (`rg PATTERN DIR`) against Pincer's `grep` "
        "tool (`benches/grep.rs`, release profile: plan + execute with every match rendered, "
        "the text then written to the pipe as rg writes its lines). "
        f"Median of {meta['runs']} runs each, alternating, page cache warm; whole-process "
        "wall time, so start-up counts on both sides.",
        "",
        "| pattern | matching lines (rg / pincer) | rg | pincer | pincer / rg "
        "| pincer in-process | CPU rg / pincer |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        lines.append(
            f"| `{r['pattern']}` | {r['rg_matches']:,} / {r['pincer_matches']:,} "
            f"| {r['rg_median_s'] * 1000:.0f} ms | {r['pincer_median_s'] * 1000:.0f} ms "
            f"| {r['ratio']:.2f}x | {r['pincer_inner_median_s'] * 1000:.0f} ms "
            f"| {r['rg_cpu_median_s'] * 1000:.0f} / {r['pincer_cpu_median_s'] * 1000:.0f} ms |")
    worst = max(r["ratio"] for r in results)
    verdict = "met" if worst <= TARGET_RATIO else "not met"
    lines += [
        "",
        f"Target: within {TARGET_RATIO}x of ripgrep: {verdict} (worst {worst:.2f}x). "
        "CPU is user + system time over all threads (median), which other load on "
        "the machine disturbs less than wall time.",
        "",
        "To run it (ripgrep needed: `apt-get install -y ripgrep` or `cargo install ripgrep`; "
        "the tree is generated once, in about a minute and a half, and reused):",
        "",
        "```sh",
        "python3 scripts/bench_grep.py                # builds the bench, prints the table",
        "python3 scripts/bench_grep.py --runs 9 --write /tmp/grep.md",
        "```",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", default="/tmp/pincer-grep-tree",
                        help="where the tree is generated and cached")
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--file-size", type=int, default=10_240)
    parser.add_argument("--regen", action="store_true", help="generate the tree again")
    parser.add_argument("--runs", "-n", type=int, default=5)
    parser.add_argument("--pattern", action="append",
                        help="a pattern to time (repeatable; default: "
                        + ", ".join(DEFAULT_PATTERNS) + ")")
    parser.add_argument("--rg", help="the ripgrep binary (default: rg on PATH)")
    parser.add_argument("--bin", help="the Pincer grep bench binary (default: build it)")
    parser.add_argument("--write", help="write the Markdown section to this file")
    parser.add_argument("--json", help="write the raw figures to this file")
    args = parser.parse_args()

    rg = find_rg(args.rg)
    rg_version = subprocess.run([rg, "--version"], capture_output=True,
                                text=True).stdout.splitlines()[0]
    pincer = args.bin or build_pincer_bench()
    root = ensure_tree(args)
    tree_files, tree_bytes = tree_size(root)

    load_before = loadavg()
    results = []
    for pattern in args.pattern or DEFAULT_PATTERNS:
        log(f"timing {pattern!r} ...")
        result = bench_pattern(pattern, root, rg, pincer, args.runs)
        results.append(result)
        log(f"  rg {result['rg_median_s'] * 1000:.0f} ms ({result['rg_matches']} lines), "
            f"pincer {result['pincer_median_s'] * 1000:.0f} ms "
            f"({result['pincer_matches']} lines), ratio {result['ratio']:.2f}; CPU "
            f"{result['rg_cpu_median_s'] * 1000:.0f} / {result['pincer_cpu_median_s'] * 1000:.0f} ms")
    meta = {
        "date": _dt.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "load_before": load_before,
        "load_after": loadavg(),
        "files": args.files,
        "bytes": args.files * args.file_size,
        "tree_files": tree_files,
        "tree_bytes": tree_bytes,
        "dir": str(root),
        "runs": args.runs,
        "rg_version": rg_version,
    }
    text = report(results, meta)
    print(text)
    if args.write:
        Path(args.write).write_text(text)
        log(f"wrote {args.write}")
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    mismatched = [r["pattern"] for r in results if r["rg_matches"] != r["pincer_matches"]]
    if mismatched:
        log(f"match counts differ for: {', '.join(mismatched)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
