//! Error types: [`DecodeError`] (segments that do not form a valid HSEQ source) and
//! [`Mismatch`] (a source whose segments decode to something not ≡ to it).
//!
//! Both are data problems, never transient: [`HasKind::kind`] is always
//! [`ErrorKind::Fatal`].

use distillery_core::{ErrorKind, HasKind};

/// Why a set of segments is not a valid HSEQ encoding of one source.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The slice holds no segment at all.
    #[error("no segments to decode")]
    Empty,
    /// No root of the expected level.
    #[error("no `{level}` root segment")]
    NoRoot { level: &'static str },
    /// More than one root where the source has exactly one.
    #[error("{count} `{level}` root segments, expected one")]
    ManyRoots { level: &'static str, count: usize },
    /// A level that does not belong in this kind of source.
    #[error("segment {id}: level `{level}` does not belong in a `{source_type}` source")]
    UnexpectedLevel {
        id: String,
        level: String,
        source_type: &'static str,
    },
    /// Two segments share an id.
    #[error("segment id {id} appears twice")]
    DuplicateId { id: String },
    /// A root segment names a parent.
    #[error("root segment {id} has a parent")]
    RootHasParent { id: String },
    /// A non-root segment has no parent, or names one that is not in the slice.
    #[error("segment {id}: parent {parent:?} not found")]
    MissingParent { id: String, parent: Option<String> },
    /// The parent comes after the child (or is the child itself).
    #[error("segment {id}: parent {parent} does not come before it")]
    ParentAfterChild { id: String, parent: String },
    /// The parent's level cannot contain the child's level.
    #[error("segment {id}: a `{level}` cannot have a `{parent_level}` parent ({parent})")]
    WrongParent {
        id: String,
        level: String,
        parent: String,
        parent_level: String,
    },
    /// A segment's `source_id` differs from its root's.
    #[error("segment {id}: source_id {found}, expected {expected}")]
    SourceMismatch {
        id: String,
        expected: String,
        found: String,
    },
    /// Offsets of the wrong arity or form for the level.
    #[error("segment {id}: offsets {offsets:?} are malformed for a `{level}`")]
    BadOffsets {
        id: String,
        level: String,
        offsets: Vec<i64>,
    },
    /// A text span outside the document.
    #[error("segment {id}: span [{start}, {end}) is outside the text [0, {len})")]
    OutOfRange {
        id: String,
        start: i64,
        end: i64,
        len: i64,
    },
    /// A text span not inside its parent's span.
    #[error(
        "segment {id}: span [{start}, {end}) is not inside its parent's [{parent_start}, {parent_end})"
    )]
    NotContained {
        id: String,
        start: i64,
        end: i64,
        parent_start: i64,
        parent_end: i64,
    },
    /// A text segment whose content is not as long as its span.
    #[error("segment {id}: content has {found} chars, its span {expected}")]
    ContentLength {
        id: String,
        expected: u64,
        found: u64,
    },
    /// Two overlapping text segments disagree on a char.
    #[error("segment {id}: content disagrees with an overlapping segment at char {at}")]
    ContentConflict { id: String, at: u64 },
    /// The `sha1` integrity helper does not match the content.
    #[error("segment {id}: sha1 does not match its content")]
    Sha1 { id: String },
    /// A row's content is not JSON.
    #[error("row {id}: content is not JSON: {source}")]
    RowJson {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// A row's content is JSON but not an object of strings.
    #[error("row {id}: content is not a JSON object of strings (at key {key:?})")]
    RowShape { id: String, key: Option<String> },
    /// A row key that the header (via [`crate::column_keys`]) does not produce.
    #[error("row {id}: key {key:?} names no column of the schema")]
    RowKey { id: String, key: String },
    /// A row's keys are not the first `n` column keys.
    #[error("row {id}: keys do not cover columns 0..{width}")]
    RowColumns { id: String, width: usize },
    /// Two row segments claim the same row index.
    #[error("row index {row} appears twice")]
    DuplicateRow { row: i64 },
    /// Row indices are not contiguous from 0.
    #[error("row index {row} is missing")]
    MissingRow { row: i64 },
    /// A cell disagrees with its row.
    #[error("cell {id} at [{row}, {col}] disagrees with its row")]
    CellMismatch { id: String, row: i64, col: i64 },
    /// A triplet whose schema is not the triplet layout.
    #[error("triplet {id}: schema is not [subject, predicate, object, <edge>]")]
    TripletSchema { id: String },
    /// A triplet whose raw edge is not valid JSON.
    #[error("triplet {id}: raw edge is not valid JSON: {source}")]
    TripletJson {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// A triplet whose content is not the rendering of its raw edge.
    #[error("triplet {id}: content does not match its raw edge")]
    TripletContent { id: String },
}

impl HasKind for DecodeError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Fatal
    }
}

/// Why a source and its segments do not round-trip.
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    /// The segments are not a valid encoding at all.
    #[error("segments do not decode: {0}")]
    Decode(#[from] DecodeError),
    /// The segments belong to another source.
    #[error("segments name source {found}, expected {expected}")]
    SourceId { expected: String, found: String },
    /// The decoded uri differs.
    #[error("uri {found:?}, expected {expected:?}")]
    Uri { expected: String, found: String },
    /// The decoded title differs.
    #[error("title {found:?}, expected {expected:?}")]
    Title { expected: String, found: String },
    /// The decoded text differs beyond whitespace; `at` counts non-whitespace chars.
    #[error("text differs from the source at non-whitespace char {at}")]
    Text { at: usize },
    /// A span segment's content is not the source's slice (invariant T1).
    #[error("segment {id}: content is not source[{start}:{end}]")]
    Span { id: String, start: i64, end: i64 },
    /// The spans of one level differ from the source's.
    #[error("{level} spans differ: {expected} in the source, {found} decoded")]
    Spans {
        level: &'static str,
        expected: usize,
        found: usize,
    },
    /// The decoded table is not equal to the source up to a column permutation.
    #[error(
        "table differs: {expected_rows} rows x {expected_cols} columns expected, \
         {found_rows} x {found_cols} decoded, or cells differ beyond a column permutation"
    )]
    Table {
        expected_rows: usize,
        expected_cols: usize,
        found_rows: usize,
        found_cols: usize,
    },
    /// The decoded edge multiset differs; `example` renders one differing edge.
    #[error("KG edges differ: {missing} missing, {extra} extra (e.g. {example})")]
    Edges {
        missing: usize,
        extra: usize,
        example: String,
    },
}

impl HasKind for Mismatch {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Fatal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_fatal() {
        assert_eq!(DecodeError::Empty.kind(), ErrorKind::Fatal);
        let m = Mismatch::from(DecodeError::Empty);
        assert!(!m.is_retryable());
        assert!(m.to_string().contains("no segments"));
    }
}
