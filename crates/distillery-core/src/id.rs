//! Stable ids and shard assignment.
//!
//! An id is the first 128 bits of SHA-1 over the parts joined by the unit separator (0x1f),
//! written as 32 lowercase hex characters. The same parts always give the same id, on every
//! machine and in every run; 128 bits keep collisions negligible even for the billions of
//! edges of a full Freebase dump (a 64-bit id would reach the birthday bound there).

use sha1::{Digest, Sha1};

/// Stable id of the given parts (order matters).
pub fn stable_id(parts: &[&str]) -> String {
    // Short ids (most of them: a row's id from its question's and edge's) are hashed in one
    // call from a stack buffer, not one call per part and separator.
    let len = parts.iter().map(|p| p.len() + 1).sum::<usize>();
    if len <= JOINED {
        let mut buf = [0u8; JOINED];
        let mut at = 0;
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                buf[at] = 0x1f;
                at += 1;
            }
            buf[at..at + p.len()].copy_from_slice(p.as_bytes());
            at += p.len();
        }
        return hex_lower(&Sha1::digest(&buf[..at])[..16]);
    }
    let mut h = StableIdBuilder::new();
    for p in parts {
        h.part(p);
    }
    h.finish()
}

/// The most bytes of parts and separators [`stable_id`] joins before hashing.
const JOINED: usize = 256;

/// [`stable_id`] built part by part, so that a part made of pieces (a sample's messages)
/// is hashed without being joined into one string first: `part` starts a new part (the
/// separator is written before every part but the first), `extend` appends to the current
/// one. `StableIdBuilder` fed `a`, then `b` + `c` gives `stable_id(&["a", "bc"])`.
#[derive(Debug, Clone, Default)]
pub struct StableIdBuilder {
    h: Sha1,
    parts: usize,
}

impl StableIdBuilder {
    pub fn new() -> StableIdBuilder {
        StableIdBuilder::default()
    }

    /// Starts a new part with `s`.
    pub fn part(&mut self, s: &str) -> &mut Self {
        if self.parts > 0 {
            self.h.update([0x1f]);
        }
        self.parts += 1;
        self.h.update(s.as_bytes());
        self
    }

    /// Appends `s` to the current part.
    pub fn extend(&mut self, s: &str) -> &mut Self {
        self.parts = self.parts.max(1);
        self.h.update(s.as_bytes());
        self
    }

    /// The id.
    pub fn finish(self) -> String {
        hex_lower(&self.h.finalize()[..16])
    }

    /// The id, written over `out` (a reused row's id keeps its buffer).
    pub fn finish_into(self, out: &mut String) {
        out.clear();
        push_hex_lower(&self.h.finalize()[..16], out);
    }
}

/// Full SHA-1 of a string, hex (used as an integrity helper in segment metadata).
pub fn sha1_hex(s: &str) -> String {
    hex_lower(&Sha1::digest(s.as_bytes()))
}

/// Lowercase hex of some bytes (what `hex::encode` writes, without its per-char iterator:
/// ids are made for every segment and sample).
pub fn hex_lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex_lower(bytes, &mut out);
    out
}

/// [`hex_lower`] appended to `out`, 32 bytes at a time through a stack buffer.
pub fn push_hex_lower(bytes: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 64];
    for chunk in bytes.chunks(32) {
        let hex = &mut buf[..chunk.len() * 2];
        for (pair, b) in hex.chunks_exact_mut(2).zip(chunk) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 15)];
        }
        out.push_str(std::str::from_utf8(hex).expect("hex digits are ascii"));
    }
}

/// The shard of a key among `n` shards: the first 8 bytes of SHA-1(key) as a big-endian u64,
/// modulo `n`. Deterministic for a given `n`; `n == 0` is treated as 1.
pub fn shard_of(key: &str, n: u32) -> u32 {
    let n = n.max(1) as u64;
    let d = Sha1::digest(key.as_bytes());
    let v = u64::from_be_bytes(d[..8].try_into().expect("sha1 has 20 bytes"));
    (v % n) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_two_lowercase_digits_a_byte_across_chunks() {
        let bytes: Vec<u8> = (0..=255).collect();
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex_lower(&bytes), want);
        let mut out = String::from("id:");
        push_hex_lower(&bytes[..33], &mut out);
        assert_eq!(out, format!("id:{}", &want[..66]));
    }

    #[test]
    fn ids_are_stable_and_separate_parts() {
        assert_eq!(stable_id(&["a", "b"]), stable_id(&["a", "b"]));
        assert_ne!(stable_id(&["ab", ""]), stable_id(&["a", "b"]));
        assert_eq!(stable_id(&["x"]).len(), 32);
        // Known value: guards against an accidental change of the id scheme, which would
        // change every id of every existing output.
        assert_eq!(stable_id(&["hello"]), "aaf4c61ddcc5e8a2dabede0f3b482cd9");
        // Joined on the stack or hashed part by part, the same id.
        let long = "x".repeat(JOINED);
        let joined = format!("a\u{1f}{long}");
        assert_eq!(
            stable_id(&["a", &long]),
            hex_lower(&Sha1::digest(joined.as_bytes())[..16])
        );
        let mut b = StableIdBuilder::new();
        b.part("a").part("").part("bc");
        assert_eq!(stable_id(&["a", "", "bc"]), b.finish());
    }

    #[test]
    fn builder_equals_joined_parts() {
        let mut b = StableIdBuilder::new();
        b.part("a").part("b").extend("c").extend("");
        assert_eq!(b.finish(), stable_id(&["a", "bc"]));
        let mut b = StableIdBuilder::new();
        b.part("").part("x");
        assert_eq!(b.finish(), stable_id(&["", "x"]));
        assert_eq!(StableIdBuilder::new().finish(), stable_id(&[]));
    }

    #[test]
    fn shards_spread_and_are_deterministic() {
        let mut counts = [0u32; 4];
        for i in 0..4000 {
            let s = shard_of(&format!("key{i}"), 4);
            assert_eq!(s, shard_of(&format!("key{i}"), 4));
            counts[s as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 800), "{counts:?}");
        assert_eq!(shard_of("x", 0), 0);
    }
}
