//! `answer-aware`: a teacher-free labeller that picks the evidence chain of a question at
//! sentence granularity instead of every container that holds the answer.
//!
//! Deterministic, no model, no gold evidence: it reads the question text, its type (for the
//! hop count), its answers and its context. Per question:
//!
//! 1. **Units**: the finest evidence segments of S_h — `sentence`, `table_row` and `triplet`
//!    segments, and paragraphs that have no sentences (gap paragraphs excluded); roots and
//!    containers are never positives. Units are grouped by `source_id` (a context document,
//!    table or subgraph: a *source*); a source's *title* is its document's title (else its
//!    root's content) without a trailing parenthetical (`Kiss and Tell (1945 film)` → `Kiss
//!    and Tell`), normalised; its *head* is the title before a comma (`McRae, Arkansas` →
//!    `McRae`). The first text unit of a document is its *lead*.
//! 2. **Scores**: a small Okapi BM25 (k1 = 1.2, b = 0.75) of the question's content words
//!    (normalised tokens minus a stop list) over the question's units, and a second one over
//!    the source titles. Outside contexts with a table, a unit's score is half that BM25 and
//!    half the same BM25 over Snowball English stems ([`super::stems`]: "campuses" meets
//!    "campus"). A unit *holds the answer* when it contains a normalised answer
//!    variant ([`crate::normalize::answer_variants`]) as whole words, or, for an arithmetic
//!    question (TAT-QA), one of the numbers its derivation computes the answer from
//!    ([`crate::normalize::derivation_operands`]) found in at most 3 units: such an answer
//!    is in no segment, its operands are.
//! 3. **Source score**: best unit BM25 / best over all sources + title BM25 / best title
//!    BM25 × the share of the title's content words the question contains + 1 if the
//!    question names the title (0.5 if only its head) + 1 if a unit of the source holds the
//!    answer.
//! 4. **Chain**: the number of sources wanted is the hop count of the question type (`Nhop…`
//!    or `N-hop` → N, as in MuSiQue and MetaQA; `bridge_comparison` → 4; otherwise 2, which
//!    covers bridge and comparison questions). Sources are chosen greedily; a candidate gains
//!    1 for every chosen source with a unit that mentions its title (a *bridge*: the second
//!    hop of a chain) and 0.5 for every chosen source whose title it mentions. The chain ends
//!    at the answer: when some source holds the answer and none chosen so far does, the last
//!    slot goes to the best source that holds it. Then the chain is pruned (not in contexts
//!    with a table): after the first source, a source stays when it holds the answer, or when
//!    some chosen source does and it is linked by a title mention (either way) to one kept
//!    before it: a retriever's context misses gold documents, and the greedy chain fills
//!    their slots with distractors. A `comparison` question that names sources' titles (or
//!    heads) takes those sources instead, best first.
//! 5. **Positives**, per chosen source in chain order, units in text order. A source holding
//!    the answer gives its answer units: of its sentences only the one with the best BM25
//!    (`exact` 1.0 when the unit is the answer, else `substring` 0.9), and every other
//!    answer unit (rows, triplets) and operand unit (`operand` 0.85), and its *best unit*
//!    when that unit holds no answer and its BM25 reaches half the question's best (`bm25`,
//!    lexical, 0.5 × its share: what the question asks beside the answer). A source without
//!    it gives the units mentioning another chosen source's title (`bridge`, 0.8), its best
//!    unit on the same terms, and its lead sentence (`lead`, 0.6: it names and defines the
//!    entity the other sentences refer to) when neither of those picked a unit, or always in
//!    a `comparison` question. The best unit is ranked by BM25 over the question terms that
//!    are not words of the source's own title (every unit of a page is about its title).
//!    With none of these (tables, subgraphs), its best unit alone.
//!    Measured on HotpotQA: docs/benchmarks.md, "Weak positives on retrieved contexts".
//!
//! `low_confidence` is set when fewer than `min_positives` positives hold the answer or an
//! operand (always for yes/no questions). `candidates` is the number of units.

