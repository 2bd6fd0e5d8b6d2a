//! The fast matrix-product kernels are in the build: the `gemm` crate that candle-core links
//! (and its `gemm-f32`, where the f32 microkernels live) must have the `x86-v4` feature, which
//! compiles in the AVX-512 kernels that `gemm` then picks at run time on CPUs that have them.
//! `gemm` is in the workspace only to turn that feature on; if candle moves to a `gemm` version
//! the workspace's entry does not match, two `gemm`s are built and candle's silently loses
//! the kernels. The same holds for the `pulp` that `distillery-embed`'s own element-wise
//! kernels dispatch through. This test reads the resolved dependency graph (`cargo metadata`,
//! offline) and fails then.

use std::collections::HashMap;
use std::process::Command;

use serde_json::Value;

#[test]
fn candle_links_a_gemm_with_the_avx512_kernels() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    // The graph of this machine's platform only: offline, cargo has the packages of the
    // platforms it built for and no others.
    let rustc = std::path::Path::new(env!("CARGO")).with_file_name("rustc");
    let rustc = if rustc.exists() {
        rustc
    } else {
        "rustc".into()
    };
    let vv = Command::new(rustc)
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let vv = String::from_utf8(vv.stdout).unwrap();
    let host = vv
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", host, "--manifest-path", manifest])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    // The package a node depends on under `dep` (dependency names use underscores).
    let dep = |node: &Value, dep: &str| -> String {
        node["deps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == dep)
            .unwrap_or_else(|| panic!("{} has no dependency {dep}", node["id"]))["pkg"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let features = |id: &str| -> Vec<String> {
        nodes[id]["features"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    };
    let candles: Vec<&str> = names
        .iter()
        .filter(|(_, n)| **n == "candle-core")
        .map(|(id, _)| *id)
        .filter(|id| nodes.contains_key(id))
        .collect();
    assert!(!candles.is_empty(), "candle-core is not in the build");
    // The element-wise kernels (softmax, bias, GELU) go through `pulp`, whose AVX-512 path
    // is compiled in by the same feature.
    let embed = names
        .iter()
        .find(|(id, n)| **n == "distillery-embed" && nodes.contains_key(*id))
        .map(|(id, _)| *id)
        .expect("distillery-embed is in the build");
    let pulp = dep(nodes[embed], "pulp");
    assert!(
        features(&pulp).iter().any(|f| f == "x86-v4"),
        "{pulp}, linked by distillery-embed, is built without `x86-v4`: the fused element-wise \
         kernels lose their AVX-512 path. Features: {:?}",
        features(&pulp)
    );
    for candle in candles {
        let gemm = dep(nodes[candle], "gemm");
        let f32_kernels = dep(nodes[gemm.as_str()], "gemm_f32");
        for id in [&gemm, &f32_kernels] {
            assert!(
                features(id).iter().any(|f| f == "x86-v4"),
                "{id}, linked by {candle}, is built without `x86-v4`: candle's CPU matrix \
                 products lose their AVX-512 kernels. The workspace's `gemm` entry must turn \
                 `x86-v4` on, at the version candle-core depends on. Features: {:?}",
                features(id)
            );
        }
    }
}
