//! `adjacency.bin`: the KG index's nodes and edges once more as fixed-width arrays, for walks
//! that read many small neighbourhoods (the `subgraph` stage).
//!
//! Why a second layout: the Parquet files are compressed pages of up to 20,000 rows, so a
//! run of a few edges decodes its whole page and each row group's dictionary; a pass over a
//! frontier of a few thousand nodes decodes most of the files. Here a node's edges are one
//! slice of 8-byte entries located by two offsets, read in place from the file mapped into
//! memory: a walk touches the pages of the rows it asks for and copies nothing.
//!
//! Why mapped, not positional reads (`pread`): a pass over a frontier of 150,000 nodes of the
//! 50M-edge bench KG asks for one node in about 80, so merged reads copied nearly whole
//! sections, once per pass; those copies were a quarter of the one-core stage. The mapping
//! is tantivy's ([`MmapDirectory`], the crate the BM25 index already links), which keeps
//! the workspace free of `unsafe`. The file is never changed once renamed into a version.
//!
//! Layout, all integers little-endian:
//!
//! - a header: the magic `DKGADJ01`, the node count N, the edge count E (u64 each), then
//!   (offset, length) in bytes of seven sections (u64 each);
//! - `out_offsets`: N + 1 u64; node i's out-edges are entries `[out[i], out[i + 1])` of
//!   `out_edges`;
//! - `in_offsets`: the same for `in_edges`;
//! - `out_edges`: E entries (object id u32, label u32), in `edges_by_subject.parquet`'s
//!   row order;
//! - `in_edges`: E entries (subject id u32, label u32), in `edges_by_object.parquet`'s
//!   row order;
//! - `node_offsets`: N + 1 u64, each node's byte offset in `node_records`;
//! - `node_records`: per node, its kind (u8: 0 entity, 1 iri, 2 literal), the key's length
//!   (u32) and bytes, the name's length (u32, `u32::MAX` when it has none) and bytes;
//! - `labels`: a JSON array of `[relation, source]` pairs; an edge's label indexes it.
//!
//! [`write`] derives the file from the three Parquet files once they are complete (one
//! sequential read of each, holding a few batches and the labels), writes it under a
//! temporary name and renames it when complete.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::Path;

use arrow::array::{Array, StringArray, UInt32Array, UInt64Array};
use parquet::file::reader::{FileReader, SerializedFileReader};
use tantivy::directory::error::OpenReadError;
use tantivy::directory::{Directory, MmapDirectory, OwnedBytes};

use super::write::{reader, tmp_path};
use super::{EDGES_BY_OBJECT_FILE, EDGES_BY_SUBJECT_FILE, Kind, NODES_FILE, column};
use crate::IndexError;

/// File name of the fixed-width copy of the index.
pub const ADJACENCY_FILE: &str = "adjacency.bin";

const MAGIC: &[u8; 8] = b"DKGADJ01";
const SECTIONS: usize = 7;
const HEADER: u64 = 8 + 16 + 16 * SECTIONS as u64;
/// Nodes per block of a full scan of the records.
const SCAN_BLOCK: u32 = 1 << 16;

const OUT_OFFSETS: usize = 0;
const IN_OFFSETS: usize = 1;
const OUT_EDGES: usize = 2;
const IN_EDGES: usize = 3;
const NODE_OFFSETS: usize = 4;
const NODE_RECORDS: usize = 5;
const LABELS: usize = 6;

/// Which edges of a node: those it is the subject of, or the object of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Out,
    In,
}

/// A node as `adjacency.bin` records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeRecord<'a> {
    pub key: &'a str,
    /// `entity`, `iri` or `literal`.
    pub kind: &'static str,
    pub name: Option<&'a str>,
}

/// One edge read: the node asked for, the node at the other end, and the edge's label
/// (an index into [`Adjacency::labels`]).
pub type AdjEdge = (u32, u32, u32);

/// `adjacency.bin` mapped into memory.
pub struct Adjacency {
    bytes: OwnedBytes,
    show: String,
    nodes: u64,
    edges: u64,
    sections: [(u64, u64); SECTIONS],
    labels: Vec<(String, String)>,
}

impl std::fmt::Debug for Adjacency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("Adjacency"))
            .field("path", &self.show)
            .field("nodes", &self.nodes)
            .field("edges", &self.edges)
            .finish_non_exhaustive()
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

