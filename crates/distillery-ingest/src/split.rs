//! Planning the byte ranges a big input is read in ([`split_ranges`]), and finding a
//! multistream dump's index beside it ([`find_multistream_index`]). The rules are on
//! [`split_ranges`].

use std::io::BufRead;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use distillery_core::spec::Format;

use crate::input::{file_name, open_decompressed};
use crate::mediawiki::{MAX_STREAM, find_stream_start, first_start_from};
use crate::range::{ByteRange, Shape, Splittable, head, splittable};
use crate::{IngestError, InputCtx, Opener};

/// Cuts the context's file into byte ranges of about `target_bytes` each, in file order,
/// covering it without gaps: `[0, c1), [c1, c2), ..., [ck, size)`. One range for a file that
/// cannot be split or is no bigger than the target (or a target of 0). `index` is the location
/// of a multistream dump's `-index.txt(.bz2)` (see [`find_multistream_index`]); it is only
/// used for MediaWiki, and only to place the cuts: an unreadable one is ignored with a warning
/// and the cuts are found by scanning.
///
/// A range read gives every record to exactly one range however the ranges are cut (see
/// [`ByteRange`]), so cuts only need to be cheap and balanced:
///
/// - Plain line files (Freebase N-Triples, a Wikidata dump in its line layout, JSON-lines QA
///   files) are cut every `size / n` bytes, wherever that falls: the readers settle lines across
///   cuts.
/// - A multistream bz2 MediaWiki dump is cut at bz2 stream starts near those points: the first
///   start at or after each point, from the dump's index when given (offsets verified against
///   the stream header at each, since an index of another dump would give wrong ones), else by
///   scanning the compressed bytes from the point (at most 64 MiB, the largest stream the
///   reader decodes in one piece). Cuts on stream starts keep each range's bytes to itself; the
///   reader would still be right without them, reading on to its last stream's end.
/// - A single-stream bz2 MediaWiki dump (no second stream within 64 MiB of the start, as in
///   Wikimedia's daily adds-changes files) is cut every `size / n` bytes into block ranges
///   ([`ByteRange::of_blocks`]): each reads the bz2 blocks that start in it (see the
///   `mediawiki::blocks` module), so no cut needs to fall on anything.
/// - Anything else is one range: compressed line files (decompressed on one thread and parsed
///   on the others instead), JSON arrays, plain XML, FB15k and MetaQA, and any file no bigger
///   than the target.
pub fn split_ranges(
    format: Format,
    ctx: &InputCtx<'_>,
    target_bytes: u64,
    index: Option<&str>,
) -> Result<Vec<ByteRange>, IngestError> {
    let (head, size) = head(ctx.opener, &ctx.location)?;
    let whole = vec![ByteRange::new(0, size)];
    if target_bytes == 0 || size <= target_bytes {
        return Ok(whole);
    }
    let n = size.div_ceil(target_bytes);
    let points: Vec<u64> = (1..n)
        .map(|k| (k as u128 * size as u128 / n as u128) as u64)
        .collect();
    let cuts = match splittable(Shape::of(format), &head) {
        Splittable::No => return Ok(whole),
        Splittable::Lines => points,
        Splittable::Streams => match stream_cuts(ctx, size, &points, index)? {
            cuts if cuts.is_empty() => {
                let blocks = ranges(&points, size);
                return Ok(blocks
                    .into_iter()
                    .map(|r| ByteRange::of_blocks(r.start, r.end))
                    .collect());
            }
            cuts => cuts,
        },
    };
    Ok(ranges(&cuts, size))
}

/// The ranges between increasing cuts inside `(0, size)` (others dropped).
fn ranges(cuts: &[u64], size: u64) -> Vec<ByteRange> {
    let mut bounds = vec![0];
    for &c in cuts {
        if c > bounds[bounds.len() - 1] && c < size {
            bounds.push(c);
        }
    }
    bounds.push(size);
    bounds
        .windows(2)
        .map(|w| ByteRange::new(w[0], w[1]))
        .collect()
}

/// The stream starts at or after each point; none for a single-stream file.
fn stream_cuts(
    ctx: &InputCtx<'_>,
    size: u64,
    points: &[u64],
    index: Option<&str>,
) -> Result<Vec<u64>, IngestError> {
    let io = |e| IngestError::io(&ctx.location, e);
    let (opener, location) = (ctx.opener, ctx.location.as_str());
    let starts = index.and_then(|loc| match read_index(opener, loc) {
        Ok(starts) => Some(starts),
        Err(e) => {
            tracing::warn!(index = loc, error = %e, "multistream index unreadable: scanning instead");
            None
        }
    });
    if starts.is_none()
        && first_start_from(opener, location, 1, size, MAX_STREAM as u64)
            .map_err(io)?
            .is_none()
    {
        return Ok(Vec::new());
    }
    let mut cuts = Vec::with_capacity(points.len());
    for &p in points {
        let indexed = starts
            .as_ref()
            .and_then(|s| s.get(s.partition_point(|&o| o < p)).copied())
            .filter(|&o| o < size && is_stream_start(opener, location, o));
        let cut = match indexed {
            Some(o) => Some(o),
            None => first_start_from(opener, location, p, size, MAX_STREAM as u64).map_err(io)?,
        };
        cuts.extend(cut);
    }
    Ok(cuts)
}