use super::bm25::Bm25;
use super::stems::{QueryStems, STEM_WEIGHT, stems};
use super::{Method, Positive, Positives, Prepared, is_gap, is_root};
use crate::normalize::{
    Phrase, answer_variants, contains_phrase, derivation_operands, normalize_answer, tokens,
};
use crate::options::LabelOptions;
use distillery_core::{Question, Segment};
use distillery_hseq::level;
use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};

/// The method's name.
pub const NAME: &str = "answer-aware";

/// An operand of an arithmetic derivation found in more units than this is not matched.
const MAX_OPERAND_UNITS: usize = 3;

/// Function words and question words left out of BM25 queries and title checks (sorted).
const STOP: &[&str] = &[
    "about", "after", "also", "am", "and", "are", "as", "at", "be", "been", "before", "being",
    "between", "both", "but", "by", "can", "could", "did", "do", "does", "down", "during",
    "either", "for", "from", "had", "has", "have", "he", "her", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "many", "more", "most", "much", "no", "not", "of", "on",
    "one", "only", "or", "other", "our", "out", "over", "own", "same", "she", "should", "so",
    "such", "than", "that", "their", "them", "then", "there", "these", "they", "this", "those",
    "to", "under", "up", "was", "we", "were", "what", "when", "where", "which", "who", "whom",
    "whose", "why", "will", "with", "would", "yes", "you", "your",
];

/// A word of at most 8 bytes packed into a `u64` (little-endian, zero-padded); `None` for a
/// longer word. Normalised words hold no NUL byte, so packing is one-to-one on them.
fn packed(w: &str) -> Option<u64> {
    let b = w.as_bytes();
    (b.len() <= 8).then(|| {
        let mut buf = [0u8; 8];
        buf[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(buf)
    })
}

/// [`STOP`] packed ([`packed`]) and sorted, for the stop test of query and title words
/// (comparing integers is several times cheaper than comparing strings). The words of the
/// units are looked up in [`scan_units`]'s per-question table instead.
static STOP_PACKED: std::sync::LazyLock<Vec<u64>> = std::sync::LazyLock::new(|| {
    let mut v: Vec<u64> = STOP.iter().filter_map(|w| packed(w)).collect();
    v.sort_unstable();
    v
});

fn is_stop(w: &str) -> bool {
    packed(w).is_some_and(|p| STOP_PACKED.binary_search(&p).is_ok())
}

/// Content words: normalised tokens minus the stop list.
fn content_terms(s: &str) -> Vec<String> {
    tokens(s).into_iter().filter(|w| !is_stop(w)).collect()
}

/// The hop count of a question: `Nhop…`/`N-hop` in its type or level, 4 for 2Wiki's
/// `bridge_comparison`, else 2.
pub fn hops(q: &Question) -> usize {
    let parse = |s: &str| -> Option<usize> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        let rest = s[digits.len()..].trim_start_matches(['-', '_', ' ']);
        if digits.is_empty() || !rest.to_lowercase().starts_with("hop") {
            return None;
        }
        digits.parse().ok().filter(|&n| n > 0)
    };
    let t = q.question_type.as_deref().unwrap_or_default();
    parse(t)
        .or_else(|| q.level.as_deref().and_then(parse))
        .unwrap_or(if t == "bridge_comparison" { 4 } else { 2 })
}

/// A title without a trailing parenthetical qualifier.
fn core_title(t: &str) -> &str {
    let t = t.trim();
    if t.ends_with(')')
        && let Some(p) = t.rfind('(')
        && p > 0
    {
        return t[..p].trim_end();
    }
    t
}

/// A normalised title worth matching: it has a content word.
fn title_form(s: &str) -> String {
    let n = normalize_answer(s);
    if n.split(' ').any(|w| !w.is_empty() && !is_stop(w)) {
        n
    } else {
        String::new()
    }
}

struct Unit<'p> {
    seg: usize,
    norm: &'p str,
    lead: bool,
}

#[derive(Default)]
struct Source {
    title: String,
    head: String,
    terms: Vec<String>,
    /// [`Source::terms`] stemmed, where the question's terms are matched by stem.
    stems: Vec<String>,
    units: Vec<usize>,
}