impl Adjacency {
    /// Opens `dir/adjacency.bin` and checks its header against its length.
    pub fn open(dir: &Path) -> Result<Adjacency, IndexError> {
        let path = dir.join(ADJACENCY_FILE);
        let show = path.display().to_string();
        let corrupt = |why: String| IndexError::Corrupt(show.clone(), why);
        let io = |e: std::io::Error| IndexError::io(&show, e);
        let mapped = mapped_dir(dir)
            .map_err(|e| io(std::io::Error::other(e.to_string())))?
            .open_read(Path::new(ADJACENCY_FILE));
        let bytes = match mapped {
            Ok(slice) => slice.read_bytes().map_err(io)?,
            Err(OpenReadError::FileDoesNotExist(_)) => {
                return Err(corrupt(
                    "missing: this KG index predates `adjacency.bin`; rebuild the index".into(),
                ));
            }
            Err(e) => return Err(io(std::io::Error::other(e.to_string()))),
        };
        let len = bytes.len() as u64;
        if len < HEADER {
            return Err(corrupt(format!("{len} bytes, shorter than its header")));
        }
        let head = &bytes[..HEADER as usize];
        if &head[..8] != MAGIC {
            return Err(corrupt("not an adjacency file (bad magic)".into()));
        }
        let (nodes, edges) = (u64_at(head, 8), u64_at(head, 16));
        let mut sections = [(0u64, 0u64); SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            *s = (u64_at(head, 24 + 16 * i), u64_at(head, 32 + 16 * i));
        }
        let fixed = [
            (OUT_OFFSETS, (nodes + 1) * 8),
            (IN_OFFSETS, (nodes + 1) * 8),
            (OUT_EDGES, edges * 8),
            (IN_EDGES, edges * 8),
            (NODE_OFFSETS, (nodes + 1) * 8),
        ];
        for (i, want) in fixed {
            if sections[i].1 != want {
                return Err(corrupt(format!(
                    "section {i} holds {} bytes, {want} expected for {nodes} nodes and {edges} edges",
                    sections[i].1
                )));
            }
        }
        if let Some((i, _)) = (sections.iter().enumerate())
            .find(|(_, (o, l))| o.checked_add(*l).is_none_or(|end| *o < HEADER || end > len))
        {
            return Err(corrupt(format!(
                "section {i} lies outside the file's {len} bytes"
            )));
        }
        let (at, n) = sections[LABELS];
        let labels: Vec<(String, String)> =
            serde_json::from_slice(&bytes[at as usize..(at + n) as usize])
                .map_err(|e| corrupt(format!("labels: {e}")))?;
        Ok(Adjacency {
            bytes,
            show,
            nodes,
            edges,
            sections,
            labels,
        })
    }

    /// Nodes in the index.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// The (relation, source) of each label.
    pub fn labels(&self) -> &[(String, String)] {
        &self.labels
    }

    fn corrupt(&self, why: String) -> IndexError {
        IndexError::Corrupt(self.show.clone(), why)
    }

    /// Hands the bytes of each range of `ranges` to `each` with its position in `ranges`
    /// (every range lies inside a section, checked at open or against a section's length).
    fn read_ranges(
        &self,
        ranges: &[(u64, u64)],
        mut each: impl FnMut(usize, &[u8]) -> Result<(), IndexError>,
    ) -> Result<(), IndexError> {
        for (k, &(s, e)) in ranges.iter().enumerate() {
            each(k, &self.bytes[s as usize..e as usize])?;
        }
        Ok(())
    }

    /// Entries `[start, end)` of an offsets section for each of `ids` (sorted), checked to
    /// be ordered and within `limit`.
    fn spans(
        &self,
        section: usize,
        ids: &[u32],
        limit: u64,
    ) -> Result<Vec<(u64, u64)>, IndexError> {
        let base = self.sections[section].0;
        let mut ranges = Vec::with_capacity(ids.len());
        for &id in ids {
            if id as u64 >= self.nodes {
                return Err(self.corrupt(format!(
                    "node {id} asked for, the index has {} nodes",
                    self.nodes
                )));
            }
            ranges.push((base + id as u64 * 8, base + id as u64 * 8 + 16));
        }
        let mut spans = Vec::with_capacity(ids.len());
        self.read_ranges(&ranges, |k, b| {
            let (s, e) = (u64_at(b, 0), u64_at(b, 8));
            if s > e || e > limit {
                return Err(self.corrupt(format!(
                    "section {section}: node {} spans [{s}, {e}), past {limit}",
                    ids[k]
                )));
            }
            spans.push((s, e));
            Ok(())
        })?;
        Ok(spans)
    }

