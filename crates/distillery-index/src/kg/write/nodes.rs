//! The node table: step 1's distinct nodes, the cursor turning (key, kind) into a node id,
//! and `nodes.parquet` with each node's row ranges and CVT mark.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, BooleanArray, ListBuilder, RecordBatch, StringArray,
    StringBuilder, UInt32Array, UInt64Array,
};
use datafusion::physical_plan::SendableRecordBatchStream;
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use super::parts::{PartWriter, plain, props, reader};
use super::schema::{nodes_schema, sorted_nodes_schema};
use super::sort::{ids, next, sort_err, strings};
use crate::IndexError;
use crate::kg::{BATCH_ROWS, Kind};

/// The (key, kind) run being read in step 1.
struct Run {
    key: String,
    kind: String,
    name: Option<String>,
    aliases: BTreeSet<String>,
    edge: bool,
}

/// The columns of the sorted node table being built: key, kind, name and aliases.
#[derive(Default)]
struct NodeColumns {
    text: [StringBuilder; 3],
    aliases: ListBuilder<StringBuilder>,
}

/// Step 1: one row per (key, kind) run that some edge has, with the run's first name (the
/// smallest, as names sort nulls last) and its distinct aliases; returns the nodes and
/// literals.
pub(super) async fn write_nodes_sorted(
    mut s: SendableRecordBatchStream,
    path: &Path,
) -> Result<(u64, u64), IndexError> {
    let mut w = PartWriter::create(path, sorted_nodes_schema(), plain())?;
    let (mut n, mut literals) = (0u64, 0u64);
    let mut out = NodeColumns::default();
    let mut run: Option<Run> = None;
    let mut emit = |r: Run, out: &mut NodeColumns, w: &mut PartWriter| {
        if !r.edge {
            return Ok(());
        }
        n += 1;
        literals += u64::from(r.kind == Kind::Literal.as_str());
        out.text[0].append_value(&r.key);
        out.text[1].append_value(&r.kind);
        out.text[2].append_option(r.name);
        for a in &r.aliases {
            out.aliases.values().append_value(a);
        }
        out.aliases.append(true);
        if out.text[0].len() >= BATCH_ROWS {
            flush_nodes(out, w, path)?;
        }
        Ok::<_, IndexError>(())
    };
    while let Some(b) = next(&mut s, path).await? {
        let (keys, kinds, names) = (strings(&b, 0)?, strings(&b, 1)?, strings(&b, 2)?);
        let edge = b
            .column(3)
            .as_any()
            .downcast_ref::<BooleanArray>()
            .ok_or_else(|| sort_err("ends", "`edge` is not a Boolean column"))?
            .clone();
        let aliases = strings(&b, 4)?;
        for r in 0..b.num_rows() {
            let (k, kd) = (keys.value(r), kinds.value(r));
            let name = (!names.is_null(r) && !names.value(r).is_empty()).then(|| names.value(r));
            let alias = aliases.is_valid(r).then(|| aliases.value(r));
            match &mut run {
                Some(cur) if cur.key == k && cur.kind == kd => {
                    cur.edge |= edge.value(r);
                    if cur.name.is_none() {
                        cur.name = name.map(str::to_owned);
                    }
                    if let Some(a) = alias.filter(|a| !cur.aliases.contains(*a)) {
                        cur.aliases.insert(a.to_owned());
                    }
                }
                _ => {
                    let next = Run {
                        key: k.to_owned(),
                        kind: kd.to_owned(),
                        name: name.map(str::to_owned),
                        aliases: alias.map(str::to_owned).into_iter().collect(),
                        edge: edge.value(r),
                    };
                    if let Some(done) = run.replace(next) {
                        emit(done, &mut out, &mut w)?;
                    }
                }
            }
        }
    }
    if let Some(done) = run.take() {
        emit(done, &mut out, &mut w)?;
    }
    flush_nodes(&mut out, &mut w, path)?;
    if n > u64::from(u32::MAX) + 1 {
        return Err(IndexError::Invalid(format!(
            "kg: more than {} nodes",
            u32::MAX
        )));
    }
    w.close()?;
    Ok((n, literals))
}

fn flush_nodes(out: &mut NodeColumns, w: &mut PartWriter, path: &Path) -> Result<(), IndexError> {
    if out.text[0].is_empty() {
        return Ok(());
    }
    let mut cols: Vec<ArrayRef> = out
        .text
        .iter_mut()
        .map(|b| Arc::new(b.finish()) as ArrayRef)
        .collect();
    cols.push(Arc::new(out.aliases.finish()));
    let b = RecordBatch::try_new(sorted_nodes_schema(), cols)
        .map_err(|e| IndexError::parquet(path.display(), e))?;
    w.write(&b)
}

/// Walks the sorted node table forward, turning (key, kind) into the node's id (its row).
pub(super) struct NodeCursor {
    rows: ParquetRecordBatchReader,
    keys: StringArray,
    kinds: StringArray,
    at: usize,
    id: u64,
    show: String,
}

impl NodeCursor {
    pub(super) fn open(path: &Path) -> Result<NodeCursor, IndexError> {
        let show = path.display().to_string();
        Ok(NodeCursor {
            rows: reader(path, &[0, 1])?,
            keys: StringArray::from(Vec::<&str>::new()),
            kinds: StringArray::from(Vec::<&str>::new()),
            at: 0,
            id: 0,
            show,
        })
    }

