//! `fb15k`: FB15k / FB15k-237 triple files (`/m/x<TAB>/rel/path<TAB>/m/y`, one a line) into
//! triples and entities, with names from side files.
//!
//! The name files (`names` option) are `mid<TAB>name` lines: `FB15k_mid2name.txt` (words
//! joined by `_`, turned back into spaces: recognised by `mid2name` in its file name) or
//! `entity2text.txt` (plain text, kept as is). When several files name a mid, the first file
//! listed wins. A relative name file is looked for as given, else beside the triple file; a
//! missing one is an [`IngestError::Io`].
//!
//! Each triple gets `subject_name`/`object_name` from the names and `object_kind = "entity"`.
//! Each mid gets one [`Entity`] row (its name as label, when known) the first time a triple
//! mentions it. Memory: the name map and the set of mids seen, both bounded by the number of
//! entities of the graph (14,951 for FB15k-237, about 1.5 MB each), never by the number of
//! triples. Lines without exactly three non-empty tab-separated fields are quarantined as
//! `bad_tsv`.

use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use distillery_core::id::stable_id;
use distillery_core::spec::{Fb15kOptions, FormatOptions};
use distillery_core::{Entity, Record, RecordSink, Triple};

use super::{ByteLines, bad_line, truncated, utf8_line};
use crate::input::open_decompressed;
use crate::{IngestError, InputCtx};

const DATASET: &str = "fb15k";

/// Reads an FB15k triple file.
pub fn read(ctx: &InputCtx<'_>, sink: &mut dyn RecordSink) -> Result<(), IngestError> {
    let default = Fb15kOptions::default();
    let opts = match ctx.options {
        FormatOptions::Fb15k(o) => o,
        _ => &default,
    };
    let mut names: HashMap<String, String> = HashMap::new();
    for file in &opts.names {
        load_names(ctx, file, &mut names)?;
    }
    let mut seen: HashSet<String> = HashSet::new();
    let mut lines = ByteLines::new(ctx.open()?).limit(ctx.options.record_limit().0);
    loop {
        let line = match lines.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => {
                let (offset, number) = lines.position();
                sink.emit(truncated(DATASET, ctx, e, offset, number)?)?;
                break;
            }
        };
        let Some(text) = utf8_line(DATASET, ctx, &line, sink)? else {
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = text.split('\t').collect();
        let [s, p, o] = fields[..] else {
            let detail = format!("expected 3 tab-separated fields, found {}", fields.len());
            sink.emit(bad_line(DATASET, ctx, "bad_tsv", detail, &line))?;
            continue;
        };
        let (s, p, o) = (s.trim(), p.trim(), o.trim());
        if s.is_empty() || p.is_empty() || o.is_empty() {
            sink.emit(bad_line(DATASET, ctx, "bad_tsv", "empty field", &line))?;
            continue;
        }
        for mid in [s, o] {
            if !seen.contains(mid) {
                seen.insert(mid.to_string());
                sink.emit(Record::Entity(Entity {
                    id: stable_id(&[DATASET, "entity", mid, ""]),
                    dataset: DATASET.to_string(),
                    source: ctx.source.clone(),
                    key: mid.to_string(),
                    lang: None,
                    label: names.get(mid).cloned(),
                    description: None,
                    aliases: Vec::new(),
                    wikipedia: None,
                }))?;
            }
        }
        sink.emit(Record::Triple(Triple {
            id: stable_id(&[DATASET, &ctx.source, s, p, o, "", ""]),
            dataset: DATASET.to_string(),
            source: ctx.source.clone(),
            subject: s.to_string(),
            predicate: p.to_string(),
            object: o.to_string(),
            object_kind: "entity".to_string(),
            subject_name: names.get(s).cloned(),
            object_name: names.get(o).cloned(),
            line: line.number,
            ..Triple::default()
        }))?;
    }
    tracing::debug!(
        location = %ctx.location,
        entities = seen.len(),
        names = names.len(),
        "fb15k read done"
    );
    Ok(())
}

/// Where a name file is: as given when absolute, a URL or existing, else beside the input.
fn resolve(ctx: &InputCtx<'_>, file: &str) -> String {
    if file.starts_with('/') || file.contains("://") || ctx.opener.exists(file) {
        file.to_string()
    } else {
        ctx.opener.sibling(&ctx.location, file)
    }
}

