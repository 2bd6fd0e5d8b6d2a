//! `hseq verify`: decode every source of a published output from its segments and compare it
//! with the source record under the paper's equivalence.
//!
//! Each segments part `segments/part-SSSSS-TAG` is walked in lockstep with the source parts of
//! the same shard and tag (documents, then tables, then triples, then literals: the order the
//! stage wrote them; a `subgraph` stage's `subgraphs` rows, as the triples of each question's
//! subgraph). Segments are grouped by root (`document`, `table`, `subgraph`); each group is
//! checked against the next source record(s). Memory is bounded by one group.

use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;

use distillery_core::schema::batch_to_records;
use distillery_core::{Record, Segment, TableKind, Triple};
use distillery_hseq::{Verifier, VerifyCounts, level};
use futures::{Stream, StreamExt};

use crate::error::ExecError;
use crate::parts::{PartId, read_part_rows};
use crate::publish::read_manifest;
use crate::store::{Location, open_location};

/// What `hseq verify` found.
#[derive(Debug, Default, Clone)]
pub struct VerifyReport {
    pub counts: VerifyCounts,
    pub parts: u64,
    /// Source records with no segments (sources of inputs the stage did not select are not
    /// counted here: only parts that have a segments part are walked).
    pub unmatched_sources: u64,
    pub failures: Vec<String>,
}

impl VerifyReport {
    pub fn failed(&self) -> u64 {
        self.counts.failed() + self.unmatched_sources
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counts;
        writeln!(f, "hseq verify: {} segments part(s)", self.parts)?;
        writeln!(
            f,
            "  documents   ok {:>9}  failed {}",
            c.documents_ok, c.documents_failed
        )?;
        writeln!(
            f,
            "  tables      ok {:>9}  failed {}",
            c.tables_ok, c.tables_failed
        )?;
        writeln!(
            f,
            "  kg          ok {:>9} edges in {} subgraph(s)  failed {}",
            c.edges_ok, c.subgraphs_ok, c.kg_failed
        )?;
        write!(f, "  unmatched sources {}", self.unmatched_sources)?;
        for m in &self.failures {
            write!(f, "\n  mismatch: {m}")?;
        }
        Ok(())
    }
}

type RecordStream = Pin<Box<dyn Stream<Item = Result<Record, ExecError>> + Send>>;

async fn records_of(
    loc: &Location,
    rel: &str,
    table: TableKind,
) -> Result<RecordStream, ExecError> {
    // Whole pages and their segments are large: a few at a time keeps memory bounded.
    let rows = match table {
        TableKind::Documents => 64,
        TableKind::Tables | TableKind::Segments => 1024,
        _ => 4096,
    };
    let s = read_part_rows(loc, rel, rows).await?;
    Ok(Box::pin(
        s.map(move |b| {
            b.and_then(|b| batch_to_records(table, &b).map_err(ExecError::from))
                .map(|v| v.into_iter().map(subgraph_as_triple).collect::<Vec<_>>())
                .map(|v| futures::stream::iter(v.into_iter().map(Ok)))
        })
        .map(|r| match r {
            Ok(s) => s.left_stream(),
            Err(e) => futures::stream::iter(vec![Err(e)]).right_stream(),
        })
        .flatten(),
    ))
}

/// A `subgraphs` row is checked as the triple its segments encode.
fn subgraph_as_triple(r: Record) -> Record {
    match r {
        Record::Subgraph(e) => Record::Triple(e.edge_triple()),
        other => other,
    }
}

/// Verifies a published output.
pub async fn verify_output(url: &str) -> Result<VerifyReport, ExecError> {
    let loc = open_location(url, false)?;
    let manifest = read_manifest(&loc).await?;
    let mut sources: BTreeMap<(u32, String), Vec<(TableKind, String)>> = BTreeMap::new();
    let mut segment_parts = Vec::new();
    for t in &manifest.tables {
        for f in &t.files {
            let Some(PartId {
                table, shard, tag, ..
            }) = PartId::parse(&f.path)
            else {
                continue;
            };
            match table {
                TableKind::Segments => segment_parts.push((shard, tag, f.path.clone())),
                t if t.spec().hseq_source => sources
                    .entry((shard, tag))
                    .or_default()
                    .push((table, f.path.clone())),
                _ => {}
            }
        }
    }
    let mut report = VerifyReport::default();
    let mut verifier = Verifier::new();
    for (shard, tag, seg_rel) in segment_parts {
        report.parts += 1;
        let mut srcs = sources.remove(&(shard, tag)).unwrap_or_default();
        srcs.sort();
        let mut src_streams = Vec::new();
        for (table, rel) in &srcs {
            src_streams.push(records_of(&loc, rel, *table).await?);
        }
        let mut src = futures::stream::iter(src_streams).flatten();
        let mut segs = records_of(&loc, &seg_rel, TableKind::Segments).await?;
        let mut group: Vec<Segment> = Vec::new();
        loop {
            let next = match segs.next().await {
                Some(r) => match r? {
                    Record::Segment(s) => Some(s),
                    _ => None,
                },
                None => None,
            };
            let is_root = next.as_ref().is_some_and(|s| s.parent.is_none());
            if (is_root || next.is_none()) && !group.is_empty() {
                check_group(&mut verifier, &mut report, &group, &mut src).await?;
                group.clear();
            }
            match next {
                Some(s) => group.push(s),
                None => break,
            }
        }
        while let Some(r) = src.next().await {
            r?;
            report.unmatched_sources += 1;
        }
    }
    report.counts = verifier.into_counts();
    Ok(report)
}

async fn check_group<S>(
    verifier: &mut Verifier,
    report: &mut VerifyReport,
    group: &[Segment],
    src: &mut S,
) -> Result<(), ExecError>
where
    S: Stream<Item = Result<Record, ExecError>> + Unpin,
{
    let root = &group[0];
    let outcome = if root.level == level::SUBGRAPH {
        let edges = group.iter().filter(|s| s.level == level::TRIPLET).count();
        let mut triples: Vec<Triple> = Vec::with_capacity(edges);
        for _ in 0..edges {
            match src.next().await {
                Some(Ok(Record::Triple(t) | Record::Literal(t))) => triples.push(t),
                Some(Ok(other)) => {
                    return Err(ExecError::Verify(format!(
                        "segments of subgraph {} meet a {} record",
                        root.id,
                        other.kind()
                    )));
                }
                Some(Err(e)) => return Err(e),
                None => break,
            }
        }
        verifier.verify_kg(&triples, group).map(|_| ())
    } else {
        match src.next().await {
            Some(Ok(Record::Document(d))) => verifier.verify_document(&d, group),
            Some(Ok(Record::Table(t))) => verifier.verify_table(&t, group),
            Some(Ok(other)) => {
                return Err(ExecError::Verify(format!(
                    "segments rooted at {} ({}) meet a {} record",
                    root.id,
                    root.level,
                    other.kind()
                )));
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ExecError::Verify(format!(
                    "segments rooted at {} have no source record",
                    root.id
                )));
            }
        }
    };
    if let Err(m) = outcome
        && report.failures.len() < 10
    {
        report.failures.push(m.to_string());
    }
    Ok(())
}