    /// The id of (key, kind); keys must come in the table's order.
    pub(super) fn seek(&mut self, key: &str, kind: &str) -> Result<u32, IndexError> {
        loop {
            if self.at == self.keys.len() {
                let b = self
                    .rows
                    .next()
                    .ok_or_else(|| missing(&self.show, key, kind))?
                    .map_err(|e| IndexError::parquet(&self.show, e))?;
                (self.keys, self.kinds) = (strings(&b, 0)?, strings(&b, 1)?);
                self.at = 0;
                continue;
            }
            match (self.keys.value(self.at), self.kinds.value(self.at)).cmp(&(key, kind)) {
                Ordering::Less => {
                    self.at += 1;
                    self.id += 1;
                }
                Ordering::Equal => return Ok(self.id as u32),
                Ordering::Greater => return Err(missing(&self.show, key, kind)),
            }
        }
    }
}

fn missing(show: &str, key: &str, kind: &str) -> IndexError {
    IndexError::Corrupt(
        show.to_owned(),
        format!("kg build: node ({key:?}, {kind}) not found in sorted order"),
    )
}

/// Per node id, in order, the row range of its run in a sorted id column.
struct IdRuns {
    rows: ParquetRecordBatchReader,
    ids: UInt32Array,
    at: usize,
    pos: u64,
    show: String,
}

impl IdRuns {
    fn open(path: &Path, column: usize) -> Result<IdRuns, IndexError> {
        Ok(IdRuns {
            rows: reader(path, &[column])?,
            ids: UInt32Array::from(Vec::<u32>::new()),
            at: 0,
            pos: 0,
            show: path.display().to_string(),
        })
    }

    fn take(&mut self, id: u32) -> Result<(u64, u64), IndexError> {
        let start = self.pos;
        loop {
            if self.at == self.ids.len() {
                match self.rows.next() {
                    None => break,
                    Some(b) => {
                        let b = b.map_err(|e| IndexError::parquet(&self.show, e))?;
                        self.ids = ids(&b, 0)?.clone();
                        self.at = 0;
                        continue;
                    }
                }
            }
            if self.ids.value(self.at) != id {
                break;
            }
            self.at += 1;
            self.pos += 1;
        }
        Ok((start, self.pos))
    }

    /// Fails unless every row was taken (an id with no node).
    fn done(mut self) -> Result<(), IndexError> {
        if self.at < self.ids.len() || self.rows.next().is_some() {
            return Err(IndexError::Corrupt(
                self.show,
                "kg build: an edge names a node id past the node table".into(),
            ));
        }
        Ok(())
    }
}

/// Whether a node is one of Freebase's nameless mediator (CVT) nodes: an entity keyed as a
/// Freebase mid (`m.`, or FB15k's `/m/`) that no edge or name names.
pub(in crate::kg) fn is_cvt(key: &str, kind: &str, named: bool) -> bool {
    !named && kind == Kind::Entity.as_str() && (key.starts_with("m.") || key.starts_with("/m/"))
}

/// `nodes.parquet`: the sorted nodes with ids, both row ranges and the CVT mark; adds the
/// CVT nodes to `cvts`.
pub(super) fn write_nodes(
    path: &Path,
    nodes: &Path,
    by_subject: &Path,
    by_object: &Path,
    cvts: &mut u64,
) -> Result<(), IndexError> {
    let mut outs = IdRuns::open(by_subject, 0)?;
    let mut ins = IdRuns::open(by_object, 2)?;
    let mut w = PartWriter::create(path, nodes_schema(), props(&[1, 3]))?;
    let mut id = 0u32;
    for b in reader(nodes, &[0, 1, 2, 3])? {
        let b = b.map_err(|e| IndexError::parquet(nodes.display(), e))?;
        let rows = b.num_rows();
        let mut ranges: [Vec<u64>; 4] = Default::default();
        let mut ids = Vec::with_capacity(rows);
        for _ in 0..rows {
            let (os, oe) = outs.take(id)?;
            let (is, ie) = ins.take(id)?;
            for (v, x) in ranges.iter_mut().zip([os, oe, is, ie]) {
                v.push(x);
            }
            ids.push(id);
            id = id.wrapping_add(1);
        }
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(UInt32Array::from(ids)),
            b.column(0).clone(),
            b.column(2).clone(),
            b.column(1).clone(),
        ];
        cols.extend(ranges.map(|v| Arc::new(UInt64Array::from(v)) as ArrayRef));
        let (keys, kinds, names) = (strings(&b, 0)?, strings(&b, 1)?, strings(&b, 2)?);
        let cvt: BooleanArray = (0..rows)
            .map(|r| Some(is_cvt(keys.value(r), kinds.value(r), !names.is_null(r))))
            .collect();
        *cvts += cvt.true_count() as u64;
        cols.push(Arc::new(cvt));
        cols.push(b.column(3).clone());
        let out = RecordBatch::try_new(nodes_schema(), cols)
            .map_err(|e| IndexError::parquet(path.display(), e))?;
        w.write(&out)?;
    }
    outs.done()?;
    ins.done()?;
    w.close().map(drop)
}
