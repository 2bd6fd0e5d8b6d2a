#!/usr/bin/env bash
# The bz2 decoder alone, by backend: the `bzip2` crate (the version in Cargo.lock) on its
# default pure-Rust backend (libbz2-rs-sys, what Distillery links) and on the C libbz2
# (`bzip2-sys`, static), each a small release binary that decodes FILE to nothing through
# `MultiBzDecoder` with 64 KiB reads, against `bzip2 -dc FILE > /dev/null`. One core
# (taskset -c 0), ROUNDS rounds (default 5), each command once a round in the same order;
# prints medians and the ratios to `bzip2 -dc`.
#
#   scripts/bench/bz2_backends.sh FILE.bz2 [ROUNDS=5]
set -euo pipefail
cd "$(dirname "$0")/../.."
FILE=$(realpath "$1")
ROUNDS=${2:-5}
VERSION=$(awk '/^name = "bzip2"$/ {getline; gsub(/[^0-9.]/, ""); print; exit}' Cargo.lock)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"
cat > "$WORK/Cargo.toml" <<TOML
[package]
name = "bz2-backends"
version = "0.1.0"
edition = "2021"
[workspace]
[features]
rust = ["bzip2/default"]
c = ["bzip2/bzip2-sys", "bzip2/static"]
[dependencies]
bzip2 = { version = "=$VERSION", default-features = false }
TOML
cat > "$WORK/src/main.rs" <<'RS'
use std::io::Read;
fn main() {
    let path = std::env::args().nth(1).expect("usage: bz2-backends FILE");
    let file = std::fs::File::open(path).unwrap();
    let raw = std::io::BufReader::with_capacity(1 << 16, file);
    let mut dec = bzip2::read::MultiBzDecoder::new(raw);
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = dec.read(&mut buf).unwrap();
        if k == 0 {
            break;
        }
        n += k as u64;
    }
    println!("{n}");
}
RS
for b in rust c; do
  CARGO_TARGET_DIR="$WORK/t-$b" cargo build -q --release --manifest-path "$WORK/Cargo.toml" --features "$b"
done
PIN="taskset -c 0"
command -v taskset >/dev/null || PIN=""
secs() { python3 -c 'import sys,time,subprocess; t=time.time(); subprocess.run(sys.argv[1], shell=True, check=True, stdout=subprocess.DEVNULL); print(f"{time.time()-t:.3f}")' "$1"; }
: > "$WORK/rounds.tsv"
for r in $(seq "$ROUNDS"); do
  echo "$r bzip2-dc $(secs "$PIN bzip2 -dc $FILE")" >> "$WORK/rounds.tsv"
  for b in rust c; do
    echo "$r $b $(secs "$PIN $WORK/t-$b/release/bz2-backends $FILE")" >> "$WORK/rounds.tsv"
  done
done
python3 - "$WORK/rounds.tsv" "$VERSION" <<'PY'
import statistics, sys
from collections import defaultdict
t = defaultdict(dict)
for line in open(sys.argv[1]):
    r, name, s = line.split()
    t[name][int(r)] = float(s)
med = {k: statistics.median(v.values()) for k, v in t.items()}
print(f"bzip2 crate {sys.argv[2]}, medians of {len(t['bzip2-dc'])} rounds, one core")
print(f"bzip2 -dc: {med['bzip2-dc']:.2f} s")
for b, what in (("rust", "libbz2-rs-sys (default)"), ("c", "C libbz2 (bzip2-sys)")):
    each = [t[b][r] / t["bzip2-dc"][r] for r in t[b]]
    print(f"{what}: {med[b]:.2f} s, {med[b] / med['bzip2-dc']:.2f}x bzip2 -dc "
          f"({min(each):.2f}-{max(each):.2f}x round by round)")
PY
