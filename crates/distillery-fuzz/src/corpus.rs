//! Seed inputs of each target: the committed seeds of `fuzz/seeds/<target>/` (files in the
//! real formats, turned into inputs with the target's selector byte by [`inputs_of_seed`]),
//! slices of the shared samples of `../shared/data` ([`shared_inputs`]), and the regression
//! inputs of `fuzz/regressions/<target>/` (raw inputs, replayed as they are).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::{QA_FORMATS, SIDE};

/// Bytes taken from the start of a shared sample.
pub const SHARED_SLICE: usize = 64 << 10;

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared/data` beside the repository (or `$DISTILLERY_SHARED_DATA`), when present.
pub fn shared_root() -> Option<PathBuf> {
    let p = std::env::var_os("DISTILLERY_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data"));
    p.is_dir().then_some(p)
}

/// The files of a directory, sorted by name, as (name, bytes); none when it is absent.
fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<u8>)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (!name.starts_with('.'))
                .then(|| std::fs::read(e.path()).ok().map(|b| (name, b)))
                .flatten()
        })
        .collect();
    out.sort();
    out
}

/// The regression inputs of a target, as they are.
pub fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    files_in(&repo_root().join("fuzz/regressions").join(target))
}

/// The committed seeds of a target, as inputs.
pub fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, bytes) in files_in(&repo_root().join("fuzz/seeds").join(target)) {
        for (i, input) in inputs_of_seed(target, &name, &bytes)
            .into_iter()
            .enumerate()
        {
            out.push((format!("{name}#{i}"), input));
        }
    }
    if target == "pipeline" {
        for (name, bytes) in files_in(&repo_root().join("pipelines")) {
            if name.ends_with(".toml") {
                out.push((format!("pipelines/{name}"), bytes));
            }
        }
    }
    if target == "multistream_index" {
        let (dump, index) = crate::multistream_dump();
        out.push(("fixed-index".into(), with_byte(0, index.as_bytes())));
        out.push(("fixed-dump".into(), with_byte(1, dump)));
    }
    out
}

fn with_byte(b: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(rest.len() + 1);
    v.push(b);
    v.extend_from_slice(rest);
    v
}

/// The selector of a QA format name (`hotpotqa`, `metaqa-kb`, ...).
fn qa_selector(name: &str) -> Option<u8> {
    let f = distillery_core::spec::Format::from_name(name)?;
    QA_FORMATS.iter().position(|q| *q == f).map(|i| i as u8)
}

/// The inputs a seed file of `target` named `name` stands for:
///
/// - `multistream_index`: `*.txt` is an index (selector 0), anything else a dump (1);
/// - `ntriples`, `wikidata`: the file with flags 0 (plain), 3 (gzip, ranges) and 6 (ranges, the
///   format's other options);
/// - `json_array`: flags 0 and 1 (small item limit);
/// - `qa`: the format is the name up to its first `.` (`metaqa-kb.txt`); side files are in the
///   file after `--side--` lines already; also read in ranges (selector + 128);
/// - `teacher`: the parser is the number the name starts with (`03-ras.txt`);
/// - `search_query`: each line is a query, with `k` = 10;
/// - others: the file as it is.
pub fn inputs_of_seed(target: &str, name: &str, bytes: &[u8]) -> Vec<Vec<u8>> {
    match target {
        "multistream_index" => {
            vec![with_byte(u8::from(!name.ends_with(".txt")), bytes)]
        }
        "ntriples" | "wikidata" => [0u8, 3, 6].iter().map(|f| with_byte(*f, bytes)).collect(),
        "json_array" => vec![with_byte(0, bytes), with_byte(1, bytes)],
        "qa" => {
            let format = name.split('.').next().unwrap_or(name);
            match qa_selector(format) {
                Some(s) => vec![with_byte(s, bytes), with_byte(s + 128, bytes)],
                None => Vec::new(),
            }
        }
        "teacher" => {
            let digits: String = name.chars().take_while(char::is_ascii_digit).collect();
            match digits.parse::<u8>() {
                Ok(s) => vec![with_byte(s, bytes)],
                Err(_) => Vec::new(),
            }
        }
        "search_query" => bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| with_byte(10, l))
            .collect(),
        _ => vec![bytes.to_vec()],
    }
}

/// Up to `max` bytes of a file, decompressed when it is bz2 or gzip; `None` when unreadable.
fn head(path: &Path, max: usize) -> Option<Vec<u8>> {
    let raw = std::fs::read(path).ok()?;
    let mut out = Vec::new();
    let r: Box<dyn Read> = if raw.starts_with(b"BZh") {
        Box::new(bzip2::read::MultiBzDecoder::new(raw.as_slice()))
    } else if raw.starts_with(&[0x1f, 0x8b]) {
        Box::new(flate2::read::MultiGzDecoder::new(raw.as_slice()))
    } else {
        Box::new(raw.as_slice())
    };
    let _ = r.take(max as u64).read_to_end(&mut out);
    Some(out)
}

/// Cut at the last newline, so line formats get whole lines.
fn whole_lines(mut b: Vec<u8>) -> Vec<u8> {
    if let Some(i) = b.iter().rposition(|c| *c == b'\n') {
        b.truncate(i + 1);
    }
    b
}

/// The `<text>` bodies of a dump's pages, unescaped: wikitext seeds.
fn page_texts(xml: &[u8]) -> Vec<Vec<u8>> {
    let s = String::from_utf8_lossy(xml);
    let mut out = Vec::new();
    let mut rest = s.as_ref();
    while let Some(i) = rest.find("<text") {
        let Some(open_end) = rest[i..].find('>') else {
            break;
        };
        let body = &rest[i + open_end + 1..];
        let end = body.find("</text>").unwrap_or(body.len());
        let text = body[..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&amp;", "&");
        out.push(text.into_bytes());
        rest = &body[end..];
    }
    out
}

/// Inputs of `target` made from the shared samples under `root` (first [`SHARED_SLICE`] bytes
/// of each relevant file).
pub fn shared_inputs(target: &str, root: &Path) -> Vec<(String, Vec<u8>)> {
    let get = |rel: &str| head(&root.join(rel), SHARED_SLICE);
    let lines = |rel: &str| get(rel).map(whole_lines);
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    let mut push = |name: &str, b: Option<Vec<u8>>| {
        if let Some(b) = b {
            out.push((name.to_string(), b));
        }
    };
    match target {
        "wikitext" => {
            if let Some(xml) = head(
                &root.join("wikipedia_xml/enwiki-table-markup.xml.bz2"),
                1 << 22,
            ) {
                for (i, t) in page_texts(&xml).into_iter().enumerate() {
                    let mut t = t;
                    t.truncate(SHARED_SLICE);
                    push(&format!("enwiki-table-markup page {i}"), Some(t));
                }
            }
        }
        "mediawiki" => {
            for rel in [
                "wikipedia_xml/enwiki-table-markup.xml.bz2",
                "wikimedia-incr/wikidatawiki-20140220-pages-meta-hist-incr.sample.xml",
                "wikimedia-incr/elwikivoyage-stub-meta-history.sample.xml.gz",
                "wikimedia-incr/wikidata-testwiki-modern-entity-json.sample.xml.bz2",
                "wikimedia-incr/enwiki-pages-logging.sample.xml",
            ] {
                push(rel, get(rel));
                // The compressed file as it is, when small: the decompressing paths.
                if let Ok(raw) = std::fs::read(root.join(rel))
                    && raw.len() <= SHARED_SLICE
                    && (raw.starts_with(b"BZh") || raw.starts_with(&[0x1f, 0x8b]))
                {
                    push(&format!("{rel} (compressed)"), Some(raw));
                }
            }
        }
        "multistream_index" => {
            let rel = "wikimedia-incr/wikidata-testwiki-modern-entity-json.sample.xml.bz2";
            push(
                rel,
                std::fs::read(root.join(rel)).ok().map(|b| with_byte(1, &b)),
            );
        }
        "ntriples" => {
            let rel = "freebase/freebase-rdf-latest.head10k.nt";
            for f in [0u8, 3] {
                push(rel, lines(rel).map(|b| with_byte(f, &b)));
            }
        }
        "wikidata" => {
            let rel = "wikidata/entities.first35.json";
            for f in [0u8, 3] {
                push(rel, lines(rel).map(|b| with_byte(f, &b)));
            }
        }
        "json_array" => {
            for rel in [
                "hotpotqa/hotpot_dev_distractor_v1.head.json",
                "hotpotqa/hotpot_dev_fullwiki_v1.amor200.jsonl",
                "2wikimultihopqa/hipporag_2wikimultihopqa.first5.json",
                "tatqa/tatqa_dataset_dev.first200.json",
                "wikidata/entities.first35.json",
                "kgqa/cwq.first30.json",
                "musique/musique_ans_v1.0_train.first70.jsonl",
            ] {
                push(rel, get(rel).map(|b| with_byte(0, &b)));
            }
        }
        "qa" => {
            let qa = |format: &str, b: Option<Vec<u8>>| -> Option<Vec<u8>> {
                Some(with_byte(qa_selector(format)?, &b?))
            };
            let join = |main: Option<Vec<u8>>, sides: &[Option<Vec<u8>>]| -> Option<Vec<u8>> {
                let mut v = main?;
                for s in sides {
                    v.extend_from_slice(SIDE);
                    v.extend_from_slice(s.as_deref().unwrap_or_default());
                }
                Some(v)
            };
            let table = "hybridqa/WikiTables-WithLinks/tables_tok/List_of_National_Football_League_rushing_yards_leaders_0.json";
            let request = "hybridqa/WikiTables-WithLinks/request_tok/List_of_National_Football_League_rushing_yards_leaders_0.first8.json";
            let cases: Vec<(&str, &str, Option<Vec<u8>>)> = vec![
                (
                    "hotpotqa",
                    "hotpotqa/hotpot_dev_distractor_v1.head.json",
                    get("hotpotqa/hotpot_dev_distractor_v1.head.json"),
                ),
                (
                    "hotpotqa",
                    "hotpotqa/hotpot_dev_fullwiki_v1.amor200.jsonl",
                    lines("hotpotqa/hotpot_dev_fullwiki_v1.amor200.jsonl"),
                ),
                (
                    "musique",
                    "musique/musique_ans_v1.0_train.first70.jsonl",
                    lines("musique/musique_ans_v1.0_train.first70.jsonl"),
                ),
                (
                    "2wiki",
                    "2wikimultihopqa/hipporag_2wikimultihopqa.first5.json",
                    get("2wikimultihopqa/hipporag_2wikimultihopqa.first5.json"),
                ),
                (
                    "hybridqa",
                    "hybridqa/dev.json",
                    join(
                        get("hybridqa/dev.json").map(|b| b[..b.len().min(16 << 10)].to_vec()),
                        &[get(table), get(request)],
                    ),
                ),
                (
                    "tatqa",
                    "tatqa/tatqa_dataset_dev.first200.json",
                    get("tatqa/tatqa_dataset_dev.first200.json"),
                ),
                (
                    "metaqa",
                    "metaqa/1-hop/test.txt",
                    join(
                        head(&root.join("metaqa/1-hop/test.txt"), 8 << 10).map(whole_lines),
                        &[head(&root.join("metaqa/1-hop/qa_test_qtype.txt"), 2 << 10)
                            .map(whole_lines)],
                    ),
                ),
                ("cwq", "kgqa/cwq.first30.json", get("kgqa/cwq.first30.json")),
                (
                    "simpleqa",
                    "kgqa/SimpleQA.first30.json",
                    get("kgqa/SimpleQA.first30.json"),
                ),
                (
                    "webquestions",
                    "kgqa/WebQuestions.first30.json",
                    get("kgqa/WebQuestions.first30.json"),
                ),
                (
                    "qald",
                    "kgqa/qald_10-en.first30.json",
                    get("kgqa/qald_10-en.first30.json"),
                ),
                (
                    "hotpotadv",
                    "kgqa/hotpotadv.first30.json",
                    get("kgqa/hotpotadv.first30.json"),
                ),
                (
                    "zeroshot-re",
                    "kgqa/Zero_Shot_RE.first30.json",
                    get("kgqa/Zero_Shot_RE.first30.json"),
                ),
                (
                    "fb15k",
                    "fb15k237/test.tsv",
                    join(
                        head(&root.join("fb15k237/test.tsv"), 8 << 10).map(whole_lines),
                        &[head(&root.join("fb15k237/FB15k_mid2name.txt"), 8 << 10)
                            .map(whole_lines)],
                    ),
                ),
                (
                    "metaqa-kb",
                    "metaqa/kb.head.txt",
                    lines("metaqa/kb.head.txt"),
                ),
                (
                    "wikiofgraph",
                    "wikiofgraph/example_filtered.jsonl",
                    lines("wikiofgraph/example_filtered.jsonl"),
                ),
            ];
            for (format, rel, b) in cases {
                push(rel, qa(format, b));
            }
        }
        _ => {}
    }
    out
}

/// Every seed input of a target: regressions, committed seeds, and shared slices when the
/// samples are present.
pub fn all_inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = regressions(target);
    out.extend(seeds(target));
    if let Some(root) = shared_root() {
        out.extend(shared_inputs(target, &root));
    }
    out
}

/// A content hash naming a corpus file (64-bit FNV-1a).
pub fn content_name(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("seed-{h:016x}")
}

/// Writes every seed input of `target` into `dir` (named by content hash); returns how many.
pub fn write_corpus(target: &str, dir: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let inputs = all_inputs(target);
    for (_, bytes) in &inputs {
        let name = content_name(bytes);
        std::fs::write(dir.join(name), bytes)?;
    }
    Ok(inputs.len())
}
