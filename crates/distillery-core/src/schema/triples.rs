//! [`TriplesBuilder`]: the `triples` and `literals` tables built one row at a time.
//!
//! A KG dump is billions of rows of short strings. Built from a buffer of owned records, each
//! row was a 408-byte [`Record`](crate::Record) moved into the buffer and read back once per
//! column, and its strings were freed a batch later. Appended as it comes, a row's strings are
//! copied once into the columns and freed at once.

use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, StringBuilder, UInt32Builder, UInt64Builder};
use arrow_array::{ArrayRef, RecordBatch};

use super::{SchemaError, schema_of};
use crate::TableKind;
use crate::record::Triple;

/// The string columns every row has, in [`TriplesBuilder::text`]'s order.
const TEXT: [&str; 7] = [
    "id",
    "dataset",
    "source",
    "subject",
    "predicate",
    "object",
    "object_kind",
];
/// The optional string columns, in [`TriplesBuilder::opt`]'s order.
const OPT: [&str; 8] = [
    "lang",
    "datatype",
    "subject_name",
    "object_name",
    "time",
    "document_id",
    "teacher",
    "cache_entry",
];
/// The optional u32 columns, in [`TriplesBuilder::u32s`]'s order.
const U32: [&str; 3] = ["sentence", "start", "end"];

/// Rows of the `triples` or `literals` table (the same columns), appended one at a time; the
/// batch [`TriplesBuilder::finish`] makes is the one [`super::to_batch`] makes of the same
/// triples.
#[derive(Debug)]
pub struct TriplesBuilder {
    table: TableKind,
    text: [StringBuilder; 7],
    opt: [NullRuns<StringBuilder>; 8],
    u32s: [NullRuns<UInt32Builder>; 3],
    line: UInt64Builder,
    /// The most rows and bytes per string column of a batch so far: the next one's capacity.
    rows: usize,
    bytes: [usize; 15],
}

impl TriplesBuilder {
    /// An empty builder for `table` (`triples` or `literals`).
    pub fn new(table: TableKind) -> TriplesBuilder {
        TriplesBuilder::with_capacity(table, 0, [0; 15])
    }

    /// An empty builder with room for `rows` rows and as many bytes in each string column as
    /// `items` hold: the batch of a whole run, built at once.
    pub(super) fn for_items(table: TableKind, items: &[&Triple]) -> TriplesBuilder {
        let mut bytes = [0; 15];
        for t in items {
            for (n, v) in bytes.iter_mut().zip(strings(t)) {
                *n += v.map_or(0, str::len);
            }
        }
        TriplesBuilder::with_capacity(table, items.len(), bytes)
    }

    fn with_capacity(table: TableKind, rows: usize, bytes: [usize; 15]) -> TriplesBuilder {
        let text = |i: usize| StringBuilder::with_capacity(rows, bytes[i]);
        TriplesBuilder {
            table,
            text: std::array::from_fn(text),
            opt: std::array::from_fn(|i| NullRuns::new(text(TEXT.len() + i))),
            u32s: std::array::from_fn(|_| NullRuns::new(UInt32Builder::with_capacity(rows))),
            line: UInt64Builder::with_capacity(rows),
            rows,
            bytes,
        }
    }

    /// Appends one row.
    pub fn push(&mut self, t: &Triple) {
        let all = strings(t);
        let (text, opt) = all.split_at(TEXT.len());
        for (b, v) in self.text.iter_mut().zip(text) {
            b.append_value(v.unwrap_or_default());
        }
        for (b, v) in self.opt.iter_mut().zip(opt) {
            match v {
                Some(v) => b.flushed().append_value(v),
                None => b.null(),
            }
        }
        for (b, v) in self.u32s.iter_mut().zip([t.sentence, t.start, t.end]) {
            match v {
                Some(v) => b.flushed().append_value(v),
                None => b.null(),
            }
        }
        self.line.append_option(t.line);
    }

    /// Rows appended since the last [`TriplesBuilder::finish`].
    pub fn len(&self) -> usize {
        self.line.len()
    }

