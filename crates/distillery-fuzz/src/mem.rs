//! In-memory inputs for the readers: an [`Opener`] over byte buffers ([`MemFs`]) and a sink
//! that counts records and drops them ([`CountSink`]), so an iteration touches no disk and
//! keeps no records.

use std::io::{self, Cursor, Read};
use std::sync::Arc;

use distillery_core::sharded::ShardedBatches;
use distillery_core::{Record, RecordSink, SinkError};

/// Files held in memory, by location. Besides exact files it holds "any file" directories: every
/// `<dir>/<name>` exists and has the directory's bytes (HybridQA's `tables_tok/<table_id>.json`
/// for whatever table id a fuzzed question names).
#[derive(Debug, Default, Clone)]
pub struct MemFs {
    files: Vec<(String, Arc<[u8]>)>,
    any: Vec<(String, Arc<[u8]>)>,
}

impl MemFs {
    pub fn new() -> MemFs {
        MemFs::default()
    }

    /// Adds a file at `location`.
    pub fn file(mut self, location: &str, bytes: &[u8]) -> MemFs {
        self.files.push((location.to_string(), Arc::from(bytes)));
        self
    }

    /// Makes every file directly inside `dir` exist with `bytes`.
    pub fn any_in(mut self, dir: &str, bytes: &[u8]) -> MemFs {
        self.any
            .push((dir.trim_end_matches('/').to_string(), Arc::from(bytes)));
        self
    }

    fn get(&self, location: &str) -> Option<&Arc<[u8]>> {
        if let Some((_, b)) = self.files.iter().find(|(l, _)| l == location) {
            return Some(b);
        }
        let (dir, name) = location.rsplit_once('/')?;
        if name.is_empty() {
            return None;
        }
        self.any.iter().find(|(d, _)| d == dir).map(|(_, b)| b)
    }

    fn not_found(location: &str) -> io::Error {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{location}: not in memory"),
        )
    }
}

impl distillery_ingest::Opener for MemFs {
    fn open(&self, location: &str) -> io::Result<Box<dyn Read + Send>> {
        let b = self
            .get(location)
            .ok_or_else(|| Self::not_found(location))?;
        Ok(Box::new(Cursor::new(b.clone())))
    }

    fn size(&self, location: &str) -> io::Result<u64> {
        let b = self
            .get(location)
            .ok_or_else(|| Self::not_found(location))?;
        Ok(b.len() as u64)
    }

    fn read_range(&self, location: &str, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let b = self
            .get(location)
            .ok_or_else(|| Self::not_found(location))?;
        // As a file does: a range past the end reads what is there, possibly nothing.
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
        let end = start.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
        Ok(b[start..end.min(b.len())].to_vec())
    }

    fn exists(&self, location: &str) -> bool {
        let dir = location.trim_end_matches('/');
        self.get(location).is_some()
            || self.any.iter().any(|(d, _)| d == dir)
            || self
                .files
                .iter()
                .any(|(l, _)| l.rsplit_once('/').is_some_and(|(d, _)| d == dir))
    }

    fn list(&self, dir: &str) -> io::Result<Vec<String>> {
        let dir = dir.trim_end_matches('/');
        let mut names: Vec<String> = self
            .files
            .iter()
            .filter_map(|(l, _)| {
                let (d, n) = l.rsplit_once('/')?;
                (d == dir).then(|| n.to_string())
            })
            .collect();
        if self.any.iter().any(|(d, _)| d == dir) {
            names.push("any.json".to_string());
        }
        names.sort();
        names.dedup();
        Ok(names)
    }
}

/// Counts the records a reader emits and drops them. With `shards` it takes the grouped
/// batches of the parallel KG parsers too, as the executor's sink does.
#[derive(Debug, Default)]
pub struct CountSink {
    pub records: u64,
    pub quarantined: u64,
    pub batches: u64,
    pub shards: Option<u32>,
}

impl CountSink {
    pub fn sharded(shards: u32) -> CountSink {
        CountSink {
            shards: Some(shards),
            ..CountSink::default()
        }
    }
}

impl RecordSink for CountSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError> {
        if matches!(record, Record::Quarantine(_)) {
            self.quarantined += 1;
        }
        self.records += 1;
        Ok(())
    }

    fn shards(&self) -> Option<u32> {
        self.shards
    }

    fn emit_batches(&mut self, batches: ShardedBatches) -> Result<(), SinkError> {
        if self.shards.is_none() {
            return Err(SinkError("this sink takes records one at a time".into()));
        }
        self.batches += batches.batches.len() as u64;
        self.quarantined += batches.quarantine.len() as u64;
        Ok(())
    }
}
