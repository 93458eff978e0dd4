#!/usr/bin/env bash
# Release artifacts (docs/release.md):
#   dist/pincer-VERSION-TARGET.tar.gz          the binary (profile `dist`), README.md, LICENSE
#   dist/pincer-VERSION-TARGET.tar.gz.sha256   its checksum, in `sha256sum` format
#   dist/acp-registry/pincer/{agent.json,icon.svg}
#                                              the ACP Registry entry for the archives in dist/,
#                                              with their sha256 (from packaging/acp-registry)
# and `cargo package --locked`, which builds the crate as crates.io would.
#
#   scripts/release.sh [--target TRIPLE]... [--out DIR]    all of it (default target: the host's)
#   scripts/release.sh build   [--target TRIPLE]... [--out DIR]   archives only
#   scripts/release.sh package --target TRIPLE --binary PATH [--out DIR]
#                                              archive a binary built elsewhere
#   scripts/release.sh manifest [--out DIR]    the registry entry for the archives in DIR
#   scripts/release.sh crate                   `cargo package --locked` (verifies by building)
#   scripts/release.sh targets                 platform, target and archive name, one a line
#
# Idempotent: an archive is rewritten byte for byte the same from the same
# binary (fixed order, times and owners, gzip -n). Reads no stdin.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

die() {
  echo "release: $*" >&2
  exit 1
}
note() {
  echo "release: $*" >&2
}

# The targets an archive can be made for, with the ACP Registry's platform name.
# Pincer uses Linux system calls (Landlock, prctl, close_range): Linux only.
PLATFORMS="linux-x86_64 x86_64-unknown-linux-gnu
linux-aarch64 aarch64-unknown-linux-gnu
linux-x86_64 x86_64-unknown-linux-musl
linux-aarch64 aarch64-unknown-linux-musl"

platform_of() {
  local platform target
  while read -r platform target; do
    [ "$target" = "$1" ] && {
      echo "$platform"
      return 0
    }
  done <<<"$PLATFORMS"
  return 1
}

metadata() {
  cargo metadata --no-deps --format-version 1 --offline 2>/dev/null |
    python3 -c 'import json, sys; p = json.load(sys.stdin)["packages"][0]; print(p[sys.argv[1]] or "")' "$1" ||
    die "cannot read the package's $1 from Cargo.toml (cargo metadata failed)"
}

archive_name() {
  echo "pincer-$VERSION-$1.tar.gz"
}

host_target() {
  rustc -vV | sed -n 's/^host: //p'
}

# Archive BINARY for TARGET into OUT: pincer, README.md, LICENSE at the top
# level (the registry runs `./pincer` from where it extracted the archive).
package() {
  local target=$1 binary=$2 name stage
  platform_of "$target" >/dev/null ||
    die "no archive for $target: the targets are $(cut -d' ' -f2 <<<"$PLATFORMS" | paste -sd' ') (Pincer builds for Linux only)"
  [ -f "$binary" ] && [ -x "$binary" ] || die "$binary is not an executable file"
  [ -f README.md ] && [ -f LICENSE ] || die "README.md or LICENSE is missing at the repository root"
  name=$(archive_name "$target")
  stage=$(mktemp -d)
  if ! {
    install -m 0755 "$binary" "$stage/pincer" &&
      install -m 0644 README.md LICENSE "$stage/" &&
      tar --create --mtime=@0 --owner=0 --group=0 --numeric-owner \
        --format=gnu -C "$stage" LICENSE README.md pincer |
      gzip -n >"$OUT/$name.tmp"
  }; then
    rm -rf "$stage" "$OUT/$name.tmp"
    die "writing $OUT/$name failed"
  fi
  rm -rf "$stage"
  mv "$OUT/$name.tmp" "$OUT/$name"
  (cd "$OUT" && sha256sum "$name" >"$name.sha256")
  note "wrote $OUT/$name ($(du -h "$OUT/$name" | cut -f1)) and $name.sha256"
}

build() {
  local target installed
  installed=$(rustup target list --installed 2>/dev/null || host_target)
  for target in "${TARGETS[@]}"; do
    platform_of "$target" >/dev/null ||
      die "no archive for $target: the targets are $(cut -d' ' -f2 <<<"$PLATFORMS" | paste -sd' ') (Pincer builds for Linux only)"
    grep -qx "$target" <<<"$installed" ||
      die "the Rust standard library for $target is not installed (rustup target add $target; a cross linker too, see docs/release.md)"
    note "building $target (cargo build --locked --profile dist; several minutes)"
    cargo build --locked --profile dist --target "$target" --bin pincer </dev/null ||
      die "cargo build for $target failed"
    local binary="${CARGO_TARGET_DIR:-target}/$target/dist/pincer"
    if [ "$target" = x86_64-unknown-linux-gnu ] && [ "$target" = "$(host_target)" ]; then
      startup_list "$target" "$binary"
    fi
    package "$target" "$binary"
  done
}

