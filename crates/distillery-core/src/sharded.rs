//! Records grouped and converted to Arrow on the thread that read them.
//!
//! A sink that shards ([`crate::RecordSink::shards`]) groups records by (table,
//! [`shard_key`]'s shard) and turns each group into a `RecordBatch`. A reader that parses on
//! several threads (`distillery-ingest`'s `parlines`) can do that grouping and conversion on
//! its parser threads, each record as it comes ([`ShardedBuilder`]), and hand the result over
//! with [`crate::RecordSink::emit_batches`], so the one thread that feeds the writers no
//! longer hashes, moves and converts every record. The rows of each (table, shard) keep their
//! input order, so the parts hold what record-by-record emitting would have written.

use arrow_array::RecordBatch;

use crate::id::shard_of;
use crate::record::{Record, TableKind, Triple};
use crate::schema::{SchemaError, TriplesBuilder, records_to_batch};

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

/// [`shard_key`] of [`Record::edge`] of `t`, without making the record.
pub fn edge_shard_key(t: &Triple) -> &str {
    match (&t.document_id, Record::edge_table(t)) {
        (Some(d), TableKind::Triples) => d,
        _ => &t.subject,
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
    /// group, and converts each group ([`ShardedBuilder`] over all of them).
    pub fn build(records: Vec<Record>, shards: u32) -> Result<ShardedBatches, SchemaError> {
        let mut b = ShardedBuilder::new(shards);
        records.into_iter().for_each(|r| b.push(r));
        b.finish()
    }
}

/// [`ShardedBatches`] built as records come, on the thread that parses them. A `triples` or
/// `literals` row goes into its group's columns at once (a [`TriplesBuilder`]) and its record
/// is dropped there, as the one-thread sink does: holding every record of a chunk (some 400
/// bytes each) to convert them at the end moved each one twice and read it back from memory.
/// Other tables keep their records until [`ShardedBuilder::finish`].
#[derive(Debug)]
pub struct ShardedBuilder {
    memo: ShardMemo,
    slot: foldhash::HashMap<(TableKind, u32), usize>,
    groups: Vec<((TableKind, u32), Group)>,
    quarantine: Vec<Record>,
}

#[derive(Debug)]
enum Group {
    Rows(Box<TriplesBuilder>),
    Records(Vec<Record>),
}

impl ShardedBuilder {
    pub fn new(shards: u32) -> ShardedBuilder {
        ShardedBuilder {
            memo: ShardMemo::new(shards),
            slot: Default::default(),
            groups: Vec::new(),
            quarantine: Vec::new(),
        }
    }

    /// Adds `r` to the end of its (table, shard) group.
    pub fn push(&mut self, r: Record) {
        let table = r.kind();
        if table == TableKind::Quarantine {
            self.quarantine.push(r);
            return;
        }
        let key = (table, self.memo.shard(shard_key(&r)));
        match (self.group(key), r) {
            (Group::Rows(b), Record::Triple(t) | Record::Literal(t)) => b.push(&t),
            (Group::Rows(_), r) => unreachable!("a {:?} record in a triples group", r.kind()),
            (Group::Records(v), r) => v.push(r),
        }
    }

    /// Adds [`Record::edge`] of `t` to the end of its (table, shard) group.
    pub fn push_edge(&mut self, t: &Triple) {
        let key = (Record::edge_table(t), self.memo.shard(edge_shard_key(t)));
        match self.group(key) {
            Group::Rows(b) => b.push(t),
            Group::Records(v) => v.push(Record::edge(t.clone())),
        }
    }

    /// The group of `key`, made empty on its first use.
    fn group(&mut self, key: (TableKind, u32)) -> &mut Group {
        let groups = &mut self.groups;
        let i = *self.slot.entry(key).or_insert_with(|| {
            let g = match key.0 {
                TableKind::Triples | TableKind::Literals => {
                    Group::Rows(Box::new(TriplesBuilder::new(key.0)))
                }
                _ => Group::Records(Vec::new()),
            };
            groups.push((key, g));
            groups.len() - 1
        });
        &mut groups[i].1
    }

    /// The groups as batches, ordered by (table, shard), and the quarantine records.
    pub fn finish(mut self) -> Result<ShardedBatches, SchemaError> {
        self.groups.sort_by_key(|(k, _)| *k);
        let batches = (self.groups.into_iter())
            .map(|((table, shard), g)| {
                let batch = match g {
                    Group::Rows(mut b) => b.finish()?,
                    Group::Records(v) => records_to_batch(table, &v)?,
                };
                Ok(ShardBatch {
                    table,
                    shard,
                    batch,
                })
            })
            .collect::<Result<_, SchemaError>>()?;
        Ok(ShardedBatches {
            batches,
            quarantine: self.quarantine,
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

    /// Rows appended as they come make the batch the records of the group make at once:
    /// every column, optional ones included, for both triples tables, the other tables'
    /// records and the quarantine records kept aside in order.
    #[test]
    fn built_as_they_come_equals_the_batch_of_the_group() {
        let mut records = Vec::new();
        for i in 0..300u32 {
            let subject = format!("m.{}", i % 17);
            match i % 5 {
                0 => records.push(Record::Literal(Triple {
                    id: format!("l{i}"),
                    subject: subject.clone(),
                    predicate: "type.object.name".into(),
                    object: format!("name {i}"),
                    object_kind: "literal".into(),
                    lang: (i % 2 == 0).then(|| "en".to_string()),
                    subject_name: (i % 4 == 0).then(|| format!("s{i}")),
                    sentence: (i % 6 == 0).then_some(i),
                    datatype: (i % 3 == 0).then(|| "xsd:string".to_string()),
                    line: Some(u64::from(i)),
                    ..Triple::default()
                })),
                1 if i % 7 == 1 => records.push(Record::Quarantine(crate::QuarantineRecord {
                    reason: format!("bad {i}"),
                    ..Default::default()
                })),
                2 => records.push(Record::Entity(Entity {
                    id: format!("e{i}"),
                    key: subject.clone(),
                    ..Entity::default()
                })),
                // Text triples shard by document, text literals by subject.
                3 if i % 4 == 3 => records.push(Record::edge(Triple {
                    id: format!("d{i}"),
                    subject: subject.clone(),
                    object: format!("o{i}"),
                    object_kind: ["entity", "literal"][i as usize % 2].into(),
                    document_id: Some(format!("doc-{}", i % 7)),
                    ..Triple::default()
                })),
                _ => records.push(edge(&subject, &format!("m.o{i}"))),
            }
        }
        let shards = 3;
        let mut b = ShardedBuilder::new(shards);
        for r in records.clone() {
            b.push(r);
        }
        let got = b.finish().unwrap();
        // Edges lent (`push_edge`) make the same batches as edges given.
        let mut lent = ShardedBuilder::new(shards);
        for r in records.clone() {
            match r {
                Record::Triple(t) | Record::Literal(t) => lent.push_edge(&t),
                r => lent.push(r),
            }
        }
        let lent = lent.finish().unwrap();
        assert_eq!(lent.quarantine, got.quarantine);
        let pairs = |b: &ShardedBatches| -> Vec<_> {
            (b.batches.iter())
                .map(|g| (g.table, g.shard, g.batch.clone()))
                .collect()
        };
        assert_eq!(pairs(&lent), pairs(&got));
        let quarantine: Vec<&Record> = records
            .iter()
            .filter(|r| r.kind() == TableKind::Quarantine)
            .collect();
        assert_eq!(got.quarantine.iter().collect::<Vec<_>>(), quarantine);
        let mut tables = std::collections::BTreeSet::new();
        for g in &got.batches {
            tables.insert(g.table);
            let group: Vec<&Record> = records
                .iter()
                .filter(|r| r.kind() == g.table && shard_of(shard_key(r), shards) == g.shard)
                .collect();
            let want = records_to_batch(g.table, &group).unwrap();
            assert_eq!(g.batch, want, "{:?} shard {}", g.table, g.shard);
        }
        let want: std::collections::BTreeSet<_> =
            [TableKind::Triples, TableKind::Entities, TableKind::Literals].into();
        assert_eq!(tables, want);
    }
}
