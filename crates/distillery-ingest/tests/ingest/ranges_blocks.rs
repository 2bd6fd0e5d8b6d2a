//! Single-stream bz2 MediaWiki dumps read in block ranges ([`ByteRange::of_blocks`]): each
//! range reads the bz2 blocks whose magic starts in it. However cut (equal cuts, a range per
//! few blocks, ranges holding no block, the planner's), the ranges give the documents and
//! tables of a read without a range, in the same order, and the same quarantine records for
//! every cut (placed by block); a damaged block costs only the pages it holds.

use distillery_core::Record;
use distillery_core::spec::Format;
use distillery_ingest::{ByteRange, InputCtx, split_ranges};

use crate::common::shared;
use crate::ranges::{assert_planned, equal, read_part, read_ranges, write};
use crate::ranges_mediawiki::{FOOTER, HEADER, bz2, content, mediawiki, pages, reasons};

/// `n` equal block ranges.
fn blocks(size: u64, n: u64) -> Vec<ByteRange> {
    equal(size, n)
        .into_iter()
        .map(|r| ByteRange::of_blocks(r.start, r.end))
        .collect()
}

/// Bit offsets of the block magics of a bz2 file, found by brute force.
fn block_bits(data: &[u8]) -> Vec<u64> {
    const MAGIC: u64 = 0x3141_5926_5359;
    let mut out = Vec::new();
    let mut window = 0u64;
    for bit in 0..data.len() as u64 * 8 {
        let b = data[(bit / 8) as usize] >> (7 - bit % 8) & 1;
        window = (window << 1 | u64::from(b)) & ((1 << 48) - 1);
        if bit >= 47 && window == MAGIC {
            out.push(bit - 47);
        }
    }
    out
}

fn quarantine(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| matches!(r, Record::Quarantine(_)))
        .cloned()
        .collect()
}

#[test]
fn a_single_stream_dump_reads_the_same_in_block_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let xml = format!("{HEADER}{}{FOOTER}", pages(300).concat());
    let data = bz2(xml.as_bytes());
    let bits = block_bits(&data);
    assert!(bits.len() >= 4, "{} blocks", bits.len());
    let p = write(dir.path(), "daily-pages-meta-hist-incr.xml.bz2", &data);
    let size = data.len() as u64;
    let options = mediawiki(true);
    let whole = read_part(Format::MediaWiki, &options, &p, None).unwrap();
    assert_eq!(reasons(&whole), ["malformed_xml", "missing_field"]);
    let loc = p.to_str().unwrap().to_string();
    let ctx = InputCtx::local(&loc, &options);
    let mut sets: Vec<Vec<ByteRange>> = [1, 2, 3, 5, 11, 40]
        .iter()
        .map(|&n| blocks(size, n))
        .collect();
    // Cuts a byte either side of a block's first byte, and on it.
    let b = bits[2] / 8;
    for cuts in [[b - 1, b + 1], [b, b + 2], [b + 1, size - 3]] {
        sets.push(vec![
            ByteRange::of_blocks(0, cuts[0]),
            ByteRange::of_blocks(cuts[0], cuts[1]),
            ByteRange::of_blocks(cuts[1], size),
        ]);
    }
    for target in [size.div_ceil(3), size.div_ceil(7)] {
        let planned = split_ranges(Format::MediaWiki, &ctx, target, None).unwrap();
        assert_planned(&planned, size, target);
        assert!(planned.iter().all(|r| r.blocks), "{planned:?}");
        sets.push(planned);
    }
    let first = read_ranges(Format::MediaWiki, &options, &p, &sets[0]);
    assert_eq!(content(&first), content(&whole));
    assert_eq!(reasons(&first), reasons(&whole));
    for r in quarantine(&first) {
        let Record::Quarantine(q) = r else { continue };
        assert!(q.detail.contains("bz2 block at compressed bit"), "{q:?}");
        assert_eq!((q.byte_offset, q.record, q.line), (None, None, None));
    }
    for ranges in &sets[1..] {
        let got = read_ranges(Format::MediaWiki, &options, &p, ranges);
        assert!(content(&got) == content(&whole), "cut as {ranges:?}");
        // Quarantine records too: placed by block, the same whatever the cut.
        assert!(quarantine(&got) == quarantine(&first), "cut as {ranges:?}");
    }
}

