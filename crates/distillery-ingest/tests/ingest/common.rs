//! Helpers shared by the reader tests.

use std::path::PathBuf;

use distillery_core::VecSink;
use distillery_core::spec::{Format, FormatOptions};
use distillery_ingest::{InputCtx, read_input};

/// `../shared/data/<rel>` from the workspace root, or `None` (with a message) when the shared
/// samples are absent, so a user's fresh clone still passes.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    let p = root.join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!(
            "skipping: shared sample {} not found (../shared/data is absent)",
            p.display()
        );
        None
    }
}

/// A file under the repository's bundled data (`data/`).
pub fn bundled(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(rel)
}

/// Reads one file with the given format and options into memory.
pub fn read_with(format: Format, options: FormatOptions, path: &std::path::Path) -> VecSink {
    let mut sink = VecSink::default();
    let loc = path.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    read_input(format, &ctx, &mut sink).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    sink
}

/// Reads one file with the format's default options.
pub fn read(format: Format, path: &std::path::Path) -> VecSink {
    read_with(format, FormatOptions::default_for(format), path)
}
