//! What each output table is, in one place: its name, what a row is, how its rows are cut
//! into tasks, and how its Parquet parts are encoded. The executor reads these properties and
//! names no table itself; adding a table is its [`TableKind`] variant, its record type and
//! schema arm (`schema.rs`, checked by the compiler), and one entry of [`TABLES`] (checked by a
//! test).

use crate::record::TableKind;

/// The properties of one output table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableSpec {
    pub kind: TableKind,
    /// Its directory in an output and its SQL table name in `inspect`.
    pub name: &'static str,
    /// What one row is.
    pub row: &'static str,
    /// Whether its rows are keyed by question and sharded with their questions: a stage cut
    /// by questions reads its own shard of such a table and every other table whole.
    pub by_question: bool,
    /// Whether `hseq verify` decodes its rows back from their segments.
    pub hseq_source: bool,
    /// Columns of values that rarely repeat within a row group (ids, a KG edge's ends):
    /// written plain, without a dictionary.
    pub plain: &'static [&'static str],
    /// Columns of increasing numbers (a KG edge's line in its dump): delta-encoded.
    pub sequential: &'static [&'static str],
    /// Columns without min/max statistics (they never prune a row group of this table).
    pub no_statistics: &'static [&'static str],
    /// Columns of long free text (dotted paths of nested columns): plain, without
    /// statistics, in large data pages.
    pub long_text: &'static [&'static str],
    /// The zstd level of its parts.
    pub zstd_level: i32,
}

const KG_NO_STATISTICS: &[&str] = &[
    "id",
    "dataset",
    "source",
    "object",
    "object_kind",
    "lang",
    "datatype",
    "subject_name",
    "object_name",
];

const fn table(kind: TableKind, name: &'static str, row: &'static str) -> TableSpec {
    TableSpec {
        kind,
        name,
        row,
        by_question: false,
        hseq_source: false,
        plain: &["id"],
        sequential: &[],
        no_statistics: &[],
        long_text: &[],
        zstd_level: 3,
    }
}

/// Every table, in the order of [`TableKind::ALL`].
pub static TABLES: [TableSpec; 12] = [
    TableSpec {
        hseq_source: true,
        ..table(
            TableKind::Documents,
            "documents",
            "a page or context passage",
        )
    },
    TableSpec {
        hseq_source: true,
        ..table(
            TableKind::Tables,
            "tables",
            "a table of a page or QA context",
        )
    },
    TableSpec {
        hseq_source: true,
        plain: &["id", "subject", "object", "object_name"],
        sequential: &["line"],
        no_statistics: KG_NO_STATISTICS,
        zstd_level: 1,
        ..table(
            TableKind::Triples,
            "triples",
            "a KG edge between two entities",
        )
    },
    table(
        TableKind::Entities,
        "entities",
        "a KG entity with its names",
    ),
    TableSpec {
        by_question: true,
        plain: &["id", "question_id"],
        ..table(
            TableKind::Questions,
            "questions",
            "a question with its answers and evidence",
        )
    },
    table(TableKind::Segments, "segments", "an HSEQ segment"),
    table(TableKind::Labels, "labels", "a labelled step of a question"),
    TableSpec {
        long_text: &["messages.list.element.content"],
        ..table(TableKind::Sft, "sft", "an SFT sample")
    },
    table(
        TableKind::Quarantine,
        "quarantine",
        "a bad record, where and why",
    ),
    TableSpec {
        by_question: true,
        hseq_source: true,
        plain: &["id", "subject", "object", "triple_id"],
        zstd_level: 1,
        ..table(
            TableKind::Subgraphs,
            "subgraphs",
            "an edge of a question's KG subgraph",
        )
    },
    TableSpec {
        hseq_source: true,
        plain: &["id", "subject", "object"],
        sequential: &["line"],
        no_statistics: KG_NO_STATISTICS,
        zstd_level: 1,
        ..table(TableKind::Literals, "literals", "a KG edge to a value")
    },
    table(
        TableKind::Changes,
        "changes",
        "a page change of a daily or logging dump",
    ),
];

impl TableKind {
    /// The table's properties.
    pub fn spec(self) -> &'static TableSpec {
        &TABLES[self as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_its_entry_in_order() {
        assert_eq!(TABLES.len(), TableKind::ALL.len());
        for (i, t) in TableKind::ALL.into_iter().enumerate() {
            assert_eq!(t as usize, i, "{t:?} is not at its place in ALL");
            assert_eq!(t.spec().kind, t);
            assert!(!t.spec().row.is_empty());
        }
        let names: std::collections::BTreeSet<_> = TABLES.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TABLES.len());
    }
}
