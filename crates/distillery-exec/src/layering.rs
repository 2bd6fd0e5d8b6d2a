//! The crate's import graph has no circle: each source file is a node, each `crate::…` path
//! in its code (a `use` or an inline path; comments and `#[cfg(test)] mod tests` blocks
//! left out) an edge to the file of the longest module the path names. The stage contract
//! (`contract/`) sits below both the engine and the stages, so no file imports back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, as its module path (`stages::label::route`; `crate` for lib.rs).
fn modules(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            let mut p = prefix.to_vec();
            p.push(name);
            modules(&path, &p, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            let mut p = prefix.to_vec();
            if name != "mod" && name != "lib" {
                p.push(name);
            }
            let key = if p.is_empty() {
                "crate".to_string()
            } else {
                p.join("::")
            };
            out.insert(key, path);
        }
    }
}

/// The code of a file without comments and without its inline test module.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules a file's `crate::` paths name (brace groups expanded one level).
fn edges(text: &str, mods: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let end = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let path = rest[..end].trim_end_matches(':');
        let mut heads = vec![path.to_string()];
        if rest[end..].starts_with('{') {
            let close = rest[end..].find('}').map_or(rest.len(), |j| end + j);
            for item in rest[end + 1..close].split(',') {
                let item = item.split_whitespace().next().unwrap_or("");
                if !item.is_empty() && item != "self" {
                    heads.push(format!("{path}::{item}"));
                }
            }
        }
        for h in heads {
            let parts: Vec<&str> = h.split("::").filter(|s| !s.is_empty()).collect();
            if let Some(m) = (1..=parts.len())
                .rev()
                .map(|k| parts[..k].join("::"))
                .find(|m| mods.contains_key(m))
            {
                out.insert(m);
            }
        }
    }
    out
}

/// A circle of the graph, if it has one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == m).unwrap();
                    let mut c = stack[at..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut mods = BTreeMap::new();
    modules(&src, &[], &mut mods);
    let mut graph = BTreeMap::new();
    for (m, path) in &mods {
        let is_test = path.file_stem().is_some_and(|s| {
            let s = s.to_string_lossy();
            s == "tests" || s.ends_with("_tests") || s == "layering"
        });
        if is_test {
            continue;
        }
        let mut e = edges(&code(&std::fs::read_to_string(path).unwrap()), &mods);
        e.remove(m);
        graph.insert(m.clone(), e);
    }
    graph
}

#[test]
fn the_import_graph_has_no_circle() {
    let g = graph();
    assert!(g.len() > 40, "only {} files found", g.len());
    if let Some(c) = circle(&g) {
        panic!("import circle: {}", c.join(" -> "));
    }
}

#[test]
fn the_contract_imports_no_engine_file_and_no_stage() {
    let g = graph();
    for (m, e) in g.iter().filter(|(m, _)| m.starts_with("contract")) {
        for t in e {
            let engine = ["plan", "task", "run", "estimate", "stages", "kit"];
            assert!(
                !engine
                    .iter()
                    .any(|x| t == x || t.starts_with(&format!("{x}::"))),
                "{m} imports {t}"
            );
        }
    }
}

#[test]
fn a_circle_is_found() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(circle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.insert("c".to_string(), BTreeSet::new());
    assert_eq!(circle(&g), None);
    let mut mods = BTreeMap::new();
    for m in ["plan", "stages", "stages::label", "contract"] {
        mods.insert(m.to_string(), PathBuf::new());
    }
    let e = edges(
        "use crate::stages::label::{self, Foo};\nuse crate::{contract::X, plan};",
        &mods,
    );
    let want: BTreeSet<String> = ["stages::label", "contract", "plan"]
        .map(String::from)
        .into();
    assert_eq!(e, want);
}
