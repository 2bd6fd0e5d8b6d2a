//! The helper of `scripts/fuzz.sh`:
//!
//! - `distillery-fuzz-tool list`: the target names, one a line;
//! - `distillery-fuzz-tool corpus TARGET DIR`: writes the target's seed inputs into DIR;
//! - `distillery-fuzz-tool replay TARGET FILE...`: runs the target on each file, exit 1 on a panic;
//! - `distillery-fuzz-tool mutate TARGET SECONDS [SEED]`: the deterministic mutation fuzzer
//!   (no coverage feedback) over the seed inputs, for when libFuzzer cannot be built.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use distillery_fuzz::{TARGETS, corpus, mutate, target};

fn usage() -> ExitCode {
    eprintln!(
        "usage: distillery-fuzz-tool list | corpus TARGET DIR | replay TARGET FILE... | \
         mutate TARGET SECONDS [SEED]"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["list"] => {
            for (name, _) in TARGETS {
                println!("{name}");
            }
            ExitCode::SUCCESS
        }
        ["corpus", t, dir] if target(t).is_some() => {
            match corpus::write_corpus(t, Path::new(dir)) {
                Ok(n) => {
                    println!("{n}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{dir}: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ["replay", t, files @ ..] if target(t).is_some() => {
            let f = target(t).unwrap_or(|_| {});
            let mut bad = 0;
            for file in files {
                let Ok(bytes) = std::fs::read(file) else {
                    eprintln!("{file}: unreadable");
                    bad += 1;
                    continue;
                };
                if let Err(msg) = mutate::run_one(f, &bytes) {
                    eprintln!("{file}: {msg}");
                    bad += 1;
                }
            }
            if bad == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        ["mutate", t, secs, rest @ ..] if target(t).is_some() && rest.len() <= 1 => {
            let (Ok(secs), Ok(seed)) = (
                secs.parse::<u64>(),
                rest.first().map_or(Ok(1), |s| s.parse::<u64>()),
            ) else {
                return usage();
            };
            let f = target(t).unwrap_or(|_| {});
            let pool: Vec<Vec<u8>> = corpus::all_inputs(t).into_iter().map(|(_, b)| b).collect();
            let r = mutate::run(f, &pool, Duration::from_secs(secs), seed);
            match r.failure {
                Some((input, msg)) => {
                    let path = mutate::save_failure(t, &input);
                    println!(
                        "{t}: execs={} result=crash input={}: {msg}",
                        r.execs,
                        path.display()
                    );
                    ExitCode::FAILURE
                }
                None => {
                    println!("{t}: execs={} result=ok", r.execs);
                    ExitCode::SUCCESS
                }
            }
        }
        _ => usage(),
    }
}
