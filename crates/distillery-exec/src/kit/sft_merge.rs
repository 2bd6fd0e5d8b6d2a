//! The SFT files of a stage that runs as one task per shard of its questions, joined by its
//! merge task so that they do not depend on the shard count.
//!
//! A shard task writes its samples' JSONL lines to its own `<dir>/train.jsonl` and
//! `<dir>/validation.jsonl` and, per sample, one line of a ledger ([`LedgerWriter`]): the
//! sample's content hash, its id, its split and task, and the `sft` part (and so the row)
//! holding it. Shard tasks remove no duplicates themselves. The merge task ([`merge_sft`])
//! reads the ledgers in plan order, in two passes:
//! 1. the winner of each content hash is the sample with the smallest id hash: a rule that
//!    does not depend on which task saw which sample first, so 1, 4 or 16 tasks keep the same
//!    lines;
//! 2. each shard's JSONL files are copied into `<dir>/train.jsonl` / `validation.jsonl` in
//!    plan order, losers left out, and each `sft` part that holds a loser is rewritten
//!    without it (the rewritten part replaces the shard task's at publish). A shard's ledger
//!    is read first to find its losers: a shard without one (the common case) has its files
//!    copied whole, not line by line; one with losers has its ledger read once more, with
//!    its files, line by line. With one shard task and no duplicate its files are published
//!    as they are (no copy).
//!
//! A ledger line also marks a sample whose chat-template control tokens were neutralised
//! (`distillery_label::sft::neutralise_control_tokens`); the merge counts the kept ones.
//!
//! Memory: one entry (content hash → winner) per distinct sample, about 48 bytes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::Hasher;

use arrow::array::BooleanArray;
use arrow::compute::filter_record_batch;
use distillery_core::SftSample;
use distillery_core::TableKind;
use distillery_core::summary::{ManifestFile, StageSummary};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;

use distillery_label::sft::{carries_neutralised_token, neutralise_control_tokens};
use tracing::warn;

use crate::contract::{AdoptedFile, ShardOutput};
use crate::error::ExecError;
use crate::kit::jsonl::{TextFile, dataset_info};
use crate::parts::{PartId, PartWriters, WrittenPart, read_part};
use crate::store::Location;

/// The ledger's lines, one per sample, in the order the shard task wrote them.
pub(crate) const LEDGER: &str = "_merge/sft-ledger.jsonl";
/// The ledger's head: the parts its lines point into and the counters counted once per
/// stage.
pub(crate) const LEDGER_HEAD: &str = "_merge/sft-ledger.json";

/// The `once` entry that is the stage's `bytes_in` of what every task reads alike, not a
/// counter.
pub(crate) const SHARED_BYTES_IN: &str = "_bytes_in";

/// One sample of a shard task.
#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    /// The content hash (32 hex digits).
    h: String,
    id: String,
    split: String,
    task: String,
    /// Index of the `sft` part in [`Head::parts`].
    p: u32,
    /// Whether chat-template control tokens of the sample's source text were neutralised
    /// (left out when not, so the ledgers of other samples are as before).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    c: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Head {
    /// `sft` parts (paths relative to the attempt directory).
    parts: Vec<String>,
    /// Counters that every shard task counts alike (added once, from the first shard).
    once: BTreeMap<String, u64>,
}

/// Writes a shard task's ledger as its samples are written.
pub(crate) struct LedgerWriter {
    out: Location,
    staging: String,
    lines: TextFile,
    head: Head,
    index: HashMap<String, u32>,
}

impl LedgerWriter {
    pub(crate) fn new(out: &Location, staging: &str) -> LedgerWriter {
        LedgerWriter {
            out: out.clone(),
            staging: staging.to_string(),
            lines: TextFile::new(out, staging, LEDGER),
            head: Head::default(),
            index: HashMap::new(),
        }
    }

