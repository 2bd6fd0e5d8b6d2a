//! A shard's passage table as parts: the base (`passages/shard-SSSS.parquet`) and the delta
//! parts later versions wrote (`passages/shard-SSSS.dNNNNN.parquet`: the passages a night
//! added or changed, and in `shard-SSSS.dNNNNN.gone.json` the ids it removed). A night fed a
//! corpus delta writes only its own part and names the older ones (copies inside the root, a
//! hard link on local disk), instead of rewriting the shard's table; a row of a newer part
//! shadows the same id in older ones, and a gone id hides it there. Past [`MAX_DELTAS`]
//! parts the next build rewrites the shard as one base again.

use std::collections::HashSet;
use std::path::Path;

use crate::IndexError;
use crate::passage::Rows;

/// Delta parts a shard keeps before a build rewrites it whole.
pub const MAX_DELTAS: u32 = 8;

/// One part of a shard: its number (0: the base), its table and its gone ids' file (names
/// inside `passages/`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartName {
    pub n: u32,
    pub table: String,
    pub gone: Option<String>,
}

/// The names of delta part `n` of shard `sn`: its table and its gone ids' file.
pub fn delta_names(sn: &str, n: u32) -> (String, String) {
    (
        format!("{sn}.d{n:05}.parquet"),
        format!("{sn}.d{n:05}.gone.json"),
    )
}

/// The parts of shard `sn` among the file names of a version's `passages/`, oldest first.
pub fn of_shard<'a>(names: impl IntoIterator<Item = &'a str>, sn: &str) -> Vec<PartName> {
    let mut parts: Vec<PartName> = Vec::new();
    let mut gone = HashSet::new();
    for name in names {
        if name == format!("{sn}.parquet") {
            parts.push(PartName {
                n: 0,
                table: name.to_string(),
                gone: None,
            });
        } else if let Some(rest) = name.strip_prefix(&format!("{sn}.d")) {
            if let Some(n) = rest.strip_suffix(".gone.json") {
                gone.insert(n.to_string());
            } else if let Some(n) = rest.strip_suffix(".parquet")
                && let Ok(k) = n.parse::<u32>()
            {
                parts.push(PartName {
                    n: k,
                    table: name.to_string(),
                    gone: None,
                });
            }
        }
    }
    for p in &mut parts {
        let n = format!("{:05}", p.n);
        if p.n > 0 && gone.contains(&n) {
            p.gone = Some(delta_names(sn, p.n).1);
        }
    }
    parts.sort_by_key(|p| p.n);
    parts
}

/// The file names of a version's `passages/` from its manifest's paths.
pub fn names_in(paths: &[String]) -> Vec<&str> {
    paths
        .iter()
        .filter_map(|p| p.strip_prefix("passages/"))
        .collect()
}

/// Calls `f` with every live row of the parts (in `dir`), newest part first; returns how
/// many. Memory: one part's batches, and the ids of the delta parts read.
pub fn for_each_live(
    dir: &Path,
    parts: &[PartName],
    mut f: impl FnMut(&Rows<'_>, usize) -> Result<(), IndexError>,
) -> Result<u64, IndexError> {
    let mut shadow: HashSet<String> = HashSet::new();
    let mut live = 0;
    for part in parts.iter().rev() {
        let path = dir.join(&part.table);
        let mut here = Vec::new();
        for batch in crate::table::read(&path)? {
            let rows = Rows::of(&batch, &path)?;
            for i in 0..batch.num_rows() {
                let id = rows.id.value(i);
                if shadow.contains(id) {
                    continue;
                }
                live += 1;
                f(&rows, i)?;
                if part.n > 0 {
                    here.push(id.to_string());
                }
            }
        }
        shadow.extend(here);
        if let Some(g) = &part.gone {
            shadow.extend(read_gone(&dir.join(g))?);
        }
    }
    Ok(live)
}

fn read_gone(path: &Path) -> Result<Vec<String>, IndexError> {
    let data = std::fs::read(path).map_err(|e| IndexError::io(path.display(), e))?;
    serde_json::from_slice(&data)
        .map_err(|e| IndexError::Corrupt(path.display().to_string(), e.to_string()))
}

/// Writes the ids a delta part removed.
pub fn write_gone(path: &Path, ids: &[&str]) -> Result<(), IndexError> {
    let body = serde_json::to_vec(ids).map_err(|e| IndexError::Invalid(e.to_string()))?;
    std::fs::write(path, body).map_err(|e| IndexError::io(path.display(), e))
}

/// The ids each part of a shard hides in the parts older than it: for a reader looking up ids
/// part by part, newest first.
pub fn hidden_by(dir: &Path, part: &PartName) -> Result<Vec<String>, IndexError> {
    match &part.gone {
        Some(g) => read_gone(&dir.join(g)),
        None => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::passage::{self, Passage};

    fn p(id: &str, text: &str) -> Passage {
        Passage::new(id.into(), "d".into(), "t".into(), text.into())
    }

    #[test]
    fn newer_parts_shadow_and_gone_ids_hide_older_rows() {
        let d = tempfile::tempdir().unwrap();
        let sn = "shard-0000";
        passage::write(
            &d.path().join(format!("{sn}.parquet")),
            &[p("a", "a0"), p("b", "b0"), p("c", "c0")],
        )
        .unwrap();
        let (t1, g1) = delta_names(sn, 1);
        passage::write(&d.path().join(&t1), &[p("b", "b1"), p("d", "d1")]).unwrap();
        write_gone(&d.path().join(&g1), &["c"]).unwrap();
        let (t2, g2) = delta_names(sn, 2);
        passage::write(&d.path().join(&t2), &[p("c", "c2")]).unwrap();
        write_gone(&d.path().join(&g2), &["a"]).unwrap();
        let names = [
            format!("{sn}.parquet"),
            t1.clone(),
            g1,
            t2,
            g2,
            "shard-0001.parquet".into(),
        ];
        let parts = of_shard(names.iter().map(String::as_str), sn);
        assert_eq!(parts.len(), 3);
        assert!(parts[1].gone.is_some() && parts[0].gone.is_none());
        let mut got = Vec::new();
        let n = for_each_live(d.path(), &parts, |r, i| {
            got.push(r.passage(i).text);
            Ok(())
        })
        .unwrap();
        got.sort();
        assert_eq!(got, ["b1", "c2", "d1"]);
        assert_eq!(n, 3);
    }
}
