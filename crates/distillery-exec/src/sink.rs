//! [`BatchingSink`]: the bridge from a reader (a blocking thread emitting records) to the
//! Parquet writers (async tasks). Records are assigned a shard, buffered per (table, shard),
//! turned into an Arrow `RecordBatch` when a buffer is full, and sent over a bounded channel:
//! a slow writer blocks the reader, so memory stays bounded by
//! `tables × shards × batch_size` records (and by a byte cap per buffer) whatever the input size.

use std::collections::BTreeMap;

use arrow::record_batch::RecordBatch;
use distillery_core::schema::{TriplesBuilder, records_to_batch};
pub use distillery_core::sharded::shard_key;
use distillery_core::sharded::{ShardMemo, ShardedBatches, edge_shard_key};
use distillery_core::{Record, RecordSink, SinkError, TableKind, Triple};
use tokio::sync::mpsc;

/// A batch for one (table, shard) part.
#[derive(Debug)]
pub struct PartBatch {
    pub table: TableKind,
    pub shard: u32,
    pub batch: RecordBatch,
}

/// Per-table counts a sink saw.
#[derive(Debug, Default, Clone)]
pub struct SinkCounts {
    pub rows: BTreeMap<TableKind, u64>,
    pub quarantine_reasons: BTreeMap<String, u64>,
    /// The first [`QUARANTINE_EXAMPLES`] quarantined records, described for an error message
    /// (where and why).
    pub quarantine_examples: Vec<String>,
}

/// Quarantined records a sink describes for error messages.
pub const QUARANTINE_EXAMPLES: usize = 3;

impl SinkCounts {
    /// Records read from the input (everything but quarantine).
    pub fn good(&self) -> u64 {
        self.rows
            .iter()
            .filter(|(t, _)| **t != TableKind::Quarantine)
            .map(|(_, n)| n)
            .sum()
    }

    pub fn quarantined(&self) -> u64 {
        self.rows.get(&TableKind::Quarantine).copied().unwrap_or(0)
    }
}

/// Flush a buffer at this many approximate bytes even before `batch_size` records.
const BUFFER_BYTES: usize = 8 << 20;

/// What one (table, shard) holds until its batch is full.
enum Rows {
    Records(Vec<Record>),
    /// `triples` and `literals` rows, appended to their columns as they come: a KG dump's
    /// rows are many and small, and a buffered record was 408 bytes moved and read back.
    Triples(Box<TriplesBuilder>),
}

/// One (table, shard)'s rows, their number and approximate bytes.
struct Buffer {
    rows: Rows,
    len: usize,
    bytes: usize,
}

impl Buffer {
    fn new(table: TableKind) -> Buffer {
        let rows = match table {
            TableKind::Triples | TableKind::Literals => {
                Rows::Triples(Box::new(TriplesBuilder::new(table)))
            }
            _ => Rows::Records(Vec::new()),
        };
        Buffer {
            rows,
            len: 0,
            bytes: 0,
        }
    }

    fn push(&mut self, record: Record, size: usize) -> Result<(), SinkError> {
        match (&mut self.rows, record) {
            (Rows::Triples(b), Record::Triple(t) | Record::Literal(t)) => b.push(&t),
            (Rows::Records(v), r) => v.push(r),
            (Rows::Triples(_), r) => {
                return Err(SinkError(format!(
                    "a `{}` record buffered with triples",
                    r.kind().name()
                )));
            }
        }
        self.len += 1;
        self.bytes += size;
        Ok(())
    }

    /// Adds [`Record::edge`] of `t`, lent.
    fn push_edge(&mut self, t: &Triple, size: usize) {
        match &mut self.rows {
            Rows::Triples(b) => b.push(t),
            Rows::Records(v) => v.push(Record::edge(t.clone())),
        }
        self.len += 1;
        self.bytes += size;
    }

    /// Whether the buffer holds a batch's rows or bytes.
    fn is_full(&self, batch_size: usize) -> bool {
        self.len >= batch_size || self.bytes >= BUFFER_BYTES
    }

    /// The rows buffered as one batch; the buffer is left empty and keeps its capacity.
    fn take(&mut self, table: TableKind) -> Result<RecordBatch, SinkError> {
        let batch = match &mut self.rows {
            Rows::Records(records) => {
                let batch = records_to_batch(table, records);
                records.clear();
                batch
            }
            Rows::Triples(b) => b.finish(),
        };
        (self.len, self.bytes) = (0, 0);
        batch.map_err(|e| SinkError(e.to_string()))
    }
}

