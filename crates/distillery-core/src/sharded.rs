//! Records grouped and converted to Arrow on the thread that read them.
//!
//! A sink that shards ([`RecordSink::shards`]) groups records by (table, [`shard_key`]'s
//! shard) and turns each group into a `RecordBatch`. A reader that parses on several threads
//! (`distillery-ingest`'s `parlines`) can do that grouping and conversion on its parser threads
//! with [`ShardedBatches::build`] and hand the result over with [`RecordSink::emit_batches`],
//! so the one thread that feeds the writers no longer hashes, moves and converts every record.
//! The rows of each (table, shard) keep their input order, so the parts hold what record-by-
//! record emitting would have written.

use arrow_array::RecordBatch;

use crate::id::shard_of;
use crate::record::{Record, TableKind, Triple};
use crate::schema::{SchemaError, records_to_batch};

/// The key a record is sharded by: its id, except KG edges, entity and literal alike (by
/// subject, so a subject's edges stay together in one shard), entities (by key, so an
/// entity lands in the shard of its edges) and triples read from a text (by their
/// `document_id`: the shard of the document, as the `triples` stage writes its own), and
/// tables taken from a document (by its id: a page and its tables share a part, which a
/// corpus that keeps segments cuts together).
pub fn shard_key(r: &Record) -> &str {
    match r {
        Record::Table(crate::record::Table {
            document_id: Some(d),
            ..
        }) => d,
        Record::Triple(Triple {
            document_id: Some(d),
            ..
        }) => d,
        Record::Triple(t) | Record::Literal(t) => &t.subject,
        Record::Entity(e) => &e.key,
        other => other.id(),
    }
}

/// [`shard_of`] with the last key remembered: a dump sorted by subject (Freebase's is) gives
/// runs of records with one shard key, and each run is hashed once instead of once per record.
/// On unsorted input the check costs a comparison and a copy into a reused buffer.
#[derive(Debug, Clone)]
pub struct ShardMemo {
    shards: u32,
    last: String,
    shard: Option<u32>,
}

impl ShardMemo {
    pub fn new(shards: u32) -> ShardMemo {
        ShardMemo {
            shards,
            last: String::new(),
            shard: None,
        }
    }

    /// The shard count.
    pub fn shards(&self) -> u32 {
        self.shards
    }

    /// `shard_of(key, shards)`.
    pub fn shard(&mut self, key: &str) -> u32 {
        match self.shard {
            Some(s) if self.last == key => s,
            _ => {
                let s = shard_of(key, self.shards);
                self.last.clear();
                self.last.push_str(key);
                self.shard = Some(s);
                s
            }
        }
    }
}

/// One (table, shard) group of a [`ShardedBatches`].
#[derive(Debug)]
pub struct ShardBatch {
    pub table: TableKind,
    pub shard: u32,
    pub batch: RecordBatch,
}

/// A run of records as batches per (table, shard), plus the quarantine records, which stay
/// records so that the sink counts their reasons.
#[derive(Debug, Default)]
pub struct ShardedBatches {
    /// Ordered by (table, shard).
    pub batches: Vec<ShardBatch>,
    /// The quarantine records, in input order.
    pub quarantine: Vec<Record>,
}

impl ShardedBatches {
    /// Groups `records` by table and by shard among `shards`, keeping their order within a
    /// group, and converts each group.
    pub fn build(records: Vec<Record>, shards: u32) -> Result<ShardedBatches, SchemaError> {
        // Groups hold references: a record is moved once (into `records`, by its parser), not
        // again into its group (a triple is some 400 bytes; the extra move was 5% of a
        // two-core Freebase ingest).
        let mut groups: Vec<((TableKind, u32), Vec<&Record>)> = Vec::new();
        let mut slot: foldhash::HashMap<(TableKind, u32), usize> = Default::default();
        let mut quarantined = 0;
        let mut memo = ShardMemo::new(shards);
        for r in &records {
            let table = r.kind();
            if table == TableKind::Quarantine {
                quarantined += 1;
                continue;
            }
            let key = (table, memo.shard(shard_key(r)));
            let i = *slot.entry(key).or_insert_with(|| {
                groups.push((key, Vec::new()));
                groups.len() - 1
            });
            groups[i].1.push(r);
        }
        groups.sort_by_key(|(k, _)| *k);
        let batches = groups
            .into_iter()
            .map(|((table, shard), g)| {
                Ok(ShardBatch {
                    table,
                    shard,
                    batch: records_to_batch(table, &g)?,
                })
            })
            .collect::<Result<_, SchemaError>>()?;
        let quarantine = match quarantined {
            0 => Vec::new(),
            _ => (records.into_iter())
                .filter(|r| r.kind() == TableKind::Quarantine)
                .collect(),
        };
        Ok(ShardedBatches {
            batches,
            quarantine,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Entity;
    use arrow_array::Array;

    fn edge(subject: &str, object: &str) -> Record {
        Record::edge(Triple {
            id: format!("{subject}-{object}"),
            subject: subject.into(),
            object: object.into(),
            object_kind: "entity".into(),
            ..Triple::default()
        })
    }

    #[test]
    fn groups_keep_the_input_order_and_match_the_shard_of_each_key() {
        let mut records = Vec::new();
        for i in 0..200 {
            records.push(edge(&format!("m.{}", i % 13), &format!("m.o{i}")));
            if i % 50 == 0 {
                records.push(Record::Entity(Entity {
                    id: format!("e{i}"),
                    key: format!("m.{}", i % 13),
                    ..Entity::default()
                }));
            }
        }
        let shards = 4;
        let want: Vec<(TableKind, u32, String)> = records
            .iter()
            .map(|r| (r.kind(), shard_of(shard_key(r), shards), r.id().to_string()))
            .collect();
        let got = ShardedBatches::build(records, shards).unwrap();
        let mut memo = ShardMemo::new(shards);
        for key in ["m.1", "m.1", "m.2", "m.1", "m.1", "m.3"] {
            assert_eq!(memo.shard(key), shard_of(key, shards), "{key}");
        }
        assert!(got.quarantine.is_empty());
        let mut keys: Vec<_> = got.batches.iter().map(|b| (b.table, b.shard)).collect();
        let sorted = {
            let mut k = keys.clone();
            k.sort();
            k.dedup();
            k
        };
        assert_eq!(keys, sorted, "one batch per (table, shard), in order");
        keys.clear();
        for b in &got.batches {
            let ids = b.batch.column_by_name("id").unwrap();
            let ids = ids
                .as_any()
                .downcast_ref::<arrow_array::StringArray>()
                .unwrap();
            let expected: Vec<&str> = want
                .iter()
                .filter(|(t, s, _)| (*t, *s) == (b.table, b.shard))
                .map(|(_, _, id)| id.as_str())
                .collect();
            let ids: Vec<&str> = ids.iter().map(|v| v.unwrap()).collect();
            assert_eq!(ids, expected, "{:?} shard {}", b.table, b.shard);
        }
        let rows: usize = got.batches.iter().map(|b| b.batch.num_rows()).sum();
        assert_eq!(rows, want.len());
    }
}