# The dist profile's start-up list (build.rs, docs/benchmarks.md "Start-up")
# names what start-up runs in this binary, or is regenerated (callgrind) and
# the binary built again with it: a stale list can double the start-up
# footprint, quietly.
startup_list() {
  local target=$1 binary=$2
  command -v valgrind >/dev/null 2>&1 ||
    die "valgrind is needed to check the dist start-up list (apt-get install valgrind)"
  python3 scripts/startup_order.py --profile dist --bin "$binary" --check && return
  note "regenerating scripts/startup-symbols-dist.txt (commit it with the release)"
  python3 scripts/startup_order.py --profile dist --bin "$binary" || die "cannot trace $binary"
  cargo build --locked --profile dist --target "$target" --bin pincer </dev/null ||
    die "cargo build for $target failed"
  python3 scripts/startup_order.py --profile dist --bin "$binary" --check ||
    die "the regenerated start-up list still misses functions start-up runs"
}

# The registry entry for the archives in OUT: the template's platforms whose
# archive is there, each with the archive's sha256; the others are left out
# (the registry checks that every archive URL answers).
manifest() {
  local dir="$OUT/acp-registry/pincer"
  mkdir -p "$dir"
  python3 - "$ROOT/packaging/acp-registry/agent.json" "$OUT" "$VERSION" "$dir/agent.json" <<'PY' || exit 1
import hashlib, json, os, sys
template, out, version, dest = sys.argv[1:]
def die(message):
    print(f"release: {message}", file=sys.stderr)
    sys.exit(1)
with open(template) as f:
    entry = json.load(f)
if entry.get("version") != version:
    die(f"{template} has version {entry.get('version')}, Cargo.toml {version}: update the manifest")
binary = entry["distribution"]["binary"]
kept = {}
for platform, spec in binary.items():
    name = spec["archive"].rsplit("/", 1)[-1]
    path = os.path.join(out, name)
    if not os.path.isfile(path):
        print(f"release: manifest: no {name} in {out}, {platform} left out", file=sys.stderr)
        continue
    with open(path, "rb") as f:
        spec = dict(spec, sha256=hashlib.sha256(f.read()).hexdigest())
    kept[platform] = spec
if not kept:
    die(f"manifest: none of the archives packaging/acp-registry/agent.json names is in {out}")
entry["distribution"]["binary"] = kept
with open(dest + ".tmp", "w") as f:
    json.dump(entry, f, indent=2)
    f.write("\n")
os.replace(dest + ".tmp", dest)
print(f"release: wrote {dest} ({', '.join(sorted(kept))})", file=sys.stderr)
PY
  cp "$ROOT/packaging/acp-registry/icon.svg" "$dir/icon.svg"
}

crate() {
  local start=$SECONDS
  note "cargo package --locked (builds the packaged crate as crates.io would; several minutes)"
  cargo package --locked </dev/null || die "cargo package failed"
  note "cargo package passed in $((SECONDS - start)) s"
}

command=all
case "${1:-}" in
all | build | package | manifest | crate | targets)
  command=$1
  shift
  ;;
esac
TARGETS=()
BINARY=
OUT=$ROOT/dist
while [ $# -gt 0 ]; do
  case "$1" in
  --target)
    [ $# -ge 2 ] || die "--target needs a target triple"
    TARGETS+=("$2")
    shift 2
    ;;
  --binary)
    [ $# -ge 2 ] || die "--binary needs a path"
    BINARY=$2
    shift 2
    ;;
  --out)
    [ $# -ge 2 ] || die "--out needs a directory"
    OUT=$2
    shift 2
    ;;
  -h | --help)
    sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *) die "unknown argument: $1 (see scripts/release.sh --help)" ;;
  esac
done
if [ "$command" != targets ] && [ "$command" != crate ]; then
  mkdir -p "$OUT" || die "cannot create $OUT"
  OUT=$(cd "$OUT" && pwd)
fi

command -v cargo >/dev/null 2>&1 || die "cargo is missing: install Rust (https://rustup.rs)"
command -v python3 >/dev/null 2>&1 || die "python3 is missing: it writes the registry entry"
VERSION=$(metadata version)
[ -n "$VERSION" ] || die "Cargo.toml has no version"
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("$(host_target)")

case "$command" in
targets)
  while read -r platform target; do
    echo "$platform $target $(archive_name "$target")"
  done <<<"$PLATFORMS"
  ;;
package)
  [ ${#TARGETS[@]} -eq 1 ] || die "package takes one --target"
  [ -n "$BINARY" ] || die "package needs --binary PATH"
  package "${TARGETS[0]}" "$BINARY"
  ;;
build) build ;;
manifest) manifest ;;
crate) crate ;;
all)
  build
  manifest
  crate
  ;;
esac
