//! The label stage's contexts, bounded: an input whose documents and tables do not fit the
//! stage's budget (`context_memory_bytes`) is labelled in groups of consecutive questions, each
//! group holding only the contexts its own questions cite.
//!
//! 1. [`estimate`]: the input's contexts decoded, estimated from the first batch of each of
//!    its staged parts (its Arrow size per row, times the part's rows) plus the per-record
//!    overhead of the in-memory index. At or under the budget the stage reads them whole, as
//!    before;
//! 2. [`Groups::plan`]: above it, the questions (in part order: file tag, then shard) are cut
//!    into groups of consecutive questions of equal size, as few as keep a group's share of
//!    the estimate within the budget when the citations are even (one group when the input
//!    has one question: it is still routed, so only what it cites is held);
//! 3. [`Routes::of_questions`]: one pass over the questions' `context_documents` and
//!    `context_tables` columns alone records, per cited id, the groups citing it (an XXH64 of
//!    the id: **about 20–40 bytes per cited id**, the only state that grows with the input);
//! 4. [`spill`]: passes over the staged `documents` and `tables` parts, in part order, copy
//!    each row (Arrow `take`, no decoding into records) into the spill part of every group
//!    that cites its id, under `<staging>/_route/<input>/` (Parquet, one part per table and
//!    group). The groups spill in waves of [`groups_per_wave`] (one pass over a table's
//!    staged parts per wave), so the open spill parts' buffers stay within a quarter of the
//!    budget. A row no question cites is not copied: no label could use it. A hash collision
//!    only copies a row into one group too many; the group looks records up by their full id;
//! 5. the stage then labels group after group, each with its spill parts read into memory
//!    (`Contexts`, rows in the staged order, so a later record with an id replaces an earlier
//!    one as in the whole-input read), deletes a group's spill parts once it is labelled, and
//!    at the end (or on an error) whatever is left under the input's spill directory.
//!
//! The samples, labels and report are the same bytes either way: the questions are labelled in
//! the same order against the same records. **Memory: about one group's contexts (an
//! estimate: a group whose questions cite more than their share, or contexts cited by many
//! groups, can go over it), the routes, and while spilling the open spill parts' buffers**
//! (each part's row group in progress, a share of [`SPILL_BUFFER_BYTES`] but at least 1 MiB,
//! plus its object_store upload buffer).

use std::collections::{BTreeMap, HashMap};
use std::hash::Hasher;

use arrow::array::{Array, AsArray, UInt32Array};
use arrow::compute::take_record_batch;
use distillery_core::{Document, Table, TableKind};
use futures::StreamExt;

use crate::error::ExecError;
use crate::parts::{PartWriters, WrittenPart, read_part, read_part_columns};
use crate::store::Location;

/// What the in-memory index adds per context record besides its decoded data: the record
/// struct and its index entry (id copy, slot, spare capacity).
const INDEX_BYTES: u64 = 64;

/// Bytes the open spill parts may buffer together (row groups in progress).
pub const SPILL_BUFFER_BYTES: usize = 64 << 20;

/// What a decoded string or list takes besides its bytes: its 24-byte header in the record
/// and the allocator's rounding of its buffer.
const STRING_OVERHEAD: u64 = 32;

/// About the bytes an input's contexts take in memory. Per part: its rows × (the Arrow size
/// of its first batch per row, plus [`STRING_OVERHEAD`] per string value in it, plus the
/// record struct and its index entry). The Arrow arrays hold the strings plain, as the
/// records will (a Parquet footer's uncompressed sizes do not: its pages may be dictionary
/// encoded, and repeated text then counts once). Reads one batch per part.
pub async fn estimate(
    out: &Location,
    documents: &[(String, &WrittenPart)],
    tables: &[(String, &WrittenPart)],
) -> Result<u64, ExecError> {
    let mut bytes = 0u64;
    for (parts, record) in [
        (documents, std::mem::size_of::<Document>() as u64),
        (tables, std::mem::size_of::<Table>() as u64),
    ] {
        for (_, p) in parts {
            let mut stream = Box::pin(read_part(out, &p.path()).await?);
            let Some(batch) = stream.next().await.transpose()? else {
                continue;
            };
            let strings: u64 = batch
                .columns()
                .iter()
                .map(|c| strings_in(&c.to_data()))
                .sum();
            let arrow = batch.get_array_memory_size() as u64 + strings * STRING_OVERHEAD;
            let per_row = arrow.div_ceil(batch.num_rows().max(1) as u64);
            bytes += p.rows * (per_row + record + INDEX_BYTES);
        }
    }
    Ok(bytes)
}

