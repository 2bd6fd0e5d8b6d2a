//! The [`Collector`] of a check's problems: each pushed at its key path (or at the `--set`
//! that wrote the key), and deserialization that reports every bad key of a table.

use serde::de::DeserializeOwned;

use super::SpecError;
use super::locate::{Locator, PathSeg, render_path};

pub(super) struct Collector<'a> {
    pub(super) loc: &'a Locator,
    pub(super) errors: Vec<SpecError>,
    /// Key paths set from the command line: errors below them point at `--set`, not the file.
    pub(super) overridden: Vec<(Vec<PathSeg>, String)>,
}

impl Collector<'_> {
    pub(super) fn push(&mut self, path: Vec<PathSeg>, message: impl Into<String>) {
        let mut message = message.into();
        let line = match self.overridden.iter().find(|(p, _)| path.starts_with(p)) {
            Some((_, arg)) => {
                message = format!("{message} (from --set {arg})");
                None
            }
            None => self.loc.locate(&path),
        };
        self.errors.push(SpecError {
            path: if path.is_empty() {
                "(top level)".to_string()
            } else {
                render_path(&path)
            },
            line,
            message,
        });
    }

    /// Deserializes `value` as `T`, reporting errors at the precise inner keys. serde stops
    /// at the first error; to report every bad key of a table, each key is then checked on
    /// its own (ignoring the "missing field" errors that checking one key alone produces).
    /// When every bad key is an unknown one (a typo) and the table without them deserializes,
    /// that value is returned (after the errors were recorded), so the checks that follow
    /// report their errors in the same round; a known key with a bad value returns `None`,
    /// since the checks would judge its default instead.
    /// How many problems are collected so far.
    pub(super) fn errors_len(&self) -> usize {
        self.errors.len()
    }

    /// Completes the unknown-field messages collected since `from` that name no expected
    /// field (serde's, through a flattened group) with `known`.
    pub(super) fn name_expected(&mut self, from: usize, known: &[String]) {
        if known.is_empty() {
            return;
        }
        let names: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        let expected = format!(", expected one of {}", names.join(", "));
        for e in self.errors.iter_mut().skip(from) {
            let m = &mut e.message;
            if m.starts_with("unknown field `") && !m.contains(", expected") {
                let at = m.find(" (from --set").unwrap_or(m.len());
                m.insert_str(at, &expected);
            }
        }
    }

    pub(super) fn de<T: DeserializeOwned>(
        &mut self,
        base: &[PathSeg],
        value: toml::Value,
    ) -> Option<T> {
        let first = match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(v) => return Some(v),
            Err(e) => error_at(base, e),
        };
        let mut found: Vec<(Vec<PathSeg>, String)> = Vec::new();
        let mut rest: Option<toml::Table> = None;
        let mut typos_only = true;
        if let toml::Value::Table(t) = &value
            && t.len() > 1
        {
            let mut kept = t.clone();
            for (k, v) in t {
                let mut single = toml::Table::new();
                single.insert(k.clone(), v.clone());
                if let Err(e) = serde_path_to_error::deserialize::<_, T>(toml::Value::Table(single))
                {
                    let (mut p, m) = error_at(base, e);
                    // A field of a flattened option group reaches serde through a buffer
                    // that loses its key: the key tried alone is the one at fault.
                    if p.len() == base.len() {
                        p.push(PathSeg::Key(k.clone()));
                    }
                    if !m.starts_with("missing field") {
                        if m.starts_with("unknown field") {
                            kept.remove(k);
                        } else {
                            typos_only = false;
                        }
                        if !found.contains(&(p.clone(), m.clone())) {
                            found.push((p, m));
                        }
                    }
                }
            }
            rest = Some(kept);
        }
        if found.is_empty() || !typos_only {
            rest = None;
        }
        if found.is_empty() {
            found.push(first);
        }
        for (p, m) in found {
            self.push(p, m);
        }
        serde_path_to_error::deserialize::<_, T>(toml::Value::Table(rest?)).ok()
    }
}

/// The key path and message of a deserialization error below `base`.
fn error_at(
    base: &[PathSeg],
    e: serde_path_to_error::Error<toml::de::Error>,
) -> (Vec<PathSeg>, String) {
    let mut path = base.to_vec();
    for seg in e.path().iter() {
        match seg {
            serde_path_to_error::Segment::Map { key } => path.push(PathSeg::Key(key.clone())),
            serde_path_to_error::Segment::Seq { index } => path.push(PathSeg::Index(*index)),
            _ => {}
        }
    }
    let msg = e.into_inner().message().trim().to_string();
    // serde's unknown-field message names the field; point at it.
    if let Some(field) = msg
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
        && path.last() != Some(&PathSeg::Key(field.to_string()))
    {
        path.push(PathSeg::Key(field.to_string()));
    }
    (path, msg)
}
