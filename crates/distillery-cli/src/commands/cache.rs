//! `distillery cache pack CACHE`: the response cache's loose entries into packs
//! ([`distillery_llm::ResponseCache::pack`]).

use std::process::ExitCode;

use anyhow::Result;
use distillery_exec::store::open_location;
use distillery_llm::ResponseCache;

use crate::args::{CacheCommand, OutputFormat};
use crate::out::outln;

pub async fn run(command: CacheCommand) -> Result<ExitCode> {
    match command {
        CacheCommand::Pack {
            cache,
            keep_loose,
            format,
        } => {
            let loc = open_location(&cache, false)?;
            let rc = ResponseCache::new(loc.store.clone(), loc.root.as_ref());
            let report = rc.pack(keep_loose).await?;
            if format == OutputFormat::Json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
                return Ok(ExitCode::SUCCESS);
            }
            outln!(
                "{cache}: {} loose entries, {} packed into {} new packs, {} already packed, \
                 {} loose objects removed, {} kept (changed since read)",
                report.loose,
                report.packed,
                report.packs.len(),
                report.already_packed,
                report.removed,
                report.changed
            );
            for p in &report.packs {
                outln!("  {p}");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