#[test]
fn a_damaged_block_costs_only_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let xml = format!("{HEADER}{}{FOOTER}", pages(300).concat());
    let mut data = bz2(xml.as_bytes());
    // Both files of one name: a document's id and source name its file.
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = write(clean_dir.path(), "dump.xml.bz2", &data);
    let bits = block_bits(&data);
    // Damage the middle of the third block.
    let at = ((bits[2] + bits[3]) / 16) as usize;
    for b in &mut data[at..at + 8] {
        *b ^= 0x5A;
    }
    let p = write(dir.path(), "dump.xml.bz2", &data);
    let size = data.len() as u64;
    let options = mediawiki(true);
    let good = content(&read_part(Format::MediaWiki, &options, &clean, None).unwrap());
    for n in [1, 3, 8] {
        let got = read_ranges(Format::MediaWiki, &options, &p, &blocks(size, n));
        let kept = content(&got);
        // Nothing made up: every record is one of the clean read's, in its order.
        let mut it = good.iter();
        for r in &kept {
            assert!(
                it.any(|g| g == r),
                "{n} ranges: a record not in the clean read"
            );
        }
        // Only the pages of the damaged block (about 100 kB of text, ~80 pages) are lost.
        let lost = good.len() - kept.len();
        assert!(lost > 0 && lost < good.len() / 2, "{n} ranges: {lost} lost");
        let r = reasons(&got);
        assert!(r.iter().any(|x| x == "corrupt_input"), "{n} ranges: {r:?}");
    }
}

#[test]
fn a_cut_single_stream_dump_ends_with_its_cut() {
    let dir = tempfile::tempdir().unwrap();
    let xml = format!("{HEADER}{}{FOOTER}", pages(300).concat());
    let data = bz2(xml.as_bytes());
    let cut = data.len() * 7 / 10;
    let p = write(dir.path(), "cut.xml.bz2", &data[..cut]);
    let options = mediawiki(true);
    let whole = read_part(Format::MediaWiki, &options, &p, None).unwrap();
    assert_eq!(
        reasons(&whole).last().map(String::as_str),
        Some("truncated_input")
    );
    for n in [1, 2, 5] {
        let got = read_ranges(Format::MediaWiki, &options, &p, &blocks(cut as u64, n));
        assert_eq!(content(&got), content(&whole), "{n} ranges");
        assert_eq!(
            reasons(&got).last().map(String::as_str),
            Some("truncated_input"),
            "{n} ranges"
        );
    }
}

#[test]
fn the_shared_sample_reads_the_same_in_block_ranges() {
    let Some(sample) = shared("wikipedia_xml/enwiki-table-markup.xml.bz2") else {
        return;
    };
    let options = mediawiki(true);
    let whole = read_part(Format::MediaWiki, &options, &sample, None).unwrap();
    // Recompressed at level 1: blocks of 100 kB, so the sample has several.
    let mut xml = Vec::new();
    std::io::Read::read_to_end(
        &mut bzip2::read::MultiBzDecoder::new(std::fs::File::open(&sample).unwrap()),
        &mut xml,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = bz2(&xml);
    // The same name: a document's id and source name its file.
    let name = sample.file_name().unwrap().to_str().unwrap();
    let p = write(dir.path(), name, &data);
    let size = data.len() as u64;
    for n in [2, 3, 9] {
        let got = read_ranges(Format::MediaWiki, &options, &p, &blocks(size, n));
        assert!(content(&got) == content(&whole), "{n} ranges");
    }
}