    /// Records a sample written to the `sft` part `part` (its path relative to the attempt
    /// directory), after the samples recorded before it.
    pub(crate) async fn add(
        &mut self,
        s: &SftSample,
        hash: u128,
        part: &str,
    ) -> Result<(), ExecError> {
        let p = match self.index.get(part) {
            Some(&p) => p,
            None => {
                let p = self.head.parts.len() as u32;
                self.head.parts.push(part.to_string());
                self.index.insert(part.to_string(), p);
                p
            }
        };
        let e = Entry {
            h: format!("{hash:032x}"),
            id: s.id.clone(),
            split: s.split.clone(),
            task: s.task.clone(),
            p,
            c: neutralised(s),
        };
        let mut line = serde_json::to_string(&e).expect("entries serialize");
        line.push('\n');
        self.lines.write(&line).await
    }

    /// Sets a counter every shard task counts alike (the merge adds it once).
    pub(crate) fn once(&mut self, counter: &str, n: u64) {
        self.head.once.insert(counter.to_string(), n);
    }

    /// Closes the ledger: its files, staged for the merge task.
    pub(crate) async fn finish(self) -> Result<Vec<ManifestFile>, ExecError> {
        let lines = self.lines.finish().await?;
        let head = serde_json::to_vec(&self.head).expect("heads serialize");
        let bytes = head.len() as u64;
        self.out
            .write(&format!("{}/{LEDGER_HEAD}", self.staging), head)
            .await?;
        Ok(vec![
            lines,
            ManifestFile {
                path: LEDGER_HEAD.to_string(),
                rows: 1,
                bytes,
            },
        ])
    }
}

/// Whether a sample's messages had chat-template control tokens neutralised (or still hold
/// one, which its JSONL line neutralises).
fn neutralised(s: &SftSample) -> bool {
    s.messages.iter().any(|m| {
        carries_neutralised_token(&m.content) || neutralise_control_tokens(&m.content).is_some()
    })
}

/// The summary counter of the kept samples whose control tokens were neutralised.
pub(crate) const CONTROL_TOKENS_NEUTRALISED: &str = "control_tokens_neutralised";

/// What [`merge_sft`] staged.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pub files: Vec<ManifestFile>,
    pub adopted: Vec<AdoptedFile>,
    /// `sft` parts rewritten without their duplicates.
    pub parts: Vec<WrittenPart>,
}

/// The key that picks a duplicate's winner: a hash of its id, smallest wins.
fn id_key(id: &str) -> u64 {
    let mut h = twox_hash::XxHash64::with_seed(0x1d5e_ed01);
    h.write(id.as_bytes());
    h.finish()
}

fn parse_entry(line: &[u8], show: &str) -> Result<(u128, Entry), ExecError> {
    let e: Entry = serde_json::from_slice(line)
        .map_err(|err| ExecError::Task(format!("{show}: bad ledger line: {err}")))?;
    let h = u128::from_str_radix(&e.h, 16)
        .map_err(|err| ExecError::Task(format!("{show}: bad ledger hash {}: {err}", e.h)))?;
    Ok((h, e))
}

/// Calls `f` on each line of a staged text file (newline included), in order.
pub(crate) async fn each_line(
    out: &Location,
    rel: &str,
    mut f: impl FnMut(&[u8]) -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let mut r = out.reader(rel).await?;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .await
            .map_err(|e| ExecError::output(out.show(rel), e.to_string()))?;
        if n == 0 {
            return Ok(());
        }
        f(&buf)?;
    }
}

/// A staged JSONL file read line by line, on demand.
struct LineReader {
    rel: String,
    show: String,
    reader: Box<dyn tokio::io::AsyncBufRead + Unpin + Send>,
}

impl LineReader {
    async fn open(out: &Location, rel: &str) -> Result<LineReader, ExecError> {
        Ok(LineReader {
            rel: rel.to_string(),
            show: out.show(rel),
            reader: Box::new(out.reader(rel).await?),
        })
    }

