//! Outputs and index roots are Distillery's alone: a directory of the user's is refused before
//! anything is written, nothing outside an output changes through a symbolic link, and
//! `validate` refuses what a run would.

use std::collections::BTreeMap;
use std::path::Path;

use crate::{ok, run};

/// Every entry under `dir`, links not followed: a file's bytes, a link's target, a
/// directory's name.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            let v = if t.is_symlink() {
                format!("-> {}", std::fs::read_link(&p).unwrap().display()).into_bytes()
            } else if t.is_dir() {
                todo.push(p.clone());
                b"(dir)".to_vec()
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(rel, v);
        }
    }
    out
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// Files that look like Distillery's (parts, a summary, an index's CURRENT) in a directory
/// it did not make.
fn plant_lookalikes(dir: &Path) {
    write(&dir.join("notes.txt"), b"the user's notes\n");
    write(
        &dir.join("documents/part-00000-wiki-0000.parquet"),
        b"not ours",
    );
    write(&dir.join("triples/part-00001-x-0000.parquet"), b"not ours");
    write(&dir.join("_summary.json"), b"{\"mine\": true}\n");
}

fn stderr_of(args: &[&str]) -> String {
    let out = run(args);
    assert!(!out.status.success(), "distillery {args:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_directory_of_the_users_is_refused_and_left_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mine");
    plant_lookalikes(&dir);
    let before = snapshot(tmp.path());
    let set_out = format!("output={}", dir.display());
    for cmd in ["validate", "run"] {
        let e = stderr_of(&[cmd, "pipelines/quickstart.toml", "--set", &set_out]);
        assert!(
            e.contains("did not write") && e.contains("notes.txt") && e.contains("mine"),
            "{cmd}: {e}"
        );
    }
    assert_eq!(snapshot(tmp.path()), before);
}

#[test]
fn validate_refuses_special_outputs_empty_shards_and_huge_files() {
    for (output, says) in [("/proc/self", "special file system"), ("/sys/x", "special")] {
        let set_out = format!("output={output}");
        let e = stderr_of(&["validate", "pipelines/quickstart.toml", "--set", &set_out]);
        assert!(e.contains(says), "{output}: {e}");
    }
    // 65,536 shards for a few small files would only schedule empty tasks.
    let e = stderr_of(&[
        "validate",
        "pipelines/quickstart.toml",
        "--set",
        "run.shards=65536",
        "--set",
        "stages.hseq.tasks=5000",
    ]);
    assert!(
        e.contains("run.shards = 65536, stages.hseq.tasks = 5000")
            && e.contains("only schedule empty tasks"),
        "{e}"
    );
    ok(&[
        "validate",
        "pipelines/quickstart.toml",
        "--set",
        "run.shards=1024",
    ]);
    // A pipeline file far over the limit is refused before it is read.
    let tmp = tempfile::tempdir().unwrap();
    let big = tmp.path().join("big.toml");
    let mut text =
        std::fs::read_to_string(crate::repo().join("pipelines/quickstart.toml")).unwrap();
    text.push_str(&format!("# {}\n", "x".repeat(5 << 20)));
    std::fs::write(&big, text).unwrap();
    let e = stderr_of(&["validate", big.to_str().unwrap()]);
    assert!(e.contains("over the limit of 4 MiB"), "{e}");
}

/// A run, a rerun and an index build beside files and links of the user's: a link to a
/// directory inside the output stops the run before it writes; a link to a file that a
/// previous manifest names is removed as a link; an index root in a directory of the user's
/// is refused. Nothing outside the output changes, byte for byte.
#[test]
fn runs_and_index_builds_never_touch_anything_outside_their_output() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    plant_lookalikes(&outside);
    write(&outside.join("versions/v1/manifest.json"), b"{}");
    write(&outside.join("CURRENT"), b"v1\n");
    write(&tmp.path().join("sibling.txt"), b"next to the output\n");
    let out = tmp.path().join("out");
    let set_out = format!("output={}", out.display());
    let args = ["run", "pipelines/quickstart.toml", "--set", &set_out];
    ok(&args);
    let around = |t: &Path| {
        let mut s = snapshot(t);
        s.retain(|k, _| k != "out" && !k.starts_with("out/") && !k.starts_with("out-nightly"));
        s
    };
    let before = around(tmp.path());

    // A link to a directory out of the output, named by a doctored manifest.
    std::os::unix::fs::symlink(&outside, out.join("lnk")).unwrap();
    std::os::unix::fs::symlink(tmp.path().join("sibling.txt"), out.join("file-link")).unwrap();
    let mpath = out.join("_manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    for p in [
        "lnk/notes.txt",
        "lnk/documents/part-00000-wiki-0000.parquet",
        "file-link",
    ] {
        m["files"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"path": p, "rows": 1, "bytes": 1}));
    }
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    let e = stderr_of(&args);
    assert!(e.contains("symbolic link") && e.contains("lnk"), "{e}");
    assert_eq!(around(tmp.path()), before);

    // Without the directory link the rerun publishes; the file link it lists goes as a link.
    std::fs::remove_file(out.join("lnk")).unwrap();
    ok(&args);
    assert!(std::fs::symlink_metadata(out.join("file-link")).is_err());
    assert_eq!(around(tmp.path()), before);

    // An index root in a directory of the user's.
    let mine = tmp.path().join("mine");
    write(&mine.join("notes.txt"), b"mine\n");
    let before = around(tmp.path());
    let set_root = format!("stages.index.options.root={}", mine.display());
    let e = stderr_of(&[
        "run",
        "pipelines/quickstart.toml",
        "--set",
        &set_out,
        "--set",
        &set_root,
    ]);
    assert!(e.contains("not an index root"), "{e}");
    assert_eq!(around(tmp.path()), before);

    // The nightly pipeline (its corpus and index roots inside its output) beside the same files.
    let Some(model) = crate::embed_model("the nightly part of the confinement test") else {
        return;
    };
    let o = tmp.path().join("out-nightly");
    let nightly_out = format!("output={}", o.display());
    let set_model = format!("stages.index.options.embedding.model={model}");
    let corpus = format!("stages.corpus.options.root={}/corpus", o.display());
    let index = format!("stages.index.options.root={}/index", o.display());
    let feed = format!("stages.index.options.corpus={}/corpus", o.display());
    // The second run replaces the base with the same snapshot.
    let nightly = [
        "run",
        "pipelines/nightly.toml",
        "--set",
        &nightly_out,
        "--set",
        &set_model,
        "--set",
        &corpus,
        "--set",
        &index,
        "--set",
        &feed,
        "--set",
        "stages.corpus.options.rebase=true",
    ];
    ok(&nightly);
    ok(&nightly);
    assert_eq!(around(tmp.path()), before);
}
