//! A deterministic mutation fuzzer (no coverage feedback) for CI's smoke runs: from a fixed
//! seed, it takes an input of the pool, applies a few byte-level mutations (bit flips,
//! interesting bytes, inserts, deletes, duplicated ranges, splices with another input, tokens
//! of the formats) and runs the target, for a bounded time. A panic of any thread is caught
//! and reported with the input that caused it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Longest input the mutator makes.
pub const MAX_LEN: usize = 128 << 10;

/// Tokens of the fuzzed formats, inserted whole.
const TOKENS: &[&[u8]] = &[
    b"{{",
    b"}}",
    b"[[",
    b"]]",
    b"{|",
    b"|}",
    b"|-",
    b"||",
    b"!!",
    b"'''",
    b"''",
    b"==",
    b"<ref>",
    b"</ref>",
    b"<!--",
    b"-->",
    b"&lt;",
    b"&amp;",
    b"&#x41;",
    b"<page>",
    b"</page>",
    b"<text>",
    b"</text>",
    b"<title>",
    b"<revision>",
    b"<![CDATA[",
    b"]]>",
    b"BZh9",
    b"1AY&SY",
    b"\n",
    b"\t",
    b"\"",
    b"\\",
    b"\\u00e9",
    b"\\ud800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"true",
    b"-1e999",
    b"18446744073709551616",
    b"<http://rdf.freebase.com/ns/",
    b"> .",
    b"\"@en",
    b"^^<http://www.w3.org/2001/XMLSchema#",
    b"(<S> ",
    b"| <P> ",
    b"| <O> ",
    b")",
    b"--side--",
    b"[stages.",
    b"[[inputs]]",
    b"kind = ",
    b"= \"",
    b"'''\n",
    b"\xff",
    b"\xc3",
    b"\xe2\x80",
    b"\xf0\x9f\x98",
    b"\0",
];

static PANICKED: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Installs (once) a panic hook that records any panic, on any thread, and keeps the default
/// report: a reader's worker thread may panic without the caller seeing it.
fn install_hook() {
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICKED.store(true, Ordering::SeqCst);
            default(info);
        }));
    });
}

/// Runs `f` on `input`; `Err` with the panic message when it (or a thread it started) panicked.
pub fn run_one(f: fn(&[u8]), input: &[u8]) -> Result<(), String> {
    install_hook();
    PANICKED.store(false, Ordering::SeqCst);
    let r = catch_unwind(AssertUnwindSafe(|| f(input)));
    match r {
        Err(e) => Err(e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".to_string())),
        Ok(()) if PANICKED.load(Ordering::SeqCst) => Err("a thread panicked".to_string()),
        Ok(()) => Ok(()),
    }
}

/// One mutation of `base`, perhaps spliced with `other`.
pub fn mutate(rng: &mut fastrand::Rng, base: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..rng.usize(1..=4) {
        let len = v.len();
        match rng.u8(0..9) {
            0 if len > 0 => {
                let i = rng.usize(..len);
                v[i] ^= 1 << rng.u8(0..8);
            }
            1 if len > 0 => {
                let i = rng.usize(..len);
                v[i] = *rng
                    .choice(&[0u8, 0xff, 0x7f, 0x80, b'0', b'9', b' ', b'\n', b'<', b'{'])
                    .unwrap_or(&0);
            }
            2 => {
                let i = rng.usize(..=len);
                let n = rng.usize(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
                v.splice(i..i, bytes);
            }
            3 if len > 0 => {
                let i = rng.usize(..len);
                let n = rng.usize(1..=(len - i).min(64));
                v.drain(i..i + n);
            }
            4 if len > 0 => {
                let i = rng.usize(..len);
                let n = rng.usize(1..=(len - i).min(256));
                let copy = v[i..i + n].to_vec();
                let at = rng.usize(..=len);
                v.splice(at..at, copy);
            }
            5 if !other.is_empty() => {
                let cut = rng.usize(..=len);
                let from = rng.usize(..other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
            }
            6 if len > 0 => v.truncate(rng.usize(..len)),
            _ => {
                let i = rng.usize(..=len);
                let t = TOKENS[rng.usize(..TOKENS.len())];
                v.splice(i..i, t.iter().copied());
            }
        }
    }
    v.truncate(MAX_LEN);
    v
}

/// What a mutation run did.
#[derive(Debug, Default)]
pub struct Report {
    pub execs: u64,
    /// The first failing input and its panic, if any.
    pub failure: Option<(Vec<u8>, String)>,
}

/// Mutates inputs of `pool` and runs `f` on them for `budget` (at least one input), from the
/// fixed `seed`; stops at the first failure.
pub fn run(f: fn(&[u8]), pool: &[Vec<u8>], budget: Duration, seed: u64) -> Report {
    let mut rng = fastrand::Rng::with_seed(seed);
    let empty = [Vec::new()];
    let pool = if pool.is_empty() { &empty[..] } else { pool };
    let start = Instant::now();
    let mut report = Report::default();
    loop {
        let base = &pool[rng.usize(..pool.len())];
        let other = &pool[rng.usize(..pool.len())];
        // Most mutations start from a short prefix: the parsers' early paths matter as much
        // as their ends, and short inputs run fast in a debug build.
        let base = if base.len() > 4096 && rng.bool() {
            &base[..rng.usize(1..4096)]
        } else {
            &base[..]
        };
        let input = mutate(&mut rng, base, other);
        report.execs += 1;
        if let Err(msg) = run_one(f, &input) {
            report.failure = Some((input, msg));
            return report;
        }
        if start.elapsed() >= budget {
            return report;
        }
    }
}

/// Where a failing input found by the smoke run is saved:
/// `target/fuzz-smoke-failures/<target>/<hash>`.
pub fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = crate::corpus::repo_root()
        .join("target/fuzz-smoke-failures")
        .join(target);
    let path = dir.join(crate::corpus::content_name(input));
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(&path, input);
    path
}