pub struct BatchingSink {
    shards: ShardMemo,
    batch_size: usize,
    buffers: foldhash::HashMap<(TableKind, u32), Buffer>,
    tx: mpsc::Sender<PartBatch>,
    pub counts: SinkCounts,
}

impl BatchingSink {
    pub fn new(shards: u32, batch_size: usize, tx: mpsc::Sender<PartBatch>) -> BatchingSink {
        BatchingSink {
            shards: ShardMemo::new(shards.max(1)),
            batch_size: batch_size.max(1),
            buffers: Default::default(),
            tx,
            counts: SinkCounts::default(),
        }
    }

    /// Converts and sends what `key` buffered. The buffer keeps its capacity: growing it
    /// again from empty after every batch moved each record once more (3% of a Freebase
    /// ingest on one core).
    fn flush(&mut self, key: (TableKind, u32)) -> Result<(), SinkError> {
        let Some(buffer) = self.buffers.get_mut(&key) else {
            return Ok(());
        };
        if buffer.len == 0 {
            return Ok(());
        }
        let batch = buffer.take(key.0)?;
        self.send(key, batch)
    }

    fn send(&mut self, key: (TableKind, u32), batch: RecordBatch) -> Result<(), SinkError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.tx
            .blocking_send(PartBatch {
                table: key.0,
                shard: key.1,
                batch,
            })
            .map_err(|_| SinkError("the writer stopped".into()))
    }

    /// Flushes every buffer, in a deterministic order.
    pub fn finish(&mut self) -> Result<SinkCounts, SinkError> {
        let mut keys: Vec<_> = self.buffers.keys().copied().collect();
        keys.sort();
        for k in keys {
            self.flush(k)?;
        }
        Ok(std::mem::take(&mut self.counts))
    }
}

fn approx_size(r: &Record) -> usize {
    match r {
        Record::Document(d) => d.text.len() + 64 * (d.sentences.len() + d.links.len()) + 256,
        Record::Table(t) => t.rows.iter().flatten().map(|c| c.len() + 16).sum::<usize>() + 256,
        Record::Question(q) => q.question.len() + q.meta.len() + 512,
        Record::Segment(s) => s.content.len() + 256,
        Record::Quarantine(q) => q.excerpt.len() + q.detail.len() + 128,
        _ => EDGE_SIZE,
    }
}

/// The size [`approx_size`] counts for a record of fixed shape, KG edges among them.
const EDGE_SIZE: usize = 256;