    /// Whether no row was appended since the last [`TriplesBuilder::finish`].
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows appended as one batch; the builder starts again empty, with room for as
    /// many rows and bytes as the largest batch so far held.
    pub fn finish(&mut self) -> Result<RecordBatch, SchemaError> {
        let table = self.table;
        let rows = self.len();
        let mut bytes = [0; 15];
        let opt = self.opt.iter().map(|b| &b.builder);
        for ((n, b), last) in (bytes.iter_mut())
            .zip(self.text.iter().chain(opt))
            .zip(self.bytes)
        {
            *n = b.values_slice().len().max(last);
        }
        let mut next = TriplesBuilder::with_capacity(table, rows.max(self.rows), bytes);
        std::mem::swap(self, &mut next);
        let mut built = next;
        let schema = schema_of(table);
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let name = field.name().as_str();
            let column: ArrayRef = if let Some(i) = TEXT.iter().position(|c| *c == name) {
                Arc::new(built.text[i].finish())
            } else if let Some(i) = OPT.iter().position(|c| *c == name) {
                Arc::new(built.opt[i].flushed().finish())
            } else if let Some(i) = U32.iter().position(|c| *c == name) {
                Arc::new(built.u32s[i].flushed().finish())
            } else if name == "line" {
                Arc::new(built.line.finish())
            } else {
                return Err(SchemaError {
                    table: table.name().to_string(),
                    message: format!("no builder for column `{name}`"),
                });
            };
            columns.push(column);
        }
        RecordBatch::try_new(schema, columns).map_err(|e| SchemaError {
            table: table.name().to_string(),
            message: e.to_string(),
        })
    }
}

/// An optional column whose nulls are counted and appended a run at a time. Most optional
/// columns of a KG row (names, times, spans, teacher) are null in every row of a dump, and
/// one bulk append a run costs a fraction of one append a row; the array is the same.
#[derive(Debug)]
struct NullRuns<B> {
    builder: B,
    /// Nulls counted but not yet appended to `builder`.
    pending: usize,
}

/// The builders [`NullRuns`] wraps.
trait AppendNulls {
    fn append_nulls(&mut self, n: usize);
}

impl AppendNulls for StringBuilder {
    fn append_nulls(&mut self, n: usize) {
        StringBuilder::append_nulls(self, n);
    }
}

impl AppendNulls for UInt32Builder {
    fn append_nulls(&mut self, n: usize) {
        UInt32Builder::append_nulls(self, n);
    }
}

impl<B: AppendNulls> NullRuns<B> {
    fn new(builder: B) -> NullRuns<B> {
        NullRuns {
            builder,
            pending: 0,
        }
    }

    fn null(&mut self) {
        self.pending += 1;
    }

    /// The builder, with the nulls counted so far appended.
    fn flushed(&mut self) -> &mut B {
        if self.pending > 0 {
            self.builder.append_nulls(self.pending);
            self.pending = 0;
        }
        &mut self.builder
    }
}

/// A triple's string columns, in [`TEXT`] then [`OPT`] order (those of [`TEXT`] always set).
fn strings(t: &Triple) -> [Option<&str>; 15] {
    [
        Some(&t.id),
        Some(&t.dataset),
        Some(&t.source),
        Some(&t.subject),
        Some(&t.predicate),
        Some(&t.object),
        Some(&t.object_kind),
        t.lang.as_deref(),
        t.datatype.as_deref(),
        t.subject_name.as_deref(),
        t.object_name.as_deref(),
        t.time.as_deref(),
        t.document_id.as_deref(),
        t.teacher.as_deref(),
        t.cache_entry.as_deref(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{StringArray, UInt32Array};

    /// Nulls counted in runs give the arrays that one append a row gives, across batches,
    /// for runs at the start, between values and at the end.
    #[test]
    fn null_runs_give_the_same_columns() {
        let langs = [None, None, Some("en"), None, Some("de"), None, None];
        let spans = [Some(1), None, None, None, Some(5), None, Some(7)];
        let rows: Vec<Triple> = (0..langs.len())
            .map(|i| Triple {
                id: format!("t{i}"),
                lang: langs[i].map(str::to_string),
                start: spans[i],
                line: Some(i as u64 + 1),
                ..Triple::default()
            })
            .collect();
        let mut b = TriplesBuilder::new(TableKind::Literals);
        for range in [0..3, 3..7] {
            for t in &rows[range.clone()] {
                b.push(t);
            }
            let batch = b.finish().unwrap();
            let lang = StringArray::from(langs[range.clone()].to_vec());
            let start = UInt32Array::from(spans[range.clone()].to_vec());
            let nothing = StringArray::from(vec![None::<&str>; range.len()]);
            assert_eq!(batch.column_by_name("lang").unwrap().as_ref(), &lang);
            assert_eq!(batch.column_by_name("start").unwrap().as_ref(), &start);
            assert_eq!(batch.column_by_name("teacher").unwrap().as_ref(), &nothing);
            assert_eq!(batch.num_rows(), range.len());
        }
    }
}
