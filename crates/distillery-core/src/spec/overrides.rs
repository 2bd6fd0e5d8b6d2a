//! `--set key.path=value` overrides, applied to the TOML tree before it is checked.

use super::locate::PathSeg;

/// Error of an override argument (`--set key.path=value`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--set {arg}: {message}")]
pub struct OverrideError {
    pub arg: String,
    pub message: String,
}

/// Applies one `key.path=value` override to a TOML tree. The value is parsed as TOML
/// (`8`, `true`, `["a", "b"]`, `"text"`) and taken as a plain string when it does not parse.
/// Array elements are addressed by index (`inputs.0.paths`) or, for arrays of tables with a
/// `name` key, by name (`inputs.wiki.paths`). Missing tables are created.
pub fn apply_override(root: &mut toml::Table, arg: &str) -> Result<(), OverrideError> {
    apply_override_at(root, arg).map(|_| ())
}

/// [`apply_override`], returning the resolved key path (array elements by index).
pub(super) fn apply_override_at(
    root: &mut toml::Table,
    arg: &str,
) -> Result<Vec<PathSeg>, OverrideError> {
    let err = |m: String| OverrideError {
        arg: arg.to_string(),
        message: m,
    };
    let (key, raw) = arg
        .split_once('=')
        .ok_or_else(|| err("expected key.path=value".into()))?;
    let parts: Vec<&str> = key.trim().split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(err("empty key segment".into()));
    }
    let mut tree = toml::Value::Table(std::mem::take(root));
    let mut resolved = Vec::new();
    let result = set_path(&mut tree, &parts, raw.trim(), &mut resolved).map_err(err);
    if let toml::Value::Table(t) = tree {
        *root = t;
    }
    result.map(|_| resolved)
}

/// The value an override writes: the raw text when it replaces a string (so `name=2024-06-01`
/// stays a string rather than becoming a TOML date), else the text parsed as TOML.
fn override_value(existing: Option<&toml::Value>, raw: &str) -> toml::Value {
    match existing {
        Some(toml::Value::String(_)) if !(raw.starts_with('"') || raw.starts_with('\'')) => {
            toml::Value::String(raw.to_string())
        }
        _ => parse_override_value(raw),
    }
}

fn set_path(
    node: &mut toml::Value,
    parts: &[&str],
    raw: &str,
    resolved: &mut Vec<PathSeg>,
) -> Result<(), String> {
    let (part, rest) = (parts[0], &parts[1..]);
    match node {
        toml::Value::Table(t) => {
            resolved.push(PathSeg::Key(part.to_string()));
            if rest.is_empty() {
                let value = override_value(t.get(part), raw);
                t.insert(part.to_string(), value);
                return Ok(());
            }
            let child = t
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            set_path(child, rest, raw, resolved)
        }
        toml::Value::Array(a) => {
            // By index, by `name`, or (for unnamed stages) by `kind`.
            let idx = part.parse::<usize>().ok().or_else(|| {
                a.iter().position(|v| {
                    let name = v.get("name").and_then(|n| n.as_str());
                    name == Some(part)
                        || (name.is_none() && v.get("kind").and_then(|k| k.as_str()) == Some(part))
                })
            });
            let len = a.len();
            let i = idx
                .filter(|i| *i < len)
                .ok_or_else(|| format!("no element `{part}` in an array of {len}"))?;
            resolved.push(PathSeg::Index(i));
            if rest.is_empty() {
                a[i] = override_value(Some(&a[i]), raw);
                Ok(())
            } else {
                set_path(&mut a[i], rest, raw, resolved)
            }
        }
        _ => Err(format!(
            "cannot set `{part}` inside a value that is not a table"
        )),
    }
}

fn parse_override_value(raw: &str) -> toml::Value {
    let doc = format!("v = {raw}");
    match doc.parse::<toml::Table>() {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or(toml::Value::String(raw.to_string())),
        Err(_) => toml::Value::String(raw.to_string()),
    }
}
