//! Walking an output directory in the end-to-end tests.

use std::path::{Path, PathBuf};

/// Every file under `dir`, as (path relative to `dir`, full path), sorted by relative path.
pub fn files_under(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            files.push((rel, p));
        }
    }
    files.sort();
    files
}