/// What the unit scan needs to know about a word: whether it is a stop word, which query
/// term it is, and which sources' titles start with it.
#[derive(Default)]
struct WordInfo {
    stop: bool,
    query: Option<usize>,
    titles: Vec<usize>,
}

/// What one pass over every unit's words gives.
struct UnitScan {
    /// `tf[u * query.len() + j]`: occurrences of query term `j` in unit `u`.
    tf: Vec<u32>,
    /// `stem_tf[u * stems + j]`: words of unit `u` whose stem is query stem `j` (empty without
    /// stems).
    stem_tf: Vec<u32>,
    /// Per unit: its words that are not stop words.
    lens: Vec<f64>,
    /// `names[p][u]`: unit `u`, of a source other than `p`, contains the title of source `p`
    /// as whole words ([`contains_phrase`]).
    names: Vec<Vec<bool>>,
}

/// Scans each unit's words once, looking each word up once in a per-question table of the
/// words that matter (stop words, query terms, first words of titles) instead of testing
/// it against the stop list, the query and every title in turn. Titles are compared where
/// their first word occurs (both texts are normalised: words separated by single spaces).
/// With `stems`, the words that are not stop words are also counted by stem.
fn scan_units(
    query: &[String],
    stems: Option<&QueryStems>,
    sources: &[Source],
    units: &[Unit<'_>],
    unit_src: &[usize],
) -> UnitScan {
    let mut words: HashMap<&str, WordInfo> = HashMap::with_capacity(STOP.len() + 32);
    for w in STOP {
        words.entry(w).or_default().stop = true;
    }
    for (j, q) in query.iter().enumerate() {
        words.entry(q.as_str()).or_default().query = Some(j);
    }
    for (p, s) in sources.iter().enumerate() {
        if let Some(first) = s.title.split(' ').next().filter(|w| !w.is_empty()) {
            words.entry(first).or_default().titles.push(p);
        }
    }
    let mut scan = UnitScan {
        tf: Vec::with_capacity(units.len() * query.len()),
        stem_tf: Vec::with_capacity(units.len() * stems.map_or(0, |s| s.terms.len())),
        lens: Vec::with_capacity(units.len()),
        names: vec![vec![false; units.len()]; sources.len()],
    };
    // Per distinct word that may match a stem: its query stem.
    let mut stem_of: HashMap<&str, Option<usize>> = HashMap::new();
    for (u, unit) in units.iter().enumerate() {
        let text = unit.norm;
        let counts = scan.tf.len();
        scan.tf.resize(counts + query.len(), 0);
        let stem_counts = scan.stem_tf.len();
        scan.stem_tf
            .resize(stem_counts + stems.map_or(0, |s| s.terms.len()), 0);
        let mut len = 0usize;
        let mut at = 0;
        for w in text.split(' ') {
            let info = words.get(w);
            if let Some(s) = stems
                && !info.is_some_and(|i| i.stop)
                && s.may_match(w)
                && let Some(j) = *stem_of.entry(w).or_insert_with(|| s.find(w))
            {
                scan.stem_tf[stem_counts + j] += 1;
            }
            match info {
                None => len += 1,
                Some(info) => {
                    len += usize::from(!info.stop);
                    if let Some(j) = info.query {
                        scan.tf[counts + j] += 1;
                    }
                    let rest = &text[at..];
                    for &p in &info.titles {
                        let title = sources[p].title.as_str();
                        if p != unit_src[u]
                            && rest.starts_with(title)
                            && (rest.len() == title.len() || rest.as_bytes()[title.len()] == b' ')
                        {
                            scan.names[p][u] = true;
                        }
                    }
                }
            }
            at += w.len() + 1;
        }
        scan.lens.push(len as f64);
    }
    scan
}

/// Per unit, its BM25 over the query terms that are not words of its own source's title
/// (`title_terms` of the source, in the query's form: exact words or stems).
fn own_scores(
    bm: &Bm25,
    query: &[String],
    sources: &[Source],
    unit_src: &[usize],
    title_terms: impl Fn(&Source) -> &Vec<String>,
) -> Vec<f64> {
    let in_title: Vec<Vec<bool>> = sources
        .iter()
        .map(|s| query.iter().map(|w| title_terms(s).contains(w)).collect())
        .collect();
    (0..unit_src.len())
        .map(|u| bm.score_of(u, |j| !in_title[unit_src[u]][j]))
        .collect()
}

/// The greedy chain: `want` sources by [`base`] score, a candidate gaining 1 for every chosen
/// source that mentions its title and 0.5 for every chosen source whose title it mentions; the
/// last slot goes to a source holding the answer when none chosen so far does (the chain ends
/// at the answer).
fn greedy_chain(
    eligible: &[usize],
    want: usize,
    base: &[f64],
    holds: &[bool],
    mentions: &[Vec<bool>],
) -> Vec<usize> {
    let mut chosen: Vec<usize> = Vec::with_capacity(want);
    let answer_somewhere = eligible.iter().any(|&p| holds[p]);
    while chosen.len() < want {
        let reserve =
            chosen.len() + 1 == want && answer_somewhere && !chosen.iter().any(|&c| holds[c]);
        let mut best: Option<(f64, usize)> = None;
        for &p in eligible {
            if chosen.contains(&p) || (reserve && !holds[p]) {
                continue;
            }
            let mut s = base[p];
            for &c in &chosen {
                if mentions[c][p] {
                    s += 1.0;
                }
                if mentions[p][c] {
                    s += 0.5;
                }
            }
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, p));
            }
        }
        let Some((_, p)) = best else { break };
        chosen.push(p);
    }
    chosen
}

