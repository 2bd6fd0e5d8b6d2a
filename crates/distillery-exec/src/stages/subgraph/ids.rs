//! Row ids of the `subgraph` stage without [`stable_id`]'s per-call setup: the same ids (the
//! first 16 bytes of SHA-1 over the parts joined by `0x1f`, in lowercase hex), with the parts
//! every id of a run shares joined once into a buffer that is kept. An index walk makes two
//! ids per row (its edge's `triple_id` and the row's `id`), a large share of its time.
//!
//! [`stable_id`]: distillery_core::id::stable_id

use distillery_core::id::hex_lower;
use sha1::{Digest, Sha1};

/// Ids of parts that begin with the same parts ([`Joined::prefix`]).
#[derive(Debug, Default)]
pub struct Joined {
    buf: Vec<u8>,
    /// The length of the shared parts with their trailing separator (0 with none).
    keep: usize,
}

impl Joined {
    /// Ids that begin with `parts`.
    pub fn prefix(&mut self, parts: &[&str]) {
        self.buf.clear();
        for p in parts {
            self.buf.extend_from_slice(p.as_bytes());
            self.buf.push(0x1f);
        }
        self.keep = self.buf.len();
    }

    /// `stable_id` of the shared parts followed by `parts` (one or more).
    pub fn id(&mut self, parts: &[&str]) -> String {
        self.buf.truncate(self.keep);
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                self.buf.push(0x1f);
            }
            self.buf.extend_from_slice(p.as_bytes());
        }
        hex_lower(&Sha1::digest(&self.buf)[..16])
    }
}

#[cfg(test)]
mod tests {
    use super::Joined;
    use distillery_core::id::stable_id;

    #[test]
    fn ids_are_stable_ids() {
        let long = "é".repeat(200);
        let parts: [&str; 7] = [
            "kg-index",
            "",
            "m.0abc",
            "film.film.genre",
            &long,
            "x",
            "entity",
        ];
        let mut j = Joined::default();
        for n in 0..=parts.len() {
            for cut in 1..=n {
                let (head, tail) = parts[..n].split_at(n - cut);
                j.prefix(head);
                assert_eq!(j.id(tail), stable_id(&parts[..n]), "{n} {cut}");
                // Again, from the kept buffer.
                assert_eq!(j.id(tail), stable_id(&parts[..n]), "{n} {cut}");
            }
        }
        j.prefix(&[]);
        assert_eq!(j.id(&["hello"]), "aaf4c61ddcc5e8a2dabede0f3b482cd9");
        assert_eq!(j.id(&[""]), stable_id(&[""]));
    }
}