/// String values in an array and its children (lists, structs): each one a `String` decoded.
fn strings_in(d: &arrow::array::ArrayData) -> u64 {
    use arrow::datatypes::DataType;
    match d.data_type() {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => d.len() as u64,
        _ => d.child_data().iter().map(strings_in).sum(),
    }
}

/// Groups of consecutive questions (by position in part order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Groups {
    /// Questions per group (the last may have fewer).
    pub size: u64,
    /// How many groups.
    pub count: u32,
}

impl Groups {
    /// Groups of equal size (the last may be smaller) each holding at most `budget` of
    /// `estimate`, assuming the `questions` cite the contexts evenly; one group when it all
    /// fits, at most one question a group.
    pub fn plan(estimate: u64, budget: u64, questions: u64) -> Groups {
        let wanted = estimate.div_ceil(budget.max(1)).clamp(1, questions.max(1));
        let size = (questions / wanted).max(1);
        let count = questions.div_ceil(size).max(1);
        Groups {
            size,
            count: u32::try_from(count).unwrap_or(u32::MAX),
        }
    }

    /// The group of the question at `position` (questions past the planned count, which the
    /// manifest's row counts rule out, join the last group).
    pub fn of(&self, position: u64) -> u32 {
        u32::try_from(position / self.size)
            .unwrap_or(u32::MAX)
            .min(self.count - 1)
    }
}

/// The groups citing each context id, by an XXH64 of the id.
#[derive(Debug, Default)]
pub struct Route {
    /// The first group citing an id.
    first: HashMap<u64, u32>,
    /// The later groups citing it, in order (most ids are cited by one group only).
    more: HashMap<u64, Vec<u32>>,
}

fn key(id: &str) -> u64 {
    let mut h = twox_hash::XxHash64::with_seed(0x7a11_0c47);
    h.write(id.as_bytes());
    h.finish()
}

impl Route {
    /// Records that group `g` cites `id`; groups come in order.
    pub fn add(&mut self, id: &str, g: u32) {
        let k = key(id);
        match self.first.entry(k) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(g);
            }
            std::collections::hash_map::Entry::Occupied(e) => {
                if *e.get() != g {
                    let more = self.more.entry(k).or_default();
                    if more.last() != Some(&g) {
                        more.push(g);
                    }
                }
            }
        }
    }

    /// The groups citing `id` (or another id with its hash), in order.
    pub fn groups(&self, id: &str) -> impl Iterator<Item = u32> + '_ {
        let k = key(id);
        let more = self.more.get(&k).map(Vec::as_slice).unwrap_or_default();
        self.first
            .get(&k)
            .copied()
            .into_iter()
            .chain(more.iter().copied())
    }

    /// Ids recorded.
    pub fn len(&self) -> usize {
        self.first.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_empty()
    }
}

/// The routes of one input's documents and tables.
#[derive(Debug, Default)]
pub struct Routes {
    pub documents: Route,
    pub tables: Route,
}