/// The chain without the hops a retrieved context lacks: after the first source, a source
/// stays when it holds the answer, or when the chain reaches the answer and it is linked (by a
/// title mention, either way) to a source kept before it. A retriever's context often misses
/// one of the gold documents; the greedy chain then fills the slot with the best remaining
/// source, which is a distractor (on HotpotQA fullwiki contexts 131 of 344 chosen sources
/// were, against 11 of 106 on distractor contexts).
fn prune_chain(chosen: Vec<usize>, holds: &[bool], mentions: &[Vec<bool>]) -> Vec<usize> {
    let reached = chosen.iter().any(|&c| holds[c]);
    let mut kept: Vec<usize> = Vec::with_capacity(chosen.len());
    for p in chosen {
        let linked = kept.iter().any(|&c| mentions[c][p] || mentions[p][c]);
        if kept.is_empty() || holds[p] || (reached && linked) {
            kept.push(p);
        }
    }
    kept
}

/// A unit of a source without an answer is picked for its question terms when its BM25 is
/// at least this share of the question's best unit.
const BM25_PICK_SHARE: f64 = 0.5;

/// What picking the units of a chosen source reads.
struct Picks<'a, 'p> {
    units: &'a [Unit<'p>],
    sources: &'a [Source],
    /// Per unit: 3 is an answer, 2 holds one, 1 holds a derivation operand, 0 none.
    answer: &'a [u8],
    names: &'a [Vec<bool>],
    unit_bm: &'a [f64],
    /// Per unit: its BM25 over the question terms that are not words of its source's title.
    unit_own: &'a [f64],
    max_bm: f64,
    sh: &'a [Segment],
    /// A `comparison` question: its sources' leads are kept beside their other picks.
    comparison: bool,
}

