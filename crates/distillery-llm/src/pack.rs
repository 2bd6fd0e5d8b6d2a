//! The pack format of the response cache: many entries in one object, with an index.
//!
//! A pack is one object, `PREFIX/packs/<name>.pack`, written once (create-if-not-exists)
//! and never changed:
//!
//! ```text
//! b"DLLMPACK1\n"                      magic and format version (10 bytes)
//! u32 LE   n                          entries
//! u64 LE   index_len                  bytes of the index
//! index    n × { u8 digest_len, digest (ASCII), u64 LE offset, u32 LE len, u64 LE xxh64 }
//! u64 LE   xxh64 of the index
//! data     the entries' JSON (each a `CacheEntry`, as loose entries hold it), back to back
//! ```
//!
//! `offset` is relative to the start of `data`; the object ends where the last entry does.
//! Every entry carries the xxHash64 of its bytes and the index its own, so a truncated or
//! damaged pack is refused as a whole with an error naming the object ([`decode`]), never
//! read as a partial set of entries.

use std::ops::Range;

use twox_hash::XxHash64;

const MAGIC: &[u8; 10] = b"DLLMPACK1\n";
/// Magic, entry count, index length.
const HEAD: usize = MAGIC.len() + 4 + 8;
/// The seed of every checksum in a pack.
const SEED: u64 = 0x00d1_5711_1e7c_ac4e;

/// One pack's index: each entry's digest and where its bytes are in the object.
#[derive(Debug)]
pub(crate) struct Decoded {
    pub entries: Vec<(String, Range<usize>)>,
}

/// The bytes of a pack holding `entries` (digest, JSON of the entry), in that order.
pub(crate) fn encode(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut index = Vec::with_capacity(entries.len() * 54);
    let mut offset = 0u64;
    for (digest, body) in entries {
        let d = digest.as_bytes();
        assert!(d.len() <= usize::from(u8::MAX), "digest too long");
        index.push(d.len() as u8);
        index.extend_from_slice(d);
        index.extend_from_slice(&offset.to_le_bytes());
        index.extend_from_slice(&(body.len() as u32).to_le_bytes());
        index.extend_from_slice(&XxHash64::oneshot(SEED, body).to_le_bytes());
        offset += body.len() as u64;
    }
    let data: usize = entries.iter().map(|(_, b)| b.len()).sum();
    let mut out = Vec::with_capacity(HEAD + index.len() + 8 + data);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&(index.len() as u64).to_le_bytes());
    out.extend_from_slice(&index);
    out.extend_from_slice(&XxHash64::oneshot(SEED, &index).to_le_bytes());
    for (_, body) in entries {
        out.extend_from_slice(body);
    }
    out
}

/// Reads `n` little-endian bytes at `*at`, moving `*at` past them.
fn take<'a>(b: &'a [u8], at: &mut usize, n: usize, what: &str) -> Result<&'a [u8], String> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| format!("truncated pack: it ends inside {what} (at byte {at})"))?;
    let s = &b[*at..end];
    *at = end;
    Ok(s)
}

fn u32_at(b: &[u8], at: &mut usize, what: &str) -> Result<u32, String> {
    Ok(u32::from_le_bytes(
        take(b, at, 4, what)?.try_into().unwrap(),
    ))
}

fn u64_at(b: &[u8], at: &mut usize, what: &str) -> Result<u64, String> {
    Ok(u64::from_le_bytes(
        take(b, at, 8, what)?.try_into().unwrap(),
    ))
}

/// The index of the pack `b`, every entry's checksum verified; the ranges index `b`. An
/// error says what is wrong (not a pack, truncated, a checksum that does not match).
pub(crate) fn decode(b: &[u8]) -> Result<Decoded, String> {
    let mut at = 0;
    if take(b, &mut at, MAGIC.len(), "the magic")? != MAGIC {
        return Err("not a response cache pack (bad magic)".into());
    }
    let n = u32_at(b, &mut at, "the header")? as usize;
    let index_len = u64_at(b, &mut at, "the header")?;
    let index_len = usize::try_from(index_len).map_err(|_| "index length too large")?;
    let index = take(b, &mut at, index_len, "the index")?;
    let sum = u64_at(b, &mut at, "the index checksum")?;
    if XxHash64::oneshot(SEED, index) != sum {
        return Err("damaged pack: the index checksum does not match".into());
    }
    let data = at;
    let mut entries = Vec::with_capacity(n);
    let mut i = 0;
    let mut end = data;
    for k in 0..n {
        let dlen = take(index, &mut i, 1, "the index")?[0] as usize;
        let digest = std::str::from_utf8(take(index, &mut i, dlen, "the index")?)
            .map_err(|_| format!("damaged pack: entry {k}'s digest is not text"))?
            .to_string();
        let offset = u64_at(index, &mut i, "the index")?;
        let len = u32_at(index, &mut i, "the index")? as usize;
        let sum = u64_at(index, &mut i, "the index")?;
        let start = usize::try_from(offset)
            .ok()
            .and_then(|o| o.checked_add(data))
            .ok_or_else(|| format!("damaged pack: entry {k}'s offset is out of range"))?;
        let stop = start
            .checked_add(len)
            .filter(|&s| s <= b.len())
            .ok_or_else(|| {
                format!(
                    "truncated pack: entry {k} ({digest}) ends at byte {}, the object has {}",
                    start.saturating_add(len),
                    b.len()
                )
            })?;
        if XxHash64::oneshot(SEED, &b[start..stop]) != sum {
            return Err(format!(
                "damaged pack: entry {k} ({digest}) does not match its checksum"
            ));
        }
        end = end.max(stop);
        entries.push((digest, start..stop));
    }
    if i != index.len() {
        return Err("damaged pack: the index is longer than its entries".into());
    }
    if end != b.len() {
        return Err(format!(
            "damaged pack: {} bytes after the last entry",
            b.len() - end
        ));
    }
    Ok(Decoded { entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        encode(&[
            ("aa01".into(), b"{\"a\":1}".to_vec()),
            ("bb02".into(), b"{\"b\":22}".to_vec()),
        ])
    }

    #[test]
    fn packs_round_trip() {
        let b = sample();
        let d = decode(&b).unwrap();
        let got: Vec<(&str, &[u8])> = d
            .entries
            .iter()
            .map(|(k, r)| (k.as_str(), &b[r.clone()]))
            .collect();
        assert_eq!(
            got,
            vec![("aa01", &b"{\"a\":1}"[..]), ("bb02", &b"{\"b\":22}"[..])]
        );
        assert!(decode(&encode(&[])).unwrap().entries.is_empty());
    }

    #[test]
    fn every_truncation_and_flipped_byte_is_refused() {
        let b = sample();
        for cut in 0..b.len() {
            let e = decode(&b[..cut]).unwrap_err();
            assert!(
                e.contains("truncated") || e.contains("damaged") || e.contains("magic"),
                "{cut}: {e}"
            );
        }
        for at in 0..b.len() {
            let mut c = b.clone();
            c[at] ^= 0x20;
            assert!(decode(&c).is_err(), "flipped byte {at} went unnoticed");
        }
    }
}