impl RecordSink for BatchingSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError> {
        let table = record.kind();
        *self.counts.rows.entry(table).or_default() += 1;
        if let Record::Quarantine(q) = &record {
            *self
                .counts
                .quarantine_reasons
                .entry(q.reason.clone())
                .or_default() += 1;
            if self.counts.quarantine_examples.len() < QUARANTINE_EXAMPLES {
                self.counts.quarantine_examples.push(q.describe());
            }
        }
        let shard = self.shards.shard(shard_key(&record));
        let key = (table, shard);
        let size = approx_size(&record);
        let buf = (self.buffers.entry(key)).or_insert_with(|| Buffer::new(table));
        buf.push(record, size)?;
        if buf.is_full(self.batch_size) {
            self.flush(key)?;
        }
        Ok(())
    }

    fn emit_edge(&mut self, t: &Triple) -> Result<(), SinkError> {
        let table = Record::edge_table(t);
        *self.counts.rows.entry(table).or_default() += 1;
        let key = (table, self.shards.shard(edge_shard_key(t)));
        let buf = (self.buffers.entry(key)).or_insert_with(|| Buffer::new(table));
        buf.push_edge(t, EDGE_SIZE);
        if buf.is_full(self.batch_size) {
            self.flush(key)?;
        }
        Ok(())
    }

    fn shards(&self) -> Option<u32> {
        Some(self.shards.shards())
    }

    /// Sends each batch on as it is, after what its (table, shard) buffered before it, so
    /// that a part's rows stay in input order.
    fn emit_batches(&mut self, batches: ShardedBatches) -> Result<(), SinkError> {
        for b in batches.batches {
            let key = (b.table, b.shard);
            *self.counts.rows.entry(b.table).or_default() += b.batch.num_rows() as u64;
            self.flush(key)?;
            self.send(key, b.batch)?;
        }
        for r in batches.quarantine {
            self.emit(r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, StringArray};
    use distillery_core::id::shard_of;
    use distillery_core::{QuarantineRecord, Triple};

    fn edge(subject: &str, n: usize) -> Record {
        Record::edge(Triple {
            id: format!("{subject}-{n}"),
            subject: subject.into(),
            object: format!("m.o{n}"),
            object_kind: "entity".into(),
            ..Triple::default()
        })
    }

    fn ids(batch: &RecordBatch) -> Vec<String> {
        let a = batch.column_by_name("id").unwrap();
        let a = a.as_any().downcast_ref::<StringArray>().unwrap();
        (0..a.len()).map(|i| a.value(i).to_string()).collect()
    }

    /// Records buffered before a run of batches reach the writer before it: a part's rows
    /// stay in input order whichever way they came, and every row and quarantine reason is
    /// counted.
    #[test]
    fn batches_follow_what_their_shard_buffered() {
        let shards = 4;
        let (tx, mut rx) = mpsc::channel(64);
        let mut sink = BatchingSink::new(shards, 1000, tx);
        assert_eq!(sink.shards(), Some(shards));
        let mut all = Vec::new();
        for n in 0..10 {
            let r = edge(&format!("m.s{}", n % 7), n);
            all.push(r.clone());
            sink.emit(r).unwrap();
        }
        let mut later: Vec<Record> = (10..40)
            .map(|n| edge(&format!("m.s{}", n % 7), n))
            .collect();
        all.extend(later.iter().cloned());
        later.push(Record::Quarantine(QuarantineRecord {
            id: "q".into(),
            reason: "bad_ntriples".into(),
            ..QuarantineRecord::default()
        }));
        sink.emit_batches(ShardedBatches::build(later, shards).unwrap())
            .unwrap();
        let counts = sink.finish().unwrap();
        drop(sink);
        assert_eq!(counts.rows[&TableKind::Triples], 40);
        assert_eq!(counts.quarantine_reasons["bad_ntriples"], 1);
        let mut got: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        while let Ok(b) = rx.try_recv() {
            if b.table == TableKind::Triples {
                got.entry(b.shard).or_default().extend(ids(&b.batch));
            }
        }
        assert!(
            got.len() > 2,
            "the keys cover several shards: {:?}",
            got.keys()
        );
        for (shard, ids) in got {
            let want: Vec<String> = all
                .iter()
                .filter(|r| shard_of(shard_key(r), shards) == shard)
                .map(|r| r.id().to_string())
                .collect();
            assert_eq!(ids, want, "shard {shard}");
        }
    }

    /// An edge lent (`emit_edge`) is counted, sharded, batched and flushed exactly as the
    /// same edge given (`emit`).
    #[test]
    fn lent_edges_make_the_batches_of_given_ones() {
        let shards = 3;
        let rows: Vec<Triple> = (0..50)
            .map(|n| Triple {
                id: format!("t{n}"),
                subject: format!("m.s{}", n % 5),
                object: format!("o{n}"),
                object_kind: if n % 3 == 0 { "literal" } else { "entity" }.into(),
                lang: (n % 6 == 0).then(|| "en".to_string()),
                ..Triple::default()
            })
            .collect();
        let run = |lend: bool| {
            let (tx, mut rx) = mpsc::channel(256);
            let mut sink = BatchingSink::new(shards, 4, tx);
            for t in &rows {
                if lend {
                    sink.emit_edge(t).unwrap();
                } else {
                    sink.emit(Record::edge(t.clone())).unwrap();
                }
            }
            let counts = sink.finish().unwrap();
            drop(sink);
            let mut batches = Vec::new();
            while let Ok(b) = rx.try_recv() {
                batches.push((b.table, b.shard, b.batch));
            }
            (counts.rows, batches)
        };
        let (given, lent) = (run(false), run(true));
        assert_eq!(given.0[&TableKind::Literals], 17);
        assert!(given.1.len() > 6, "several flushes: {}", given.1.len());
        assert_eq!(lent, given);
    }
}