    async fn next(&mut self, buf: &mut Vec<u8>) -> Result<(), ExecError> {
        buf.clear();
        let n = self
            .reader
            .read_until(b'\n', buf)
            .await
            .map_err(|e| ExecError::output(&self.show, e.to_string()))?;
        if n == 0 {
            return Err(ExecError::Task(format!(
                "{}: fewer lines than its ledger lists ({})",
                self.show, self.rel
            )));
        }
        Ok(())
    }
}

/// Joins the SFT files the shard tasks staged under `dir` (`sft`, or a teacher stage's name)
/// into the merge task's directory `staging`: see the module's documentation. Counts
/// `samples.<task>`, `samples.<split>`, `duplicates_removed`, `control_tokens_neutralised`
/// (kept samples whose source text had chat-template control tokens broken; only when some
/// had, with a warning) and the kept samples in `records_out`.
pub(crate) async fn merge_sft(
    out: &Location,
    staging: &str,
    dir: &str,
    shards: &[ShardOutput],
    summary: &mut StageSummary,
) -> Result<Merged, ExecError> {
    let ledger = |s: &ShardOutput, rel: &str| format!("{}/{rel}", s.output.dir);
    // Pass 1: the winner of every content hash.
    // The samples per task and split are counted too: when nothing is dropped they are the
    // stage's counts, and pass 2 needs no second read.
    let mut winner: HashMap<u128, u64> = HashMap::new();
    let mut entries = 0u64;
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    // The content hashes of neutralised samples: one kept sample each.
    let mut neutralised: HashSet<u128> = HashSet::new();
    for s in shards {
        let rel = ledger(s, LEDGER);
        let show = out.show(&rel);
        each_line(out, &rel, |line| {
            let (h, e) = parse_entry(line, &show)?;
            entries += 1;
            if e.c {
                neutralised.insert(h);
            }
            *per.entry(format!("samples.{}", e.task)).or_default() += 1;
            *per.entry(format!("samples.{}", e.split)).or_default() += 1;
            let k = id_key(&e.id);
            winner
                .entry(h)
                .and_modify(|w| *w = (*w).min(k))
                .or_insert(k);
            Ok(())
        })
        .await?;
    }
    let duplicates = entries - winner.len() as u64;
    summary.add("duplicates_removed", duplicates);
    if !neutralised.is_empty() {
        let n = neutralised.len() as u64;
        summary.add(CONTROL_TOKENS_NEUTRALISED, n);
        warn!(
            stage = %summary.stage,
            samples = n,
            "chat-template control tokens in source text neutralised in sft samples"
        );
    }
    if let Some(first) = shards.first() {
        let head: Head = read_head(out, &ledger(first, LEDGER_HEAD)).await?;
        for (k, n) in head.once {
            if k == SHARED_BYTES_IN {
                summary.bytes_in += n;
            } else {
                summary.add(&k, n);
            }
        }
    }
    let splits = ["train", "validation"];
    let mut merged = Merged::default();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    if duplicates == 0 && shards.len() == 1 {
        // Pass 2 needs no copy: the one shard's files are the stage's.
        let s = &shards[0];
        for (k, n) in &per {
            summary.add(k, *n);
        }
        summary.records_out += entries;
        for split in splits {
            let path = format!("{dir}/{split}.jsonl");
            if let Some(f) = s.output.intermediate.iter().find(|f| f.path == path) {
                counts.insert(split, f.rows);
                merged.adopted.push(AdoptedFile {
                    dir: s.output.dir.clone(),
                    file: f.clone(),
                });
            }
        }
    } else {
        // Pass 2: copy the kept lines, note the rows of the losers.
        let mut files: Vec<TextFile> = splits
            .iter()
            .map(|split| TextFile::new(out, staging, &format!("{dir}/{split}.jsonl")))
            .collect();
        let mut emitted: HashSet<u128> = HashSet::with_capacity(winner.len());
        let mut line = Vec::new();
        for s in shards {
            let head: Head = read_head(out, &ledger(s, LEDGER_HEAD)).await?;
            let rel = ledger(s, LEDGER);
            let show = out.show(&rel);
            // Which of the shard's samples lose (their indices in its ledger, ascending;
            // duplicates are rare), the kept ones counted.
            let (mut lose, mut index) = (Vec::new(), 0u64);
            each_line(out, &rel, |buf| {
                let (h, e) = parse_entry(buf, &show)?;
                if winner.get(&h) == Some(&id_key(&e.id)) && emitted.insert(h) {
                    summary.add(&format!("samples.{}", e.task), 1);
                    summary.add(&format!("samples.{}", e.split), 1);
                    summary.records_out += 1;
                } else {
                    lose.push(index);
                }
                index += 1;
                Ok(())
            })
            .await?;
            if lose.is_empty() {
                // Every line is kept: the shard's files are copied whole, in big chunks.
                for (i, split) in splits.iter().enumerate() {
                    let path = format!("{dir}/{split}.jsonl");
                    if let Some(f) = s.output.intermediate.iter().find(|f| f.path == path) {
                        files[i]
                            .copy_from(out, &ledger(s, &path), f.bytes, f.rows)
                            .await?;
                    }
                }
                continue;
            }
            // Opened when the ledger first names a sample of their split.
            let mut readers: [Option<LineReader>; 2] = [None, None];
            let mut rows = vec![0u64; head.parts.len()];
            let mut losers: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            let mut r = LineReader::open(out, &rel).await?;
            let (mut buf, mut index, mut next_loser) = (Vec::new(), 0u64, lose.iter().peekable());
            loop {
                buf.clear();
                let n = r
                    .reader
                    .read_until(b'\n', &mut buf)
                    .await
                    .map_err(|e| ExecError::output(&show, e.to_string()))?;
                if n == 0 {
                    break;
                }
                let (_, e) = parse_entry(&buf, &show)?;
                let i = usize::from(e.split == "validation");
                if readers[i].is_none() {
                    let rel = ledger(s, &format!("{dir}/{}.jsonl", splits[i]));
                    readers[i] = Some(LineReader::open(out, &rel).await?);
                }
                let reader = readers[i].as_mut().expect("opened above");
                reader.next(&mut line).await?;
                let row = rows
                    .get_mut(e.p as usize)
                    .ok_or_else(|| ExecError::Task(format!("{show}: no part {}", e.p)))?;
                if next_loser.peek() == Some(&&index) {
                    next_loser.next();
                    losers.entry(e.p).or_default().push(*row);
                } else {
                    let text = std::str::from_utf8(&line)
                        .map_err(|err| ExecError::Task(format!("{}: {err}", reader.show)))?;
                    files[i].write(text).await?;
                }
                *row += 1;
                index += 1;
            }
            for (p, rows) in losers {
                let rel = &head.parts[p as usize];
                let part = s
                    .output
                    .parts
                    .iter()
                    .find(|w| &w.rel == rel)
                    .ok_or_else(|| ExecError::Task(format!("{}: no part {rel}", s.task)))?;
                merged
                    .parts
                    .extend(rewrite_without(out, staging, part, &rows).await?);
            }
        }
        for (f, split) in files.into_iter().zip(splits) {
            let f = f.finish().await?;
            counts.insert(split, f.rows);
            merged.files.push(f);
        }
    }
    let kept: Vec<(&str, String)> = splits
        .iter()
        .filter(|s| counts.get(*s).copied().unwrap_or(0) > 0)
        .map(|s| (*s, format!("{s}.jsonl")))
        .collect();
    let kept: Vec<(&str, &str)> = kept.iter().map(|(s, f)| (*s, f.as_str())).collect();
    let mut info = serde_json::to_vec_pretty(&dataset_info(&kept)).expect("json serializes");
    info.push(b'\n');
    let path = format!("{dir}/dataset_info.json");
    let bytes = info.len() as u64;
    out.write(&format!("{staging}/{path}"), info).await?;
    merged.files.push(ManifestFile {
        path,
        rows: kept.len() as u64,
        bytes,
    });
    // What the output holds: the files, and the rewritten parts in place of the originals
    // the shard tasks counted.
    let replaced: u64 = shards
        .iter()
        .flat_map(|s| &s.output.parts)
        .filter(|w| merged.parts.iter().any(|m| m.rel == w.rel))
        .map(|w| w.bytes)
        .sum();
    summary.bytes_out = (summary.bytes_out
        + merged.files.iter().map(|f| f.bytes).sum::<u64>()
        + merged.parts.iter().map(|w| w.bytes).sum::<u64>())
    .saturating_sub(replaced);
    Ok(merged)
}

