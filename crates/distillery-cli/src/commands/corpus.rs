//! `distillery corpus list|rollback|cat ROOT` (`distillery changes` is in [`super::changes`]).

use std::io::Write;
use std::process::ExitCode;

use anyhow::{Result, bail};
use distillery_exec::kit::retrieval::root_of;
use distillery_exec::store::open_location;
use distillery_index::corpus;

use crate::args::{CorpusCommand, OutputFormat};
use crate::out::outln;

pub async fn run(command: CorpusCommand) -> Result<ExitCode> {
    match command {
        CorpusCommand::List { root, format } => {
            let root = root_of(open_location(&root, false)?);
            let versions = corpus::list(&root).await?;
            if format == OutputFormat::Json {
                outln!("{}", serde_json::to_string_pretty(&versions)?);
                return Ok(ExitCode::SUCCESS);
            }
            if versions.is_empty() {
                outln!("no versions under {}", root.display);
            }
            outln!(
                "  {:<34} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}  {}",
                "version",
                "pages",
                "added",
                "changed",
                "moved",
                "deleted",
                "parts",
                "last day"
            );
            for v in versions {
                let mark = if v.current { '*' } else { ' ' };
                match v.manifest {
                    Some(m) => outln!(
                        "{mark} {:<34} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7}  {}",
                        v.version,
                        m.pages,
                        m.counts.added,
                        m.counts.changed,
                        m.counts.moved,
                        m.counts.deleted,
                        m.parts.len(),
                        m.days.last().map_or_else(
                            || "(base)".to_string(),
                            |d| format!("{} {}", d.wiki, d.date)
                        )
                    ),
                    None => outln!("{mark} {:<34} (unfinished: no manifest)", v.version),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        CorpusCommand::Rollback { root, version } => {
            let root = root_of(open_location(&root, false)?);
            let was = distillery_index::version::current(&root).await?;
            corpus::rollback(&root, &version).await?;
            outln!(
                "{}: CURRENT {} -> {version}",
                root.display,
                was.as_deref().unwrap_or("(none)")
            );
            Ok(ExitCode::SUCCESS)
        }
        CorpusCommand::Cat {
            root,
            version,
            segments,
        } => {
            let root = root_of(open_location(&root, false)?);
            let m = match &version {
                Some(v) => corpus::manifest(&root, v).await?,
                None => corpus::current(&root).await?,
            };
            let Some(m) = m else {
                bail!("{}: no such corpus version", root.display);
            };
            let stdout = std::io::stdout();
            let mut w = std::io::BufWriter::new(stdout.lock());
            if segments {
                if m.segments.is_none() {
                    bail!(
                        "{}: version {} keeps no segments (its corpus stage has no `segments`)",
                        root.display,
                        m.version
                    );
                }
                let mut view = corpus::SegmentView::open(&root, &m).await?;
                while let Some(segs) = view.next(&root, &m).await? {
                    for s in segs {
                        serde_json::to_writer(&mut w, &s)?;
                        w.write_all(b"\n")?;
                    }
                }
                w.flush()?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut view = corpus::LiveView::open(&root, &m).await?;
            while let Some(docs) = view.next(&root, &m).await? {
                for d in docs {
                    serde_json::to_writer(&mut w, &d)?;
                    w.write_all(b"\n")?;
                }
            }
            w.flush()?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