/// Whether a bz2 stream header starts at `offset`.
fn is_stream_start(opener: &dyn Opener, location: &str, offset: u64) -> bool {
    opener
        .read_range(location, offset, 10)
        .is_ok_and(|b| find_stream_start(&b, 0) == Some(0))
}

/// The stream offsets of a multistream index (`offset:page_id:title` lines, plain or bz2),
/// sorted and distinct.
pub(crate) fn read_index(opener: &dyn Opener, location: &str) -> Result<Vec<u64>, IngestError> {
    let (mut reader, _) = open_decompressed(opener, location, Arc::new(AtomicU64::new(0)))?;
    let mut starts: Vec<u64> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(IngestError::io(location, e)),
        }
        let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 || line.get(digits) != Some(&b':') {
            continue;
        }
        let Some(offset) = std::str::from_utf8(&line[..digits])
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        else {
            continue;
        };
        if starts.last() != Some(&offset) {
            starts.push(offset);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    Ok(starts)
}

/// The index beside a multistream dump, when it exists: `…-multistream.xml.bz2` →
/// `…-multistream-index.txt.bz2` (or `.txt`), and for the partial dumps
/// `…-multistream1.xml-p1p41242.bz2` → `…-multistream-index1.txt-p1p41242.bz2`.
pub fn find_multistream_index(opener: &dyn Opener, location: &str) -> Option<String> {
    let name = file_name(location);
    if !name.contains("multistream") || name.contains("multistream-index") || !name.contains(".xml")
    {
        return None;
    }
    let index = name
        .replacen("multistream", "multistream-index", 1)
        .replacen(".xml", ".txt", 1);
    let candidates = match index.strip_suffix(".bz2") {
        Some(plain) => vec![index.clone(), plain.to_string()],
        None => vec![format!("{index}.bz2"), index.clone()],
    };
    candidates
        .into_iter()
        .map(|c| opener.sibling(location, &c))
        .find(|loc| opener.exists(loc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LocalFs;

    #[test]
    fn cuts_become_ordered_ranges_without_gaps() {
        assert_eq!(
            ranges(&[0, 5, 5, 3, 9, 12], 10),
            vec![
                ByteRange::new(0, 5),
                ByteRange::new(5, 9),
                ByteRange::new(9, 10)
            ]
        );
        assert_eq!(ranges(&[], 0), vec![ByteRange::new(0, 0)]);
    }

    #[test]
    fn finds_the_index_beside_a_dump() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let dump = format!("{d}/enwiki-20240601-pages-articles-multistream.xml.bz2");
        assert_eq!(find_multistream_index(&LocalFs, &dump), None);
        let txt = format!("{d}/enwiki-20240601-pages-articles-multistream-index.txt");
        std::fs::write(&txt, "").unwrap();
        assert_eq!(find_multistream_index(&LocalFs, &dump), Some(txt));
        let bz = format!("{d}/enwiki-20240601-pages-articles-multistream-index.txt.bz2");
        std::fs::write(&bz, "").unwrap();
        assert_eq!(find_multistream_index(&LocalFs, &dump), Some(bz));
        let part = format!("{d}/enwiki-20240601-pages-articles-multistream1.xml-p1p41242.bz2");
        let part_index =
            format!("{d}/enwiki-20240601-pages-articles-multistream-index1.txt-p1p41242.bz2");
        std::fs::write(&part_index, "").unwrap();
        assert_eq!(find_multistream_index(&LocalFs, &part), Some(part_index));
        assert_eq!(
            find_multistream_index(&LocalFs, &format!("{d}/plain.xml.bz2")),
            None
        );
    }

    #[test]
    fn index_offsets_are_sorted_and_distinct() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x-index.txt");
        std::fs::write(
            &p,
            "600:10:A\n600:12:B: with colon\n9000:13:C\nbad line\n:1:x\n5000:1:D\n",
        )
        .unwrap();
        let got = read_index(&LocalFs, p.to_str().unwrap()).unwrap();
        assert_eq!(got, vec![600, 5000, 9000]);
    }
}
