//! Level names, source types and the stream order ρ.
//!
//! ρ (paper 000, 2.4 and 9.1.1.4) lists containers first, then `paragraph ≺ table_row ≺
//! sentence ≺ triplet`, each finer level after the coarser ones:
//!
//! | rank | level |
//! |---|---|
//! | 0 | `document` |
//! | 1 | `table` |
//! | 2 | `subgraph` |
//! | 3 | `section` |
//! | 4 | `paragraph` |
//! | 5 | `table_row` |
//! | 6 | `sentence` |
//! | 7 | `table_cell` |
//! | 8 | `triplet` |
//!
//! Unknown levels rank last (255). Ties are broken by `source_id`, then `ord` (the encoder's
//! position of the segment within its source, which already orders nested sections and row
//! indices), then `offsets`, then `id`, so the order is total and deterministic. Every parent
//! ranks before its children, so a ρ-sorted stream is parent-before-child.
//!
//! The encoders emit each source's segments in ρ order with `ord` = 0, 1, 2, ...; a KG shard
//! (one source per subject run) and a concatenation of documents therefore come out grouped
//! by source, parents still before children. [`sort_stream`] gives the global ρ stream.

use distillery_core::Segment;
use std::cmp::Ordering;

/// Level tags of segments.
pub mod level {
    pub const DOCUMENT: &str = "document";
    pub const SECTION: &str = "section";
    pub const PARAGRAPH: &str = "paragraph";
    pub const SENTENCE: &str = "sentence";
    pub const TABLE: &str = "table";
    pub const TABLE_ROW: &str = "table_row";
    pub const TABLE_CELL: &str = "table_cell";
    pub const SUBGRAPH: &str = "subgraph";
    pub const TRIPLET: &str = "triplet";
    /// All levels, in ρ rank order.
    pub const ALL: [&str; 9] = [
        DOCUMENT, TABLE, SUBGRAPH, SECTION, PARAGRAPH, TABLE_ROW, SENTENCE, TABLE_CELL, TRIPLET,
    ];
}

/// Values of the `source_type` metadata.
pub mod source_type {
    pub const TEXT: &str = "text";
    pub const TABLE: &str = "table";
    pub const KG: &str = "kg";
}

/// Rank of a level in ρ (smaller first); 255 for an unknown level.
pub fn level_rank(level: &str) -> u8 {
    level::ALL
        .iter()
        .position(|l| *l == level)
        .map_or(u8::MAX, |p| p as u8)
}

/// Compares two segments in the stream order ρ.
pub fn stream_cmp(a: &Segment, b: &Segment) -> Ordering {
    level_rank(&a.level)
        .cmp(&level_rank(&b.level))
        .then_with(|| a.source_id.cmp(&b.source_id))
        .then_with(|| a.ord.cmp(&b.ord))
        .then_with(|| a.offsets.cmp(&b.offsets))
        .then_with(|| a.id.cmp(&b.id))
}

/// Sorts segments into the stream order ρ (stable, deterministic).
///
/// The order is total (ids are unique within a stream, and the id is the last key), so the
/// segments are sorted by index with each level's rank looked up once, then moved into place
/// once each: [`stream_cmp`] on whole segments would rank both levels at every comparison
/// and move segments at every merge step.
pub fn sort_stream(segs: &mut [Segment]) {
    let ranks: Vec<u8> = segs.iter().map(|s| level_rank(&s.level)).collect();
    let mut order: Vec<usize> = (0..segs.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&segs[a], &segs[b]);
        ranks[a]
            .cmp(&ranks[b])
            .then_with(|| x.source_id.cmp(&y.source_id))
            .then_with(|| x.ord.cmp(&y.ord))
            .then_with(|| x.offsets.cmp(&y.offsets))
            .then_with(|| x.id.cmp(&y.id))
    });
    // Position `i` takes the segment at `order[i]`: follow each cycle once, swapping.
    for i in 0..order.len() {
        let mut j = i;
        loop {
            let k = order[j];
            order[j] = j;
            if k == i {
                break;
            }
            segs.swap(j, k);
            j = k;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_follow_the_paper() {
        assert!(level_rank("paragraph") < level_rank("table_row"));
        assert!(level_rank("table_row") < level_rank("sentence"));
        assert!(level_rank("sentence") < level_rank("triplet"));
        assert!(level_rank("document") < level_rank("section"));
        assert!(level_rank("table_row") < level_rank("table_cell"));
        assert_eq!(level_rank("nope"), 255);
    }

    #[test]
    fn sort_is_by_rank_then_source_then_ord() {
        let seg = |level: &str, src: &str, ord: u32| Segment {
            id: format!("{level}{src}{ord}"),
            level: level.into(),
            source_id: src.into(),
            ord,
            ..Default::default()
        };
        let mut v = vec![
            seg("sentence", "a", 3),
            seg("paragraph", "b", 1),
            seg("paragraph", "a", 2),
            seg("document", "b", 0),
            seg("paragraph", "a", 1),
        ];
        sort_stream(&mut v);
        let ids: Vec<_> = v.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "documentb0",
                "paragrapha1",
                "paragrapha2",
                "paragraphb1",
                "sentencea3"
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn sorting_by_index_is_sorting_by_stream_cmp(
            segs in proptest::collection::vec(
                (0usize..10, 0u8..3, 0u32..4, 0i64..3, 0u32..1000),
                0..60,
            )
        ) {
            let mut v: Vec<Segment> = segs
                .iter()
                .enumerate()
                .map(|(n, &(l, src, ord, off, id))| Segment {
                    // Unique ids, as in a stream; an unknown level too.
                    id: format!("{id}-{n}"),
                    level: level::ALL.get(l).copied().unwrap_or("nope").to_string(),
                    source_id: format!("s{src}"),
                    ord,
                    offsets: vec![off],
                    ..Default::default()
                })
                .collect();
            let mut want = v.clone();
            want.sort_by(stream_cmp);
            sort_stream(&mut v);
            proptest::prop_assert_eq!(v, want);
        }
    }
}
