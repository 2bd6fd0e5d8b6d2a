//! Passages spooled to local Parquet files by hash bucket while a build reads its input, then
//! taken back shard by shard ([`crate::build`]): memory stays [`SPOOL_ROWS`] passages while
//! spooling and one shard while building.

use std::path::{Path, PathBuf};

use crate::IndexError;
use crate::build::BuildSpec;
use crate::passage::{self, Passage};

/// Passages spooled to local Parquet files by shard.
#[derive(Debug)]
pub struct Spool {
    dir: PathBuf,
    /// Hash buckets the passages are spooled into: the shard count when it is fixed, else
    /// [`BUCKETS`], which every shard count a build may grow to divides.
    buckets: u32,
    buf: Vec<Vec<Passage>>,
    files: Vec<Vec<PathBuf>>,
    held: usize,
    pub count: u64,
    /// Two order-independent sums of the passages' (id, content hash) hashes.
    pub(crate) sums: [u64; 2],
}

/// Passages held in memory before the spool writes them out.
const SPOOL_ROWS: usize = 131_072;

/// The most shards a build grows to, and the spool's buckets when it may grow.
pub const BUCKETS: u32 = 64;

/// Whether a build with `shards` may grow past them: a power of two up to [`BUCKETS`].
pub fn can_grow(shards: u32) -> bool {
    shards.is_power_of_two() && shards <= BUCKETS
}

impl Spool {
    /// A spool for `shards` shards, or more when `grow` and [`can_grow`]`(shards)`.
    pub fn new(dir: &Path, shards: u32, grow: bool) -> Spool {
        let shards = shards.max(1);
        let buckets = if grow && can_grow(shards) {
            BUCKETS
        } else {
            shards
        };
        Spool {
            dir: dir.to_path_buf(),
            buckets,
            buf: (0..buckets).map(|_| Vec::new()).collect(),
            files: (0..buckets).map(|_| Vec::new()).collect(),
            held: 0,
            count: 0,
            sums: [0; 2],
        }
    }

    pub fn push(&mut self, p: Passage) -> Result<(), IndexError> {
        let s = passage::shard_of(&p.id, self.buckets) as usize;
        // The lineage counts: a new revision with the same text is a new version of the index
        // (the passage names its revision), though nothing is embedded again.
        let key = format!(
            "{}\0{}\0{:?}\0{:?}",
            p.id, p.content_hash, p.page_id, p.revision_id
        );
        for (seed, sum) in self.sums.iter_mut().enumerate() {
            *sum = sum.wrapping_add(twox_hash::XxHash64::oneshot(seed as u64, key.as_bytes()));
        }
        self.buf[s].push(p);
        self.held += 1;
        self.count += 1;
        if self.held >= SPOOL_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), IndexError> {
        for (s, buf) in self.buf.iter_mut().enumerate() {
            if buf.is_empty() {
                continue;
            }
            let f = self
                .dir
                .join(format!("spool-{s:04}-{:05}.parquet", self.files[s].len()));
            passage::write(&f, buf)?;
            self.files[s].push(f);
            buf.clear();
        }
        self.held = 0;
        Ok(())
    }

    /// Every passage of shard `s` of `shards` (which divides the buckets: a passage's
    /// bucket modulo `shards` is its shard), sorted by id, duplicates removed.
    pub(crate) fn take(
        &mut self,
        s: usize,
        shards: u32,
    ) -> Result<(Vec<Passage>, (u64, u64)), IndexError> {
        let mut ps = Vec::new();
        for b in (s..self.buckets as usize).step_by(shards.max(1) as usize) {
            ps.append(&mut self.buf[b]);
            for f in std::mem::take(&mut self.files[b]) {
                ps.extend(passage::read(&f)?);
                let _ = std::fs::remove_file(&f);
            }
        }
        let d = passage::dedup(&mut ps);
        Ok((ps, d))
    }

    /// The shard count of a build: `spec.shards`, or when the spool may grow the smallest
    /// power of two that keeps a shard within `spec.max_shard_passages` (never fewer than
    /// `keep`, the current version's count), up to [`BUCKETS`].
    pub(crate) fn shards_for(&self, spec: &BuildSpec, keep: Option<u32>) -> u32 {
        let fixed = spec.shards.max(1);
        if self.buckets == fixed || spec.max_shard_passages == 0 {
            return fixed;
        }
        let needed = self
            .count
            .div_ceil(spec.max_shard_passages)
            .max(1)
            .next_power_of_two()
            .min(u64::from(BUCKETS)) as u32;
        let keep = keep.filter(|k| can_grow(*k)).unwrap_or(1);
        fixed.max(needed).max(keep)
    }
}