/// Adds a `mid<TAB>name` file to `names` (first name of a mid wins).
fn load_names(
    ctx: &InputCtx<'_>,
    file: &str,
    names: &mut HashMap<String, String>,
) -> Result<(), IngestError> {
    let location = resolve(ctx, file);
    if !ctx.opener.exists(&location) {
        return Err(IngestError::io(
            &location,
            io::Error::new(io::ErrorKind::NotFound, "fb15k name file not found"),
        ));
    }
    let underscores = crate::input::file_name(&location)
        .to_ascii_lowercase()
        .contains("mid2name");
    let (reader, _) = open_decompressed(ctx.opener, &location, Arc::new(AtomicU64::new(0)))?;
    let mut lines = ByteLines::new(reader).limit(ctx.options.record_limit().0);
    let mut skipped = 0u64;
    while let Some(line) = lines
        .next_line()
        .map_err(|e| IngestError::io(&location, e))?
    {
        let text = String::from_utf8_lossy(line.bytes);
        let Some((mid, name)) = text.split_once('\t') else {
            if !text.trim().is_empty() {
                skipped += 1;
            }
            continue;
        };
        let (mid, name) = (mid.trim(), name.trim());
        if mid.is_empty() || name.is_empty() {
            skipped += 1;
            continue;
        }
        if !names.contains_key(mid) {
            let name = if underscores {
                name.replace('_', " ")
            } else {
                name.to_string()
            };
            names.insert(mid.to_string(), name);
        }
    }
    if skipped > 0 {
        tracing::warn!(location = %location, skipped, "fb15k name file: lines without mid<TAB>name skipped");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::VecSink;

    fn run(dir: &std::path::Path, names: &[&str]) -> VecSink {
        let options = FormatOptions::Fb15k(Fb15kOptions {
            names: names.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        });
        let p = dir.join("train.txt");
        let ctx = InputCtx::local(p.to_str().unwrap(), &options);
        let mut sink = VecSink::default();
        read(&ctx, &mut sink).unwrap();
        sink
    }

    #[test]
    fn names_entities_and_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("train.txt"),
            "/m/a\t/film/film/directed_by\t/m/b\r\n/m/b\t/people/person/nationality\t/m/c\r\n/m/a\t/x\r\n\r\n/m/a\t/film/film/genre\t/m/c\r\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("FB15k_mid2name.txt"),
            "/m/a\tThe_Film\n/m/b\tJane_Doe\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("entity2text.txt"),
            "/m/a\tOther name\n/m/c\tUnder_score Land\n",
        )
        .unwrap();
        let s = run(dir.path(), &["FB15k_mid2name.txt", "entity2text.txt"]);
        let t = s.triples();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].subject_name.as_deref(), Some("The Film"));
        assert_eq!(t[0].object_name.as_deref(), Some("Jane Doe"));
        assert_eq!(t[0].object_kind, "entity");
        assert_eq!(t[1].object_name.as_deref(), Some("Under_score Land"));
        assert_eq!(t[2].line, Some(5));
        let e = s.entities();
        assert_eq!(
            e.iter().map(|e| e.key.as_str()).collect::<Vec<_>>(),
            vec!["/m/a", "/m/b", "/m/c"]
        );
        assert_eq!(e[0].id, stable_id(&["fb15k", "entity", "/m/a", ""]));
        let q = s.quarantine();
        assert_eq!(q.len(), 1);
        assert_eq!((q[0].reason.as_str(), q[0].line), ("bad_tsv", Some(3)));
        assert_eq!(q[0].excerpt, "/m/a\t/x");
    }

    #[test]
    fn missing_name_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("train.txt"), "/m/a\t/r\t/m/b\n").unwrap();
        let options = FormatOptions::Fb15k(Fb15kOptions {
            names: vec!["nope.txt".into()],
            ..Default::default()
        });
        let p = dir.path().join("train.txt");
        let ctx = InputCtx::local(p.to_str().unwrap(), &options);
        let err = read(&ctx, &mut VecSink::default()).unwrap_err();
        assert!(matches!(err, IngestError::Io { .. }), "{err}");
        assert!(err.to_string().contains("nope.txt"));
    }
}