async fn read_head(out: &Location, rel: &str) -> Result<Head, ExecError> {
    let b = out.read(rel).await?;
    serde_json::from_slice(&b)
        .map_err(|e| ExecError::Task(format!("{}: bad ledger head: {e}", out.show(rel))))
}

/// Rewrites an `sft` part without the rows `drop` (ascending) into `staging`, under the same
/// path.
async fn rewrite_without(
    out: &Location,
    staging: &str,
    part: &WrittenPart,
    drop: &[u64],
) -> Result<Vec<WrittenPart>, ExecError> {
    let PartId {
        table, shard, tag, ..
    } = part
        .id()
        .ok_or_else(|| ExecError::Task(format!("{}: not a part name", part.rel)))?;
    debug_assert_eq!(table, TableKind::Sft);
    let mut w = PartWriters::new(out.clone(), staging, &tag);
    // Opened first: a part whose every row was a duplicate is replaced by an empty one.
    w.open_part(table, shard)?;
    let mut stream = Box::pin(read_part(out, &part.path()).await?);
    let (mut row, mut next) = (0u64, drop.iter().peekable());
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let keep: BooleanArray = (0..batch.num_rows())
            .map(|_| {
                let dropped = next.peek() == Some(&&row);
                if dropped {
                    next.next();
                }
                row += 1;
                Some(!dropped)
            })
            .collect();
        let kept = filter_record_batch(&batch, &keep)
            .map_err(|e| ExecError::Task(format!("{}: {e}", part.rel)))?;
        w.write(table, shard, &kept).await?;
    }
    w.finish().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::jsonl::{content_hash, jsonl_line};
    use crate::parts::count_rows;
    use crate::store::open_location;
    use distillery_core::Message;
    use distillery_core::schema::sft_batch;

    fn sample(id: &str, user: &str) -> SftSample {
        SftSample {
            id: id.into(),
            task: "hseq_iteration".into(),
            split: "train".into(),
            messages: vec![
                Message {
                    role: "user".into(),
                    content: user.into(),
                },
                Message {
                    role: "assistant".into(),
                    content: "ok".into(),
                },
            ],
            params: "{}".into(),
            ..Default::default()
        }
    }

    /// Stages one shard task's samples (one `sft` part of `shard`) under `dir`.
    async fn shard(out: &Location, dir: &str, shard: u32, samples: &[SftSample]) -> ShardOutput {
        let mut parts = PartWriters::new(out.clone(), dir, "t-0000");
        parts
            .write(TableKind::Sft, shard, &sft_batch(samples).unwrap())
            .await
            .unwrap();
        let parts = parts.finish().await.unwrap();
        let mut train = TextFile::new(out, dir, "sft/train.jsonl");
        let mut ledger = LedgerWriter::new(out, dir);
        for s in samples {
            train.write(&jsonl_line(s)).await.unwrap();
            ledger.add(s, content_hash(s), &parts[0].rel).await.unwrap();
        }
        ledger.once("decontaminate.questions", 7);
        let mut intermediate = vec![train.finish().await.unwrap()];
        intermediate.extend(ledger.finish().await.unwrap());
        ShardOutput {
            task: format!("stage/label/shard-{shard:05}"),
            output: crate::contract::TaskOutput {
                parts,
                dir: dir.to_string(),
                intermediate,
                ..Default::default()
            },
        }
    }

    async fn kept(out: &Location, shards: &[ShardOutput], into: &str) -> (Vec<String>, Merged) {
        let mut summary = StageSummary::default();
        let merged = merge_sft(out, into, "sft", shards, &mut summary)
            .await
            .unwrap();
        assert_eq!(summary.counters["duplicates_removed"], 2);
        assert_eq!(summary.counters["samples.train"], 2);
        assert_eq!(summary.counters["decontaminate.questions"], 7);
        assert_eq!(summary.records_out, 2);
        let text = out.read(&format!("{into}/sft/train.jsonl")).await.unwrap();
        let mut lines: Vec<String> = String::from_utf8(text.to_vec())
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        (lines, merged)
    }

    #[tokio::test]
    async fn duplicates_across_shards_keep_one_winner_whatever_the_order() {
        let out = open_location("memory://sft-merge-test", true).unwrap();
        // "x" three times over two shards, "y" once; shard b holds only copies of "x".
        let a = shard(&out, "a", 0, &[sample("a1", "x"), sample("a2", "y")]).await;
        let b = shard(&out, "b", 1, &[sample("b1", "x"), sample("b2", "x")]).await;
        let (a2, b2) = (a.clone(), b.clone());
        let (one, m1) = kept(&out, &[a, b], "m1").await;
        let (two, m2) = kept(&out, &[b2.clone(), a2.clone()], "m2").await;
        assert_eq!(one, two, "the winner depends on the shard order");
        assert_eq!(one.len(), 2);
        // The parts holding losers are rewritten; with the rewrites in place of the shards'
        // parts, the `sft` table holds the two rows the JSONL kept, in both orders.
        let originals: Vec<WrittenPart> = [&a2, &b2]
            .iter()
            .flat_map(|s| s.output.parts.clone())
            .collect();
        for m in [&m1, &m2] {
            assert!(m.adopted.is_empty());
            assert!(!m.parts.is_empty());
            let mut rows = 0;
            for o in &originals {
                let p = m.parts.iter().find(|p| p.rel == o.rel).unwrap_or(o);
                rows += count_rows(&out, &p.path()).await.unwrap();
            }
            assert_eq!(rows, 2, "{:?}", m.parts);
        }
    }

    #[tokio::test]
    async fn neutralised_samples_are_counted_once_each_and_never_written_raw() {
        let out = open_location("memory://sft-merge-neutralised", true).unwrap();
        // Raw tokens (neutralised by the line), already neutralised text, a duplicate of the
        // first, and a plain sample.
        let mut pre = sample("a2", "q <|eot_id|>");
        assert!(distillery_label::sft::neutralise_messages(
            &mut pre.messages
        ));
        let a = shard(
            &out,
            "a",
            0,
            &[
                sample("a1", "q <|im_end|> [INST]"),
                pre,
                sample("a3", "plain"),
            ],
        )
        .await;
        let b = shard(&out, "b", 1, &[sample("b1", "q <|im_end|> [INST]")]).await;
        let mut summary = StageSummary::default();
        merge_sft(&out, "m", "sft", &[a, b], &mut summary)
            .await
            .unwrap();
        assert_eq!(summary.counters[CONTROL_TOKENS_NEUTRALISED], 2);
        assert_eq!(summary.counters["duplicates_removed"], 1);
        let text = out.read("m/sft/train.jsonl").await.unwrap();
        let text = String::from_utf8(text.to_vec()).unwrap();
        assert_eq!(text.lines().count(), 3);
        for raw in ["<|im_end|>", "[INST]", "<|eot_id|>"] {
            assert!(!text.contains(raw), "{text}");
        }
        assert!(
            text.contains("q <\u{200b}|im_end|> [\u{200b}INST]"),
            "{text}"
        );

        // Without any, no counter.
        let c = shard(&out, "c", 0, &[sample("c1", "plain")]).await;
        let mut summary = StageSummary::default();
        merge_sft(&out, "m2", "sft", &[c], &mut summary)
            .await
            .unwrap();
        assert!(!summary.counters.contains_key(CONTROL_TOKENS_NEUTRALISED));
    }
}
