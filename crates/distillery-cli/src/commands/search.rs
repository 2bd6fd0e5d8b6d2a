//! `distillery search ROOT QUERY [--kind bm25|dense|hybrid] [-k N] [--format table|json]`.

use std::process::ExitCode;

use anyhow::Result;
use distillery_exec::kit::retrieval::{IndexRetriever, root_of};
use distillery_exec::store::open_location;
use distillery_index::search::Retrieval;

use crate::args::{OutputFormat, SearchArgs, SearchKind};
use crate::out::outln;

pub async fn run(a: &SearchArgs) -> Result<ExitCode> {
    let root = root_of(open_location(&a.root, false)?);
    let how = match a.kind {
        SearchKind::Bm25 => Retrieval::Bm25,
        SearchKind::Dense => Retrieval::Dense,
        SearchKind::Hybrid => Retrieval::Hybrid,
    };
    let index = IndexRetriever::open(&root, a.version.as_deref(), how).await?;
    let hits = index.search(&a.query, a.k).await?;
    match a.format {
        OutputFormat::Json => {
            for h in &hits {
                outln!("{}", serde_json::to_string(h)?);
            }
        }
        OutputFormat::Table => {
            outln!("version {} ({} hits)", index.version(), hits.len());
            for (i, h) in hits.iter().enumerate() {
                let text: String = h.text.chars().take(100).collect();
                outln!(
                    "{:>3}. {:>8.4}  {}  [{}]\n      {}",
                    i + 1,
                    h.score,
                    h.title,
                    h.id,
                    text
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
