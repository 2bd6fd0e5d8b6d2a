//! CI's fuzz smoke run: for every target, the regression inputs, the committed seeds and (when
//! `../shared/data` is present) slices of the shared samples, then the deterministic mutator
//! for `DISTILLERY_FUZZ_SMOKE_SECS` seconds (default 2). A failing input is saved under
//! `target/fuzz-smoke-failures/<target>/`; copy it to `fuzz/regressions/<target>/` once fixed.

use std::time::Duration;

use distillery_fuzz::{corpus, mutate, target};

fn budget() -> Duration {
    let secs = std::env::var("DISTILLERY_FUZZ_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(2.0);
    Duration::from_secs_f64(secs.max(0.0))
}

fn smoke(name: &str) {
    let f = target(name).expect("a target");
    let mut inputs = corpus::regressions(name);
    inputs.extend(corpus::seeds(name));
    match corpus::shared_root() {
        Some(root) => inputs.extend(corpus::shared_inputs(name, &root)),
        None => eprintln!("{name}: ../shared/data is absent: no shared seeds"),
    }
    assert!(!inputs.is_empty(), "{name}: no seed inputs");
    for (input_name, bytes) in &inputs {
        if let Err(msg) = mutate::run_one(f, bytes) {
            let saved = mutate::save_failure(name, bytes);
            panic!(
                "{name}: seed {input_name} fails: {msg} (saved as {})",
                saved.display()
            );
        }
    }
    let pool: Vec<Vec<u8>> = inputs.into_iter().map(|(_, b)| b).collect();
    let report = mutate::run(f, &pool, budget(), 0x5eed_0000 + name.len() as u64);
    eprintln!("{name}: {} mutated inputs", report.execs);
    if let Some((input, msg)) = report.failure {
        let saved = mutate::save_failure(name, &input);
        panic!(
            "{name}: a mutated input fails: {msg} (saved as {})",
            saved.display()
        );
    }
}

macro_rules! smoke_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                smoke(stringify!($name));
            }
        )*

        #[test]
        fn every_target_has_a_smoke_test() {
            let tested = [$(stringify!($name)),*];
            for (name, _) in distillery_fuzz::TARGETS {
                assert!(tested.contains(name), "{name} has no smoke test");
            }
        }
    };
}

smoke_tests!(
    wikitext,
    mediawiki,
    multistream_index,
    ntriples,
    wikidata,
    json_array,
    qa,
    teacher,
    pipeline,
    search_query,
);
