//! `distillery index list ROOT` and `distillery index rollback ROOT VERSION`.

use std::process::ExitCode;

use anyhow::Result;
use distillery_exec::kit::retrieval::root_of;
use distillery_exec::store::open_location;
use distillery_index::version;

use crate::args::{IndexCommand, OutputFormat};
use crate::out::outln;

pub async fn run(command: IndexCommand) -> Result<ExitCode> {
    match command {
        IndexCommand::List { root, format } => {
            let root = root_of(open_location(&root, false)?);
            let versions = version::list(&root).await?;
            if format == OutputFormat::Json {
                outln!("{}", serde_json::to_string_pretty(&versions)?);
                return Ok(ExitCode::SUCCESS);
            }
            if versions.is_empty() {
                outln!("no versions under {}", root.display);
            }
            outln!(
                "  {:<26} {:<14} {:>10} {:>8} {:>8} {:>8} {:>9}",
                "version",
                "kinds",
                "passages",
                "added",
                "changed",
                "deleted",
                "embedded"
            );
            for v in versions {
                let mark = if v.current { '*' } else { ' ' };
                match v.manifest {
                    Some(m) => outln!(
                        "{mark} {:<26} {:<14} {:>10} {:>8} {:>8} {:>8} {:>9}",
                        v.version,
                        m.kinds.join(","),
                        m.passages,
                        m.changes.added,
                        m.changes.changed,
                        m.changes.deleted,
                        m.embedded
                    ),
                    None => outln!("{mark} {:<26} (unfinished: no manifest)", v.version),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        IndexCommand::Rollback { root, version: v } => {
            let root = root_of(open_location(&root, false)?);
            let was = version::current(&root).await?;
            version::switch(&root, &v).await?;
            outln!(
                "{}: CURRENT {} -> {v}",
                root.display,
                was.as_deref().unwrap_or("(none)")
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
