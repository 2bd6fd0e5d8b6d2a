//! Where a problem is: key paths ([`PathSeg`]) and their rendering (`inputs[1].paths`), the
//! [`Locator`] that finds a key's line and column in the file's text, and the error lines
//! ([`SpecError`], [`SpecErrors`]) that carry both.

use std::fmt;

/// One problem of a pipeline file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// Dotted key path, e.g. `inputs[1].options.namespaces`.
    pub path: String,
    /// 1-based line and column of the key in the file, when it is in the file.
    pub line: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some((l, c)) => write!(f, "{}:{}: {}: {}", l, c, self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// All problems of a pipeline file, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecErrors {
    pub file: String,
    pub errors: Vec<SpecError>,
}

impl fmt::Display for SpecErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} problem{}",
            self.file,
            self.errors.len(),
            if self.errors.len() == 1 { "" } else { "s" }
        )?;
        for e in &self.errors {
            writeln!(f, "  {}:{}", self.file, e)?;
        }
        Ok(())
    }
}

impl std::error::Error for SpecErrors {}

/// Maps key paths to positions in the source text.
pub(super) struct Locator {
    doc: Option<toml_edit::Document<String>>,
    text: String,
}

impl Locator {
    pub(super) fn new(text: &str) -> Locator {
        Locator {
            doc: toml_edit::Document::parse(text.to_string()).ok(),
            text: text.to_string(),
        }
    }

    pub(super) fn pos(&self, offset: usize) -> (usize, usize) {
        let before = &self.text[..offset.min(self.text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rfind('\n').map(|i| offset - i).unwrap_or(offset + 1);
        (line, col)
    }

    /// Position of the deepest key of `path` (keys and array indexes) present in the file.
    pub(super) fn locate(&self, path: &[PathSeg]) -> Option<(usize, usize)> {
        let doc = self.doc.as_ref()?;
        let mut best = None;
        locate_in(doc.as_item(), path, &mut best);
        best.map(|o| self.pos(o))
    }
}

fn locate_in(item: &toml_edit::Item, path: &[PathSeg], best: &mut Option<usize>) {
    let Some((seg, rest)) = path.split_first() else {
        return;
    };
    match (seg, item) {
        (PathSeg::Key(k), _) => {
            if let Some((key, child)) = item.as_table_like().and_then(|t| t.get_key_value(k)) {
                if let Some(sp) = key.span().or_else(|| child.span()) {
                    *best = Some(sp.start);
                }
                locate_in(child, rest, best);
            }
        }
        (PathSeg::Index(i), toml_edit::Item::ArrayOfTables(a)) => {
            if let Some(t) = a.get(*i) {
                if let Some(sp) = t.span() {
                    *best = Some(sp.start);
                }
                // Re-wrap the table as an item to keep walking by key.
                locate_in(&toml_edit::Item::Table(t.clone()), rest, best);
            }
        }
        (PathSeg::Index(i), toml_edit::Item::Value(toml_edit::Value::Array(a))) => {
            if let Some(sp) = a.get(*i).and_then(|v| v.span()) {
                *best = Some(sp.start);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PathSeg {
    Key(String),
    Index(usize),
}

pub(super) fn render_path(path: &[PathSeg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

pub(super) fn key(k: &str) -> PathSeg {
    PathSeg::Key(k.to_string())
}
