//! Helpers: read shared samples with the real readers.

use std::path::PathBuf;

use distillery_core::VecSink;
use distillery_core::spec::{Format, FormatOptions};
use distillery_ingest::{InputCtx, read_input};

/// `../shared/data/<rel>`, or `None` with a skip message when absent.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/data")
        .join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: shared sample {} not found", p.display());
        None
    }
}

/// A file of the repository's bundled data.
pub fn bundled(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(rel)
}

/// Reads a file with a reader into memory.
pub fn read(format: Format, path: &std::path::Path) -> VecSink {
    let options = FormatOptions::default_for(format);
    let mut sink = VecSink::default();
    let loc = path.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    read_input(format, &ctx, &mut sink).unwrap();
    sink
}

/// References to each record, the form `QuestionContext` borrows its documents and tables in.
pub fn refs<T>(records: &[T]) -> Vec<&T> {
    records.iter().collect()
}