impl Picks<'_, '_> {
    /// The positives of chosen source `c`, in text order. A source holding the answer gives its
    /// answer units (of its sentences only the one with the best BM25, earliest on a tie: a
    /// retrieved page repeats its answer in sentences that do not support it), operand units
    /// and its best unit when it holds no answer and its BM25 reaches [`BM25_PICK_SHARE`] of
    /// the question's best (`bm25`). A source without it gives the units that mention another chosen source's title
    /// (`bridge`), its best unit (BM25 without its own title's words) when that unit's BM25
    /// reaches [`BM25_PICK_SHARE`] of the question's best (`bm25`), and its lead sentence
    /// (`lead`) when neither picked a unit or the question is a comparison; with none of these
    /// (tables, subgraphs) its best unit alone.
    fn source(&self, c: usize, chosen: &[usize], items: &mut Vec<Positive>) {
        let units = &self.sources[c].units;
        let share = |u: usize| {
            if self.max_bm > 0.0 {
                self.unit_bm[u] / self.max_bm
            } else {
                0.0
            }
        };
        // The best BM25 unit, the earliest on a tie.
        let best_of = |it: &mut dyn Iterator<Item = usize>| {
            it.fold(None, |b: Option<usize>, u| match b {
                Some(x) if self.unit_bm[x] >= self.unit_bm[u] => Some(x),
                _ => Some(u),
            })
        };
        let is_sentence = |u: usize| self.sh[self.units[u].seg].level == level::SENTENCE;
        let holds = units.iter().any(|&u| self.answer[u] > 0);
        let best_sentence_answer = best_of(
            &mut units
                .iter()
                .copied()
                .filter(|&u| self.answer[u] >= 2 && is_sentence(u)),
        );
        // The unit that best matches what the question asks beyond naming this source's
        // entity: every unit of a page is about its title, so the title's words tell none of
        // them apart (the earliest on a tie).
        let best = units
            .iter()
            .copied()
            .fold(None, |b: Option<usize>, u| match b {
                Some(x) if self.unit_own[x] >= self.unit_own[u] => Some(x),
                _ => Some(u),
            });
        let bridged = |u: usize| chosen.iter().any(|&o| o != c && self.names[o][u]);
        let lexical_pick = |u: usize| Some(u) == best && share(u) >= BM25_PICK_SHARE;
        // The lead only names the entity; when another unit links the chain or matches the
        // question, that unit is the evidence (except in comparisons, whose compared facts
        // (born, founded) the lead usually holds).
        let lead_too = self.comparison
            || !units
                .iter()
                .any(|&u| !self.units[u].lead && (bridged(u) || lexical_pick(u)));
        let start = items.len();
        for &u in units {
            let unit = &self.units[u];
            let (reason, score, lexical) = if holds {
                match self.answer[u] {
                    a if a >= 2 && is_sentence(u) && Some(u) != best_sentence_answer => continue,
                    3 => ("exact", 1.0, false),
                    2 => ("substring", 0.9, false),
                    1 => ("operand", 0.85, false),
                    // What the question asks beside the answer (`studied with John Cage` on
                    // the composer's page): the bm25 pick of any source.
                    _ if lexical_pick(u) => ("bm25", 0.5 * share(u), true),
                    _ => continue,
                }
            } else if bridged(u) {
                ("bridge", 0.8, false)
            } else if unit.lead && lead_too {
                ("lead", 0.6, false)
            } else if lexical_pick(u) {
                ("bm25", 0.5 * share(u), true)
            } else {
                continue;
            };
            items.push(Positive {
                index: unit.seg,
                reason: reason.into(),
                score,
                lexical,
            });
        }
        if items.len() == start
            && let Some(u) = best
        {
            items.push(Positive {
                index: self.units[u].seg,
                reason: "bm25".into(),
                score: 0.5 * share(u),
                lexical: true,
            });
        }
    }
}

/// The answer-aware labeller.
#[derive(Debug, Clone)]
pub struct AnswerAware {
    pub min_positives: usize,
    pub k1: f64,
    pub b: f64,
}

impl AnswerAware {
    pub fn new(opts: &LabelOptions) -> AnswerAware {
        AnswerAware {
            min_positives: opts.min_positives as usize,
            k1: 1.2,
            b: 0.75,
        }
    }
}