impl Routes {
    /// Reads the `context_documents` and `context_tables` columns of the question parts (in
    /// part order) and records which group cites each id.
    pub async fn of_questions(
        out: &Location,
        questions: &[(String, &WrittenPart)],
        groups: Groups,
    ) -> Result<Routes, ExecError> {
        let mut routes = Routes::default();
        let mut position = 0u64;
        for (_, part) in questions {
            let columns = ["context_documents", "context_tables"];
            let path = part.path();
            let mut stream = Box::pin(read_part_columns(out, &path, &columns).await?);
            while let Some(batch) = stream.next().await {
                let batch = batch?;
                // Each column as its list offsets and its id strings, decoded once a batch.
                let column = |name: &str| {
                    let list = batch
                        .column_by_name(name)
                        .and_then(|c| c.as_list_opt::<i32>());
                    list.and_then(|l| Some((l, l.values().as_string_opt::<i32>()?)))
                        .ok_or_else(|| {
                            let why = format!("`{name}` is not a list of strings");
                            ExecError::output(out.show(&path), why)
                        })
                };
                let columns = [column(columns[0])?, column(columns[1])?];
                for row in 0..batch.num_rows() {
                    let g = groups.of(position);
                    position += 1;
                    for ((list, ids), route) in columns
                        .iter()
                        .zip([&mut routes.documents, &mut routes.tables])
                    {
                        if list.is_null(row) {
                            continue;
                        }
                        let o = list.value_offsets();
                        for i in o[row] as usize..o[row + 1] as usize {
                            if ids.is_valid(i) {
                                route.add(ids.value(i), g);
                            }
                        }
                    }
                }
            }
        }
        Ok(routes)
    }
}

/// The spill parts of one input, by group.
#[derive(Debug, Default)]
pub struct Spilled {
    /// The directory they lie under (`<staging>/_route/<input>`).
    pub base: String,
    /// Per group: its `documents` and `tables` parts (either may be missing: nothing cited).
    pub groups: BTreeMap<u32, Vec<WrittenPart>>,
    /// Bytes of the staged parts read.
    pub bytes_in: u64,
    /// Rows copied into spill parts (a row cited by several groups counts once per group).
    pub rows_out: u64,
}

impl Spilled {
    /// The spill parts of group `g` of one table, as (tag, part) pairs for reading.
    pub fn parts(&self, g: u32, table: TableKind) -> Vec<(String, &WrittenPart)> {
        self.groups
            .get(&g)
            .into_iter()
            .flatten()
            .filter(|p| p.table == table)
            .map(|p| (String::new(), p))
            .collect()
    }

    /// Deletes the spill parts of group `g` (labelled: its disk goes back as the stage goes).
    pub async fn remove(&mut self, out: &Location, g: u32) -> Result<(), ExecError> {
        for p in self.groups.get(&g).into_iter().flatten() {
            out.delete(&p.path()).await?;
        }
        self.groups.remove(&g);
        Ok(())
    }
}

/// The directory of one input's spill parts under a stage's staging directory.
pub fn spill_dir(staging: &str, input: &str) -> String {
    format!("{}/_route/{input}", staging.trim_end_matches('/'))
}

/// Deletes whatever lies under an input's spill directory: what a finished, failed or
/// interrupted spill or labelling left there.
pub async fn remove_spill_dir(out: &Location, dir: &str) -> Result<(), ExecError> {
    for (rel, _) in out.list(dir).await? {
        out.delete(&rel).await?;
    }
    Ok(())
}

/// What one open spill part may buffer: its row group in progress (at least 1 MiB) and its
/// object_store upload buffer (5 MiB, S3's smallest multipart part).
const SPILL_PART_BYTES: u64 = 6 << 20;

/// How many groups' spill parts are open at once for a budget: their buffers take at most a
/// quarter of it (at least 8 groups). More groups spill in waves, one pass over the staged
/// parts each.
pub fn groups_per_wave(budget: u64) -> u32 {
    u32::try_from((budget / 4 / SPILL_PART_BYTES).max(8)).unwrap_or(u32::MAX)
}