    /// The edges of the nodes `ids` (sorted, distinct) in one direction: (node, other end,
    /// label), by node and then in the edge file's order.
    pub fn edges(&self, direction: Direction, ids: &[u32]) -> Result<Vec<AdjEdge>, IndexError> {
        let (offsets, entries) = match direction {
            Direction::Out => (OUT_OFFSETS, OUT_EDGES),
            Direction::In => (IN_OFFSETS, IN_EDGES),
        };
        let spans = self.spans(offsets, ids, self.edges)?;
        let base = self.sections[entries].0;
        let ranges: Vec<(u64, u64)> = spans
            .iter()
            .map(|&(s, e)| (base + s * 8, base + e * 8))
            .collect();
        let total: u64 = spans.iter().map(|(s, e)| e - s).sum();
        let mut out = Vec::with_capacity(total as usize);
        let (nodes, labels) = (self.nodes, self.labels.len() as u64);
        self.read_ranges(&ranges, |k, b| {
            for c in b.chunks_exact(8) {
                let (other, label) = (u32_at(c, 0), u32_at(c, 4));
                if other as u64 >= nodes || label as u64 >= labels {
                    return Err(self.corrupt(format!(
                        "an edge of node {} names node {other} or label {label}, past the index",
                        ids[k]
                    )));
                }
                out.push((ids[k], other, label));
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The records of the nodes `ids` (sorted, distinct), in order.
    pub fn records(
        &self,
        ids: &[u32],
        mut each: impl FnMut(u32, NodeRecord<'_>),
    ) -> Result<(), IndexError> {
        let (base, len) = self.sections[NODE_RECORDS];
        let spans = self.spans(NODE_OFFSETS, ids, len)?;
        let ranges: Vec<(u64, u64)> = spans.iter().map(|&(s, e)| (base + s, base + e)).collect();
        self.read_ranges(&ranges, |k, b| {
            let r = record(b)
                .ok_or_else(|| self.corrupt(format!("node {}: a malformed record", ids[k])))?;
            each(ids[k], r);
            Ok(())
        })
    }

    /// Every node's record, in id order.
    pub fn scan(&self, each: impl FnMut(u32, NodeRecord<'_>)) -> Result<(), IndexError> {
        self.scan_range(0..self.nodes as u32, each)
    }

    /// The records of the nodes `ids`, in id order.
    pub fn scan_range(
        &self,
        ids: Range<u32>,
        mut each: impl FnMut(u32, NodeRecord<'_>),
    ) -> Result<(), IndexError> {
        let mut start = ids.start;
        while start < ids.end {
            let end = start.saturating_add(SCAN_BLOCK).min(ids.end);
            let block: Vec<u32> = (start..end).collect();
            self.records(&block, &mut each)?;
            start = end;
        }
        Ok(())
    }

    /// The first node whose key is not less than `key` in byte order (nodes are sorted by
    /// key): a binary search, one record read per probe.
    pub fn lower_bound(&self, key: &str) -> Result<u32, IndexError> {
        let (mut lo, mut hi) = (0u32, self.nodes as u32);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let mut less = false;
            self.records(&[mid], |_, r| less = r.key < key)?;
            if less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// The nodes whose key is `key` (one per kind), with their records.
    pub fn with_key(
        &self,
        key: &str,
        mut each: impl FnMut(u32, NodeRecord<'_>),
    ) -> Result<(), IndexError> {
        let lo = self.lower_bound(key)?;
        // Kinds are three, so are the nodes sharing a key.
        let hi = lo.saturating_add(3).min(self.nodes as u32);
        self.scan_range(lo..hi, |id, r| {
            if r.key == key {
                each(id, r)
            }
        })
    }

    /// The nodes whose keys start with the byte `first`: one range, as nodes are sorted.
    pub fn starting_with(&self, first: u8) -> Result<Range<u32>, IndexError> {
        let lo = self.lower_bound(&char::from(first).to_string())?;
        let hi = match first.checked_add(1).filter(|b| b.is_ascii()) {
            Some(next) => self.lower_bound(&char::from(next).to_string())?,
            None => self.nodes as u32,
        };
        Ok(lo..hi.max(lo))
    }
}

/// The one [`MmapDirectory`] of `dir` in this process. Its cache hands every task that opens
/// the same file the same mapping (held while any task holds it), so two tasks of a job map
/// `adjacency.bin` once, not once each.
fn mapped_dir(dir: &Path) -> tantivy::Result<MmapDirectory> {
    static DIRS: std::sync::OnceLock<std::sync::Mutex<HashMap<std::path::PathBuf, MmapDirectory>>> =
        std::sync::OnceLock::new();
    let mut dirs = (DIRS.get_or_init(Default::default).lock()).unwrap_or_else(|e| e.into_inner());
    if let Some(d) = dirs.get(dir) {
        return Ok(d.clone());
    }
    let d = MmapDirectory::open(dir)?;
    dirs.insert(dir.to_path_buf(), d.clone());
    Ok(d)
}

/// Parses one node record; `None` when it is malformed.
fn record(b: &[u8]) -> Option<NodeRecord<'_>> {
    let (&kind, rest) = b.split_first()?;
    let kind = match kind {
        0 => Kind::Entity,
        1 => Kind::Iri,
        2 => Kind::Literal,
        _ => return None,
    }
    .as_str();
    let (n, rest) = rest.split_first_chunk::<4>()?;
    let n = u32::from_le_bytes(*n) as usize;
    let key = std::str::from_utf8(rest.get(..n)?).ok()?;
    let (m, rest) = rest.get(n..)?.split_first_chunk::<4>()?;
    let m = u32::from_le_bytes(*m);
    let name = if m == u32::MAX {
        rest.is_empty().then_some(None)?
    } else {
        (rest.len() == m as usize).then_some(())?;
        Some(std::str::from_utf8(rest).ok()?)
    };
    Some(NodeRecord { key, kind, name })
}

fn kind_byte(k: Kind) -> u8 {
    match k {
        Kind::Entity => 0,
        Kind::Iri => 1,
        Kind::Literal => 2,
    }
}

/// Rows of a Parquet file, from its footer.
fn rows(path: &Path) -> Result<u64, IndexError> {
    let show = path.display().to_string();
    let file = File::open(path).map_err(|e| IndexError::io(&show, e))?;
    let r = SerializedFileReader::new(file).map_err(|e| IndexError::parquet(&show, e))?;
    Ok(r.metadata().file_metadata().num_rows() as u64)
}

/// A buffered writer at `offset` of `path`.
fn writer_at(path: &Path, offset: u64) -> Result<BufWriter<File>, IndexError> {
    let io = |e| IndexError::io(path.display(), e);
    let mut f = File::options().write(true).open(path).map_err(io)?;
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    Ok(BufWriter::with_capacity(1 << 20, f))
}

fn done(w: BufWriter<File>, path: &Path) -> Result<(), IndexError> {
    w.into_inner()
        .map_err(|e| IndexError::io(path.display(), e.into_error()))
        .map(drop)
}

/// Labels numbered in first-seen order: source → relation → label.
#[derive(Default)]
struct Labels {
    ids: HashMap<String, HashMap<String, u32>>,
    pairs: Vec<(String, String)>,
}

impl Labels {
    fn id(&mut self, relation: &str, source: &str) -> u32 {
        if let Some(&i) = self.ids.get(source).and_then(|m| m.get(relation)) {
            return i;
        }
        let i = self.pairs.len() as u32;
        (self.ids.entry(source.to_owned()).or_default()).insert(relation.to_owned(), i);
        self.pairs.push((relation.to_owned(), source.to_owned()));
        i
    }
}

/// Writes `dir/adjacency.bin` from the index's Parquet files in `dir` (module docs).
pub(super) fn write(dir: &Path) -> Result<(), IndexError> {
    let path = dir.join(ADJACENCY_FILE);
    let tmp = tmp_path(&path);
    let io = |e| IndexError::io(tmp.display(), e);
    let (nodes_path, subj, obj) = (
        dir.join(NODES_FILE),
        dir.join(EDGES_BY_SUBJECT_FILE),
        dir.join(EDGES_BY_OBJECT_FILE),
    );
    let (n, e) = (rows(&nodes_path)?, rows(&subj)?);
    if rows(&obj)? != e {
        return Err(IndexError::Corrupt(
            obj.display().to_string(),
            format!("not the {e} edges of {}", subj.display()),
        ));
    }
    let fixed = [(n + 1) * 8, (n + 1) * 8, e * 8, e * 8, (n + 1) * 8];
    let mut sections = [(0u64, 0u64); SECTIONS];
    let mut at = HEADER;
    for (s, len) in sections.iter_mut().zip(fixed) {
        *s = (at, len);
        at += len;
    }
    let records_at = at;
    File::create(&tmp).map_err(io)?;

    // The nodes: both offset arrays, the record offsets and the records.
    let show = nodes_path.display().to_string();
    let corrupt = |why: String| IndexError::Corrupt(show.clone(), why);
    let mut outs = writer_at(&tmp, sections[OUT_OFFSETS].0)?;
    let mut ins = writer_at(&tmp, sections[IN_OFFSETS].0)?;
    let mut offs = writer_at(&tmp, sections[NODE_OFFSETS].0)?;
    let mut records = writer_at(&tmp, records_at)?;
    let (mut out_at, mut in_at, mut rec_at, mut row) = (0u64, 0u64, 0u64, 0u64);
    for b in reader(&nodes_path, &[1, 2, 3, 4, 5, 6, 7])? {
        let b = b.map_err(|err| IndexError::parquet(&show, err))?;
        let key = column::<StringArray>(&b, "key", &show)?;
        let name = column::<StringArray>(&b, "name", &show)?;
        let kind = column::<StringArray>(&b, "kind", &show)?;
        let ranges = ["out_start", "out_end", "in_start", "in_end"]
            .map(|c| column::<UInt64Array>(&b, c, &show));
        let [os, oe, is, ie] = ranges;
        let (os, oe, is, ie) = (os?, oe?, is?, ie?);
        for r in 0..b.num_rows() {
            if (os.value(r), is.value(r)) != (out_at, in_at)
                || oe.value(r) < out_at
                || ie.value(r) < in_at
            {
                return Err(corrupt(format!(
                    "row {row}: edge ranges not contiguous in node order"
                )));
            }
            let k = Kind::parse(kind.value(r))
                .ok_or_else(|| corrupt(format!("row {row}: unknown kind {:?}", kind.value(r))))?;
            outs.write_all(&out_at.to_le_bytes()).map_err(io)?;
            ins.write_all(&in_at.to_le_bytes()).map_err(io)?;
            offs.write_all(&rec_at.to_le_bytes()).map_err(io)?;
            let key = key.value(r).as_bytes();
            let name = name.is_valid(r).then(|| name.value(r).as_bytes());
            records.write_all(&[kind_byte(k)]).map_err(io)?;
            records
                .write_all(&(key.len() as u32).to_le_bytes())
                .map_err(io)?;
            records.write_all(key).map_err(io)?;
            let m = name.map_or(u32::MAX, |n| n.len() as u32);
            records.write_all(&m.to_le_bytes()).map_err(io)?;
            records.write_all(name.unwrap_or_default()).map_err(io)?;
            rec_at += 9 + key.len() as u64 + name.map_or(0, |n| n.len() as u64);
            (out_at, in_at) = (oe.value(r), ie.value(r));
            row += 1;
        }
    }
    if (row, out_at, in_at) != (n, e, e) {
        return Err(corrupt(format!(
            "{row} nodes whose runs end at {out_at} and {in_at}, not {n} nodes and {e} edges"
        )));
    }
    outs.write_all(&e.to_le_bytes()).map_err(io)?;
    ins.write_all(&e.to_le_bytes()).map_err(io)?;
    offs.write_all(&rec_at.to_le_bytes()).map_err(io)?;
    for w in [outs, ins, offs, records] {
        done(w, &tmp)?;
    }
    sections[NODE_RECORDS] = (records_at, rec_at);

    // The edges, both orders: (other end, label).
    let mut labels = Labels::default();
    for (file, section, other) in [(&subj, OUT_EDGES, "object"), (&obj, IN_EDGES, "subject")] {
        let show = file.display().to_string();
        let mut w = writer_at(&tmp, sections[section].0)?;
        for b in reader(file, &[0, 1, 2, 3])? {
            let b = b.map_err(|err| IndexError::parquet(&show, err))?;
            let other = column::<UInt32Array>(&b, other, &show)?;
            let relation = column::<StringArray>(&b, "relation", &show)?;
            let source = column::<StringArray>(&b, "source", &show)?;
            for r in 0..b.num_rows() {
                let label = labels.id(relation.value(r), source.value(r));
                w.write_all(&other.value(r).to_le_bytes()).map_err(io)?;
                w.write_all(&label.to_le_bytes()).map_err(io)?;
            }
        }
        done(w, &tmp)?;
    }
    let json = serde_json::to_vec(&labels.pairs)
        .map_err(|err| IndexError::Corrupt(tmp.display().to_string(), format!("labels: {err}")))?;
    sections[LABELS] = (records_at + rec_at, json.len() as u64);
    let mut w = writer_at(&tmp, records_at + rec_at)?;
    w.write_all(&json).map_err(io)?;
    done(w, &tmp)?;

    let mut head = Vec::with_capacity(HEADER as usize);
    head.extend_from_slice(MAGIC);
    head.extend_from_slice(&n.to_le_bytes());
    head.extend_from_slice(&e.to_le_bytes());
    for (o, l) in sections {
        head.extend_from_slice(&o.to_le_bytes());
        head.extend_from_slice(&l.to_le_bytes());
    }
    let mut w = writer_at(&tmp, 0)?;
    w.write_all(&head).map_err(io)?;
    done(w, &tmp)?;
    std::fs::rename(&tmp, &path).map_err(|err| IndexError::io(path.display(), err))
}