impl Method for AnswerAware {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> serde_json::Value {
        serde_json::json!({
            "min_positives": self.min_positives,
            "bm25": {"k1": self.k1, "b": self.b},
            "stems": {"stemmer": "snowball english", "weight": STEM_WEIGHT, "not_with": "tables"},
            "hops": "Nhop/N-hop type or level -> N, bridge_comparison -> 4, else 2",
            "source_score": "unit bm25 + title bm25 + title in question (1, head 0.5) + answer (1)",
            "chain": {"bridge_in": 1.0, "bridge_out": 0.5},
            "prune": "after the first source: holds the answer, or linked when the chain reaches it; not with tables",
            "comparison": "the sources whose titles the question names",
            "answer_sentences": "the best bm25 one per source, and the source's bm25 pick",
            "title_score": "title bm25 share x share of the title's words in the question",
            "best_unit": "bm25 over the question terms not in the source's title",
            "lead": "only when no bridge or bm25 unit of the source is picked; always in comparisons",
            "bm25_pick_share": BM25_PICK_SHARE,
            "reasons": {"exact": 1.0, "substring": 0.9, "operand": 0.85, "bridge": 0.8, "lead": 0.6, "bm25": 0.5},
        })
    }

    fn label(&self, q: &Question, sh: &[Segment], ctx: &crate::QuestionContext<'_>) -> Positives {
        self.label_prepared(q, sh, &Prepared::new(sh), ctx)
    }