/// Copies each row of the staged `documents` and `tables` parts into the spill part of every
/// group whose questions cite it, under [`spill_dir`]: per table, in waves of `wave` groups
/// (one pass over the table's staged parts each), so at most `wave` spill parts are open.
#[allow(clippy::too_many_arguments)]
pub async fn spill(
    out: &Location,
    staging: &str,
    input: &str,
    documents: &[(String, &WrittenPart)],
    tables: &[(String, &WrittenPart)],
    routes: &Routes,
    groups: Groups,
    wave: u32,
) -> Result<Spilled, ExecError> {
    let base = spill_dir(staging, input);
    let mut spilled = Spilled {
        base: base.clone(),
        ..Spilled::default()
    };
    let wave = wave.max(1);
    for (table, parts, route) in [
        (TableKind::Documents, documents, &routes.documents),
        (TableKind::Tables, tables, &routes.tables),
    ] {
        spilled.bytes_in += parts.iter().map(|(_, p)| p.bytes).sum::<u64>();
        for lo in (0..groups.count).step_by(wave as usize) {
            let hi = lo.saturating_add(wave);
            let mut writers =
                PartWriters::new(out.clone(), &base, input).with_budget(SPILL_BUFFER_BYTES);
            for (_, part) in parts {
                let path = part.path();
                let mut stream = Box::pin(read_part(out, &path).await?);
                while let Some(batch) = stream.next().await {
                    let batch = batch?;
                    let ids = batch
                        .column_by_name("id")
                        .and_then(|c| c.as_string_opt::<i32>())
                        .ok_or_else(|| {
                            ExecError::output(out.show(&path), "no `id` column of strings")
                        })?;
                    let mut rows: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
                    for (row, id) in ids.iter().enumerate() {
                        for g in id.into_iter().flat_map(|id| route.groups(id)) {
                            if (lo..hi).contains(&g) {
                                rows.entry(g).or_default().push(row as u32);
                            }
                        }
                    }
                    for (g, rows) in rows {
                        let picked = take_record_batch(&batch, &UInt32Array::from(rows))
                            .map_err(|e| ExecError::output(out.show(&path), e.to_string()))?;
                        spilled.rows_out += picked.num_rows() as u64;
                        writers.write(table, g, &picked).await?;
                    }
                }
            }
            for p in writers.finish().await? {
                spilled.groups.entry(p.shard).or_default().push(p);
            }
        }
    }
    Ok(spilled)
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::Question;
    use distillery_core::schema::{from_batch, to_batch};

    use crate::parts::read_part_all;

    /// Stages `rows` of a table as one part of input `hp` under `staging`.
    async fn stage<T: serde::Serialize>(
        loc: &Location,
        table: TableKind,
        rows: &[T],
    ) -> WrittenPart {
        let mut w = PartWriters::new(loc.clone(), "staging", "hp-0000");
        w.write(table, 0, &to_batch(table, rows).unwrap())
            .await
            .unwrap();
        w.finish().await.unwrap().remove(0)
    }

    async fn ids_of(loc: &Location, p: &WrittenPart) -> Vec<String> {
        let mut ids = Vec::new();
        for b in read_part_all(loc, &p.path()).await.unwrap() {
            let docs: Vec<Document> = from_batch(TableKind::Documents, &b).unwrap();
            ids.extend(docs.into_iter().map(|d| d.id));
        }
        ids
    }

    /// Four questions in two groups: each group's spill part holds the documents its own
    /// questions cite, in the staged order (a shared one in both, an uncited one in none),
    /// and removing a group deletes its parts.
    #[tokio::test]
    async fn spill_parts_hold_what_each_group_cites() {
        let dir = tempfile::tempdir().unwrap();
        let loc = crate::store::open_location(dir.path().to_str().unwrap(), true).unwrap();
        let q = |id: &str, docs: &[&str]| Question {
            id: id.into(),
            context_documents: docs.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        };
        let questions = [
            q("q1", &["a", "b"]),
            q("q2", &["shared"]),
            q("q3", &["c", "shared"]),
            q("q4", &["missing"]),
        ];
        let doc = |id: &str| Document {
            id: id.into(),
            text: format!("text of {id}"),
            ..Default::default()
        };
        let docs: Vec<Document> = ["c", "shared", "uncited", "a", "b"].map(doc).to_vec();
        let qp = stage(&loc, TableKind::Questions, &questions).await;
        let dp = stage(&loc, TableKind::Documents, &docs).await;
        let (qs, ds) = (vec![(String::new(), &qp)], vec![(String::new(), &dp)]);

        let est = estimate(&loc, &ds, &[]).await.unwrap();
        assert!(est > 5 * (std::mem::size_of::<Document>() as u64 + INDEX_BYTES));
        let groups = Groups::plan(est, est / 2 + 1, 4);
        assert_eq!(groups, Groups { size: 2, count: 2 });

        let routes = Routes::of_questions(&loc, &qs, groups).await.unwrap();
        assert_eq!(routes.documents.len(), 5);
        assert!(routes.tables.is_empty());
        // Waves of one group: a pass over the staged part per group.
        let mut s = spill(&loc, "staging", "hp", &ds, &[], &routes, groups, 1)
            .await
            .unwrap();
        assert_eq!(s.base, "staging/_route/hp");
        assert_eq!(s.bytes_in, dp.bytes);
        assert_eq!(s.rows_out, 5);
        let g0 = s.parts(0, TableKind::Documents);
        let g1 = s.parts(1, TableKind::Documents);
        assert_eq!((g0.len(), g1.len()), (1, 1));
        assert!(s.parts(0, TableKind::Tables).is_empty());
        assert!(g0[0].1.path().starts_with("staging/_route/hp/documents/"));
        assert_eq!(ids_of(&loc, g0[0].1).await, ["shared", "a", "b"]);
        assert_eq!(ids_of(&loc, g1[0].1).await, ["c", "shared"]);

        let (p0, p1) = (g0[0].1.path(), g1[0].1.path());
        s.remove(&loc, 0).await.unwrap();
        assert!(!loc.exists(&p0).await.unwrap());
        assert!(loc.exists(&p1).await.unwrap());
        remove_spill_dir(&loc, &s.base).await.unwrap();
        assert!(!loc.exists(&p1).await.unwrap());
        assert!(loc.list("staging/_route").await.unwrap().is_empty());
        assert_eq!(groups_per_wave(1), 8);
        assert_eq!(groups_per_wave(1 << 30), 42);
    }

    #[test]
    fn groups_cut_questions_into_even_runs_under_the_budget() {
        // Fits: one group.
        assert_eq!(Groups::plan(100, 100, 10), Groups { size: 10, count: 1 });
        // Three budgets' worth over ten questions: groups of three (a group of four would
        // hold 1.2 budgets), the last of one.
        let g = Groups::plan(250, 100, 10);
        assert_eq!(g, Groups { size: 3, count: 4 });
        let of: Vec<u32> = (0..10).map(|p| g.of(p)).collect();
        assert_eq!(of, [0, 0, 0, 1, 1, 1, 2, 2, 2, 3]);
        assert_eq!(Groups::plan(200, 100, 10), Groups { size: 5, count: 2 });
        // Never more groups than questions, never an empty group.
        assert_eq!(Groups::plan(1 << 40, 1, 3), Groups { size: 1, count: 3 });
        assert_eq!(Groups::plan(10, 1, 0), Groups { size: 1, count: 1 });
        // Questions past the plan join the last group.
        assert_eq!(g.of(99), 3);
    }

    #[test]
    fn routes_list_each_citing_group_once_in_order() {
        let mut r = Route::default();
        for (id, g) in [
            ("a", 0),
            ("b", 0),
            ("a", 0),
            ("a", 2),
            ("c", 1),
            ("a", 2),
            ("a", 3),
        ] {
            r.add(id, g);
        }
        assert_eq!(r.groups("a").collect::<Vec<_>>(), [0, 2, 3]);
        assert_eq!(r.groups("b").collect::<Vec<_>>(), [0]);
        assert_eq!(r.groups("c").collect::<Vec<_>>(), [1]);
        assert_eq!(r.groups("d").count(), 0);
        assert_eq!(r.len(), 3);
    }
}
