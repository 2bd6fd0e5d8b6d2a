//! The benign equivalence ≡ of the paper (9.1.1.3), per modality:
//!
//! - text: the same sequence of non-whitespace chars ([`text_equivalent`]);
//! - tables: equal up to one global column permutation applied to the header and every row,
//!   row order kept ([`table_equivalent`]); a permutation exists exactly when the two tables
//!   have the same multiset of *columns* (header name plus the column's cells), which handles
//!   duplicate header names without guessing which `Name` is which;
//! - KGs: equal edge multisets ([`kg_equivalent`]).

use crate::kg::KgEdge;
use std::collections::HashMap;

fn non_ws(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars().filter(|c| !c.is_whitespace())
}

/// Whether two texts have the same sequence of non-whitespace chars.
pub fn text_equivalent(a: &str, b: &str) -> bool {
    non_ws(a).eq(non_ws(b))
}

/// Index (counting non-whitespace chars only) of the first difference between two texts, or
/// `None` when they are equivalent.
pub fn first_text_difference(a: &str, b: &str) -> Option<usize> {
    let (mut x, mut y) = (non_ws(a), non_ws(b));
    let mut i = 0;
    loop {
        match (x.next(), y.next()) {
            (None, None) => return None,
            (p, q) if p != q => return Some(i),
            _ => i += 1,
        }
    }
}

/// Column `j` of a table: its header name and its cells, `None` where a (ragged) row or the
/// header is too short.
fn columns<'a>(header: &'a [String], rows: &'a [Vec<String>]) -> Vec<Vec<Option<&'a str>>> {
    let width = rows
        .iter()
        .map(Vec::len)
        .chain([header.len()])
        .max()
        .unwrap_or(0);
    (0..width)
        .map(|j| {
            std::iter::once(header.get(j).map(String::as_str))
                .chain(rows.iter().map(|r| r.get(j).map(String::as_str)))
                .collect()
        })
        .collect()
}

/// A column permutation `pi` with `table2[.., j] == table1[.., pi[j]]` for every column `j`
/// (header and all rows), or `None` when the tables are not ≡. With repeated identical
/// columns the first unused match is taken, so the result is deterministic.
pub fn column_permutation(
    h1: &[String],
    rows1: &[Vec<String>],
    h2: &[String],
    rows2: &[Vec<String>],
) -> Option<Vec<usize>> {
    if rows1.len() != rows2.len() {
        return None;
    }
    let (c1, c2) = (columns(h1, rows1), columns(h2, rows2));
    if c1.len() != c2.len() {
        return None;
    }
    let mut free: HashMap<&[Option<&str>], Vec<usize>> = HashMap::new();
    for (j, col) in c1.iter().enumerate().rev() {
        free.entry(col.as_slice()).or_default().push(j);
    }
    c2.iter()
        .map(|col| free.get_mut(col.as_slice()).and_then(Vec::pop))
        .collect()
}

/// Whether two tables are equal up to one global column permutation (rows in order).
pub fn table_equivalent(
    h1: &[String],
    rows1: &[Vec<String>],
    h2: &[String],
    rows2: &[Vec<String>],
) -> bool {
    column_permutation(h1, rows1, h2, rows2).is_some()
}

/// Whether two edge lists are the same multiset.
pub fn kg_equivalent(a: &[KgEdge], b: &[KgEdge]) -> bool {
    let (missing, extra) = edge_difference(a, b);
    missing.is_empty() && extra.is_empty()
}

/// The multiset difference of two edge lists: `(in a but not b, in b but not a)`, each
/// sorted, with multiplicity.
pub fn edge_difference<'a>(a: &'a [KgEdge], b: &'a [KgEdge]) -> (Vec<&'a KgEdge>, Vec<&'a KgEdge>) {
    let mut count: HashMap<&KgEdge, i64> = HashMap::new();
    for e in a {
        *count.entry(e).or_default() += 1;
    }
    for e in b {
        *count.entry(e).or_default() -= 1;
    }
    let (mut only_a, mut only_b) = (Vec::new(), Vec::new());
    for (e, n) in count {
        let dst = if n > 0 { &mut only_a } else { &mut only_b };
        dst.extend(std::iter::repeat_n(e, n.unsigned_abs() as usize));
    }
    only_a.sort();
    only_b.sort();
    (only_a, only_b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn text_ignores_whitespace_only() {
        assert!(text_equivalent("a b\n\tc", "abc "));
        assert!(!text_equivalent("abc", "abd"));
        assert_eq!(first_text_difference("a b c", "abd"), Some(2));
        assert_eq!(first_text_difference("ab", "a b c"), Some(2));
        assert_eq!(first_text_difference(" ", ""), None);
    }

    #[test]
    fn permutation_handles_duplicate_names() {
        let h1 = s(&["a", "a", "b"]);
        let r1 = vec![s(&["1", "2", "3"])];
        let h2 = s(&["b", "a", "a"]);
        let r2 = vec![s(&["3", "2", "1"])];
        assert_eq!(column_permutation(&h1, &r1, &h2, &r2), Some(vec![2, 1, 0]));
        let r3 = vec![s(&["3", "1", "1"])];
        assert_eq!(column_permutation(&h1, &r1, &h2, &r3), None);
    }
}