    fn label_prepared(
        &self,
        q: &Question,
        sh: &[Segment],
        prep: &Prepared<'_>,
        ctx: &crate::QuestionContext<'_>,
    ) -> Positives {
        // Sources and their titles.
        let mut src_ix: HashMap<&str, usize> = HashMap::new();
        let mut sources: Vec<Source> = Vec::new();
        let mut raw_titles: Vec<Option<String>> = Vec::new();
        for s in sh {
            let i = *src_ix.entry(s.source_id.as_str()).or_insert_with(|| {
                sources.push(Source::default());
                raw_titles.push(None);
                sources.len() - 1
            });
            if is_root(&s.level) && raw_titles[i].is_none() {
                let t = match s.level.as_str() {
                    level::DOCUMENT => ctx
                        .documents
                        .iter()
                        .find(|d| d.id == s.source_id)
                        .map_or_else(|| s.content.clone(), |d| d.title.clone()),
                    level::TABLE => ctx.tables.iter().find(|t| t.id == s.source_id).map_or_else(
                        || s.content.lines().next().unwrap_or_default().to_string(),
                        |t| t.title.clone(),
                    ),
                    _ => s.content.clone(),
                };
                raw_titles[i] = Some(t);
            }
        }
        for (src, raw) in sources.iter_mut().zip(&raw_titles) {
            // HotpotQA's titles keep the HTML escape of `&` (`Richard Hornsby &amp; Sons`);
            // its questions and sentences do not.
            let raw = raw.as_deref().unwrap_or_default().replace("&amp;", "&");
            let core = core_title(&raw);
            src.title = title_form(core);
            let head = title_form(core.split(',').next().unwrap_or_default());
            if head != src.title {
                src.head = head;
            }
            src.terms = content_terms(core);
        }

        // Units.
        let sentence_parents: HashSet<&str> = sh
            .iter()
            .filter(|s| s.level == level::SENTENCE)
            .filter_map(|s| s.parent.as_deref())
            .collect();
        let mut units: Vec<Unit> = Vec::new();
        let mut lead_of: HashMap<usize, (i64, usize)> = HashMap::new();
        for (i, s) in sh.iter().enumerate() {
            let text_unit = s.level == level::SENTENCE
                || (s.level == level::PARAGRAPH
                    && !is_gap(s)
                    && !sentence_parents.contains(s.id.as_str()));
            if !(text_unit || s.level == level::TABLE_ROW || s.level == level::TRIPLET) {
                continue;
            }
            let norm = prep.norm(i);
            if norm.is_empty() {
                continue;
            }
            let src = src_ix[s.source_id.as_str()];
            let u = units.len();
            if text_unit {
                let start = s.offsets.first().copied().unwrap_or(i64::MAX);
                let e = lead_of.entry(src).or_insert((start, u));
                if start < e.0 {
                    *e = (start, u);
                }
            }
            sources[src].units.push(u);
            units.push(Unit {
                seg: i,
                norm,
                lead: false,
            });
        }
        for (_, u) in lead_of.values() {
            units[*u].lead = true;
        }

        // Scores.
        let mut query = content_terms(&q.question);
        let mut seen = HashSet::new();
        query.retain(|w| seen.insert(w.clone()));
        // names[p][u]: unit u (of another source) mentions the title of source p.
        let mut unit_src = vec![0; units.len()];
        for (c, s) in sources.iter().enumerate() {
            for &u in &s.units {
                unit_src[u] = c;
            }
        }
        // Question terms also match by stem in prose; a context with a table (TAT-QA,
        // HybridQA) keeps exact words (docs/benchmarks.md, issue 58).
        let has_table = sh.iter().any(|s| s.level == level::TABLE);
        let query_stems = (!has_table).then(|| QueryStems::new(&query));
        let UnitScan {
            tf,
            stem_tf,
            lens,
            names,
        } = scan_units(&query, query_stems.as_ref(), &sources, &units, &unit_src);
        let bm = Bm25::from_counts(tf, query.len(), lens.clone(), self.k1, self.b);
        let mut unit_bm: Vec<f64> = (0..units.len()).map(|u| bm.score(u)).collect();
        let mut unit_own = own_scores(&bm, &query, &sources, &unit_src, |s| &s.terms);
        if let Some(qs) = &query_stems {
            for s in &mut sources {
                s.stems = stems(&s.terms);
            }
            let sbm = Bm25::from_counts(stem_tf, qs.terms.len(), lens, self.k1, self.b);
            let stem_own = own_scores(&sbm, &qs.terms, &sources, &unit_src, |s| &s.stems);
            for u in 0..units.len() {
                unit_bm[u] = (1.0 - STEM_WEIGHT) * unit_bm[u] + STEM_WEIGHT * sbm.score(u);
                unit_own[u] = (1.0 - STEM_WEIGHT) * unit_own[u] + STEM_WEIGHT * stem_own[u];
            }
        }
        let tbm = Bm25::new(
            &query,
            sources.iter().map(|s| s.terms.iter().map(String::as_str)),
            self.k1,
            self.b,
        );
        let variants = answer_variants(q);
        let phrases: Vec<Phrase<'_>> = variants.iter().map(|v| Phrase::new(v)).collect();
        let operands = derivation_operands(q);
        // Per unit, whether it holds an operand of the answer's derivation; an operand found
        // in more than MAX_OPERAND_UNITS units (a year or day that many sentences or cells
        // repeat) says nothing about which one the derivation read.
        let mut operand = vec![false; units.len()];
        for o in &operands {
            let phrase = Phrase::new(o);
            let hits: Vec<usize> = (0..units.len())
                .filter(|&u| phrase.in_text(units[u].norm))
                .collect();
            if hits.len() <= MAX_OPERAND_UNITS {
                for u in hits {
                    operand[u] = true;
                }
            }
        }
        // 3 = the unit is an answer, 2 = it contains one, 1 = it holds an operand of the
        // answer's derivation, 0 = none of these.
        let answer: Vec<u8> = units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                if variants.iter().any(|v| v == u.norm) {
                    3
                } else if phrases.iter().any(|p| p.in_text(u.norm)) {
                    2
                } else if operand[i] {
                    1
                } else {
                    0
                }
            })
            .collect();

        let qn = normalize_answer(&q.question);
        let n = sources.len();
        let holds: Vec<bool> = sources
            .iter()
            .map(|s| s.units.iter().any(|&u| answer[u] > 0))
            .collect();
        let best_bm: Vec<f64> = sources
            .iter()
            .map(|s| s.units.iter().map(|&u| unit_bm[u]).fold(0.0, f64::max))
            .collect();
        let title_bm: Vec<f64> = (0..n).map(|i| tbm.score(i)).collect();
        let max_bm = best_bm.iter().copied().fold(0.0, f64::max);
        let max_tbm = title_bm.iter().copied().fold(0.0, f64::max);
        let share = |x: f64, m: f64| if m > 0.0 { x / m } else { 0.0 };
        let base: Vec<f64> = (0..n)
            .map(|i| {
                let s = &sources[i];
                let named = if contains_phrase(&qn, &s.title) {
                    1.0
                } else if contains_phrase(&qn, &s.head) {
                    0.5
                } else {
                    0.0
                };
                // The title's BM25 share, scaled by how much of the title the question
                // contains: a title sharing one common word with the question ("Freedom
                // Watch with Judge Napolitano" for "a judge on a television show") is no
                // sign the question is about its entity.
                let title_share = if s.terms.is_empty() {
                    0.0
                } else {
                    s.terms.iter().filter(|w| query.contains(w)).count() as f64
                        / s.terms.len() as f64
                };
                share(best_bm[i], max_bm)
                    + share(title_bm[i], max_tbm) * title_share
                    + named
                    + if holds[i] { 1.0 } else { 0.0 }
            })
            .collect();
        // mentions[c][p]: a unit of source c mentions the title of source p.
        let mentions: Vec<Vec<bool>> = (0..n)
            .map(|c| {
                (0..n)
                    .map(|p| p != c && sources[c].units.iter().any(|&u| names[p][u]))
                    .collect()
            })
            .collect();

        // Chain.
        let eligible: Vec<usize> = (0..n).filter(|&i| !sources[i].units.is_empty()).collect();
        let want = hops(q).min(eligible.len());
        let named = |p: usize| {
            contains_phrase(&qn, &sources[p].title) || contains_phrase(&qn, &sources[p].head)
        };
        let chosen = if q.question_type.as_deref() == Some("comparison")
            && eligible.iter().any(|&p| named(p))
        {
            // A comparison is about the entities it names: their sources, best first.
            let mut named_srcs: Vec<usize> =
                eligible.iter().copied().filter(|&p| named(p)).collect();
            named_srcs.sort_by(|a, b| base[*b].total_cmp(&base[*a]));
            named_srcs.truncate(want);
            named_srcs
        } else {
            let chain = greedy_chain(&eligible, want, &base, &holds, &mentions);
            // A context with a table (TAT-QA, HybridQA) is one report or one table with the
            // passages it links: no source of it is a retriever's distractor.
            if has_table {
                chain
            } else {
                prune_chain(chain, &holds, &mentions)
            }
        };

        // Positives.
        let pick = Picks {
            units: &units,
            sources: &sources,
            answer: &answer,
            names: &names,
            unit_bm: &unit_bm,
            unit_own: &unit_own,
            max_bm,
            sh,
            comparison: q.question_type.as_deref() == Some("comparison"),
        };
        let mut items = Vec::new();
        for &c in &chosen {
            pick.source(c, &chosen, &mut items);
        }
        let positives = Positives {
            items,
            candidates: units.len() as u32,
            low_confidence: false,
            teacher: None,
        };
        Positives {
            low_confidence: positives.answer_matched() < self.min_positives,
            ..positives
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_list_is_sorted() {
        assert!(STOP.windows(2).all(|w| w[0] < w[1]));
        // Every stop word packs, so the packed test is the list test.
        assert_eq!(STOP_PACKED.len(), STOP.len());
        for w in STOP {
            assert!(is_stop(w));
        }
        for w in ["", "ab", "thereof", "betweenness", "a", "the", "zz"] {
            assert_eq!(is_stop(w), STOP.contains(&w), "{w}");
        }
    }

    #[test]
    fn titles_and_hops() {
        assert_eq!(core_title("Kiss and Tell (1945 film)"), "Kiss and Tell");
        assert_eq!(core_title("(Untitled)"), "(Untitled)");
        let q = |t: &str, l: Option<&str>| Question {
            question_type: Some(t.into()),
            level: l.map(str::to_string),
            ..Default::default()
        };
        assert_eq!(hops(&q("3hop1", None)), 3);
        assert_eq!(hops(&q("t1", Some("2-hop"))), 2);
        assert_eq!(hops(&q("bridge_comparison", None)), 4);
        assert_eq!(hops(&q("bridge", None)), 2);
    }
}
