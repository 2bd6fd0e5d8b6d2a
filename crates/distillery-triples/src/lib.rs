//! Triple extraction with a teacher LLM, HippoRAG style: named entities first, then OpenIE
//! triples over the passage and its entities, every call through the response cache so
//! nothing is extracted twice.
//!
//! - [`passages`] cuts a [`Document`] into passages (its paragraphs, or the whole text) and
//!   keeps each passage's sentences with their char offsets in the document;
//!   [`Passage::split`] and [`Passage::pieces`] cut a passage too long for the teacher's
//!   context into pieces at sentence starts (inside a sentence only when one sentence alone
//!   is too long), each piece keeping its sentences' offsets in the document;
//! - [`prompt`]: the NER and OpenIE chats (one-shot, templates replaceable from files);
//! - [`parse`]: robust parsing (fences, prose around JSON, truncated JSON), only
//!   three-string triples kept, duplicates dropped;
//! - [`Extractor::extract`]: both calls for one passage through
//!   [`distillery_llm::cached_chat`] (temperature 0, structured output);
//! - [`fit::Fitter`]: cuts a passage whose prompts would not fit the teacher's context into
//!   pieces that do (counted by the server's `/tokenize`), the cuts kept in the cache;
//! - [`align`]: the supporting sentence of each triple (provenance);
//! - [`openie`]: HippoRAG's OpenIE JSON export and normalised entity keys;
//! - [`ras`]: the RAS text-to-triple form `(S> s| P> p| O> o)` and Python `repr` of lists.
//!
//! Dependencies: `schemars` (the schema of [`TriplesOptions`] for `docs/pipelines.md`),
//! `distillery-llm` (client and cache), `md-5` (HippoRAG's chunk ids are MD5),
//! `hex`, `serde_json`, `tokio` (the context asked once, backoff between counts), `futures`
//! (a passage's pieces extracted together), `tracing`, `serde` (the `triples` stage options, [`TriplesOptions`], live here because
//! every stage that extracts triples builds its extractor from them).

pub mod align;
pub mod fit;
pub mod openie;
pub mod options;
pub mod parse;
pub mod prompt;
/// The RAS text-to-triple form, kept in `distillery-core` so that readers share it.
pub use distillery_core::ras_form as ras;

pub use options::{TRIPLE_EXPORTS, TriplesOptions};

use std::sync::Arc;

use distillery_core::{Document, ErrorKind, HasKind};
use distillery_llm::{
    CacheKey, ChatRequest, Client, LlmError, Outcome, ResponseCache, cached_chat,
};

use crate::align::SentenceSpan;
use crate::parse::{NerParser, OpenIeParser, entities_of, triples_of};
use crate::prompt::{Constraint, NER_TEMPLATE, OPENIE_TEMPLATE, Prompts};

/// Errors of extraction.
#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error("template {path}: {message}")]
    Template { path: String, message: String },
    #[error(transparent)]
    Llm(#[from] LlmError),
}

impl HasKind for ExtractError {
    fn kind(&self) -> ErrorKind {
        match self {
            ExtractError::Template { .. } => ErrorKind::Fatal,
            ExtractError::Llm(e) => e.kind(),
        }
    }
}

/// What a passage is cut from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// One passage per paragraph (the whole text when the document has none).
    Paragraph,
    /// One passage per document.
    Document,
}

impl Unit {
    pub fn from_name(s: &str) -> Option<Unit> {
        match s {
            "paragraph" => Some(Unit::Paragraph),
            "document" => Some(Unit::Document),
            _ => None,
        }
    }
}

/// A passage of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Passage {
    pub document_id: String,
    pub title: String,
    /// The document's source file.
    pub source: String,
    /// Position of the passage in its document (paragraph index, 0 for a whole document).
    pub index: u32,
    /// Char offset of `text` in the document's text.
    pub start: u32,
    pub text: String,
    /// The sentences inside the passage, offsets in the document's text (chars). A piece
    /// cut inside a sentence keeps that whole sentence.
    pub sentences: Vec<SentenceSpan>,
    /// `Some(k)` for the `k`-th piece of passage `index` ([`Passage::pieces`]).
    pub piece: Option<u32>,
}

impl Passage {
    /// What the model reads, and what HippoRAG's export stores: `title + "\n" + text`.
    pub fn content(&self) -> String {
        format!("{}\n{}", self.title, self.text)
    }

    /// HippoRAG's chunk id of the passage: the MD5 of its content, so a piece (whose
    /// content is its own text) has its own.
    pub fn chunk_id(&self) -> String {
        openie::chunk_id(&self.title, &self.text)
    }

    /// Char offset in the document where `text` ends.
    pub fn end(&self) -> u32 {
        self.start + self.text.chars().count() as u32
    }

    /// Where to cut the passage so that no piece's text is longer than `max_chars` chars:
    /// the pieces' `(start, end)` char offsets in the document, in order, covering the
    /// passage's text with no gap. Cuts fall at sentence starts, each piece taking as many
    /// whole sentences as fit; a sentence longer than `max_chars` is cut after the last
    /// whitespace of the second half of the window, else at `max_chars`. One span (the
    /// whole passage) when it fits.
    pub fn split(&self, max_chars: u32) -> Vec<(u32, u32)> {
        let max = max_chars.max(1);
        let (start, end) = (self.start, self.end());
        let chars: Vec<char> = self.text.chars().collect();
        let mut starts: Vec<u32> = self
            .sentences
            .iter()
            .map(|s| s.start)
            .filter(|&s| s > start && s < end)
            .collect();
        starts.sort_unstable();
        starts.dedup();
        let mut out = Vec::new();
        let mut cur = start;
        while end - cur > max {
            let limit = cur + max;
            let at_sentence = starts.iter().rev().find(|&&s| s > cur && s <= limit);
            let cut = match at_sentence {
                Some(&s) => s,
                None => (cur + max / 2 + 1..=limit)
                    .rev()
                    .find(|&c| chars[(c - 1 - start) as usize].is_whitespace())
                    .unwrap_or(limit),
            };
            out.push((cur, cut));
            cur = cut;
        }
        out.push((cur, end));
        out
    }

    /// The pieces of the passage at `spans` (offsets in the document inside the passage,
    /// as [`Passage::split`] gives them), numbered in order; blank ones are left out. A
    /// piece has the passage's document, title, source and index, its own text, and the
    /// sentences it overlaps (a sentence cut in two is in both pieces, whole; a passage
    /// without sentence spans gets the piece itself as its one sentence).
    pub fn pieces(&self, spans: &[(u32, u32)]) -> Vec<Passage> {
        let (start, end) = (self.start, self.end());
        spans
            .iter()
            .map(|&(a, b)| (a.clamp(start, end), b.clamp(start, end)))
            .filter(|&(a, b)| {
                b > a
                    && !char_slice(&self.text, a - start, b - start)
                        .trim()
                        .is_empty()
            })
            .enumerate()
            .map(|(k, (a, b))| {
                let text = char_slice(&self.text, a - start, b - start).to_string();
                let sentences = self
                    .sentences
                    .iter()
                    .filter(|s| s.start < b && s.end > a)
                    .map(|s| {
                        if s.index == u32::MAX {
                            SentenceSpan {
                                index: u32::MAX,
                                start: a,
                                end: b,
                                text: text.clone(),
                            }
                        } else {
                            s.clone()
                        }
                    })
                    .collect();
                Passage {
                    document_id: self.document_id.clone(),
                    title: self.title.clone(),
                    source: self.source.clone(),
                    index: self.index,
                    start: a,
                    text,
                    sentences,
                    piece: Some(k as u32),
                }
            })
            .collect()
    }
}

fn char_slice(text: &str, a: u32, b: u32) -> &str {
    let mut idx = text.char_indices().map(|(i, _)| i).chain([text.len()]);
    let start = idx.nth(a as usize).unwrap_or(text.len());
    let end = if b > a {
        idx.nth((b - a - 1) as usize).unwrap_or(text.len())
    } else {
        start
    };
    &text[start..end]
}

/// The passages of a document, in order; blank ones are left out.
pub fn passages(doc: &Document, unit: Unit) -> Vec<Passage> {
    let n = doc.text.chars().count() as u32;
    let spans: Vec<(u32, u32, u32)> = match unit {
        Unit::Paragraph if !doc.paragraphs.is_empty() => doc
            .paragraphs
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u32, p.start.min(n), p.end.min(n)))
            .collect(),
        _ => vec![(0, 0, n)],
    };
    spans
        .into_iter()
        .filter_map(|(index, a, b)| {
            let text = char_slice(&doc.text, a, b.max(a));
            if text.trim().is_empty() {
                return None;
            }
            let sentences = doc
                .sentences
                .iter()
                .enumerate()
                .filter(|(_, s)| s.start >= a && s.end <= b && s.end > s.start)
                .map(|(i, s)| SentenceSpan {
                    index: i as u32,
                    start: s.start,
                    end: s.end,
                    text: char_slice(&doc.text, s.start, s.end).to_string(),
                })
                .collect::<Vec<_>>();
            // A passage without sentence spans is one sentence.
            let sentences = if sentences.is_empty() {
                vec![SentenceSpan {
                    index: u32::MAX,
                    start: a,
                    end: b,
                    text: text.to_string(),
                }]
            } else {
                sentences
            };
            Some(Passage {
                document_id: doc.id.clone(),
                title: doc.title.clone(),
                source: doc.source.clone(),
                index,
                start: a,
                text: text.to_string(),
                sentences,
                piece: None,
            })
        })
        .collect()
}

/// What extracting one passage gave.
#[derive(Debug, Clone, PartialEq)]
pub enum Extraction {
    Done {
        entities: Vec<String>,
        triples: Vec<[String; 3]>,
        /// Answers that came from the cache (0, 1 or 2).
        cached: u32,
        /// Answers that were truncated and repaired.
        repaired: u32,
        /// The response-cache entry (digest) of the OpenIE answer the triples were parsed
        /// from (its request holds the NER answer).
        entry: String,
    },
    /// The model's answer did not parse, or the server refused the request as it is
    /// (`rejected`; `raw` is then the server's message): nothing is extracted from the
    /// passage.
    Invalid {
        template: &'static str,
        raw: String,
        reason: String,
        rejected: bool,
    },
}

/// Extraction settings.
#[derive(Debug, Clone)]
pub struct ExtractorConfig {
    pub constraint: Constraint,
    /// `max_tokens` of each answer.
    pub max_tokens: u32,
    pub temperature: f64,
    pub seed: Option<u64>,
    /// The model's revision, part of the cache key.
    pub model_revision: String,
}

/// Extracts triples from passages through a client and the response cache.
#[derive(Clone)]
pub struct Extractor {
    pub client: Arc<Client>,
    pub cache: Arc<ResponseCache>,
    pub prompts: Arc<Prompts>,
    pub config: ExtractorConfig,
    ner_version: String,
    openie_version: String,
}

/// Output schema versions (part of the cache key).
const NER_SCHEMA: &str = "named_entities-1";
const OPENIE_SCHEMA: &str = "triples-1";

impl Extractor {
    pub fn new(
        client: Arc<Client>,
        cache: Arc<ResponseCache>,
        prompts: Prompts,
        config: ExtractorConfig,
    ) -> Extractor {
        Extractor {
            ner_version: prompts.ner_version(),
            openie_version: prompts.openie_version(),
            client,
            cache,
            prompts: Arc::new(prompts),
            config,
        }
    }

    fn request(
        &self,
        messages: Vec<distillery_llm::ChatMessage>,
        format: Option<distillery_llm::ResponseFormat>,
    ) -> ChatRequest {
        ChatRequest {
            messages,
            temperature: Some(self.config.temperature),
            top_p: None,
            max_tokens: Some(self.config.max_tokens),
            seed: self.config.seed,
            response_format: format,
            prompt: None,
        }
    }

    /// The NER request of a passage.
    pub fn ner_request(&self, passage: &Passage) -> ChatRequest {
        self.request(
            self.prompts.ner(&passage.content()),
            self.config.constraint.ner(),
        )
    }

    /// The OpenIE request of a passage and its entities.
    pub fn openie_request(&self, passage: &Passage, entities: &[String]) -> ChatRequest {
        self.request(
            self.prompts.openie(&passage.content(), entities),
            self.config.constraint.openie(),
        )
    }

    /// The cache key of a passage's NER call (the first call of an extraction).
    pub fn ner_key(&self, passage: &Passage) -> CacheKey {
        CacheKey::new(
            (NER_TEMPLATE, &self.ner_version),
            &self.config.model_revision,
            NER_SCHEMA,
            &self.client.request_body(&self.ner_request(passage)),
        )
    }

    /// NER, then OpenIE over the passage and its entities. A request the server rejects as
    /// it is ([`LlmError::is_rejection`], e.g. a passage longer than the model's context) is
    /// an [`Extraction::Invalid`] of that passage (`rejected`, with the template refused),
    /// not an error; the cache keeps the refusal, so a rerun gets it without a chat call
    /// unless the model's context has grown since ([`distillery_llm::cached_chat`]).
    pub async fn extract(&self, passage: &Passage) -> Result<Extraction, ExtractError> {
        let refused = |template: &'static str, e: LlmError| match e {
            LlmError::Http { ref message, .. } if e.is_rejection() => Ok(Extraction::Invalid {
                template,
                raw: message.clone(),
                reason: format!("request rejected: {e}"),
                rejected: true,
            }),
            e => Err(ExtractError::Llm(e)),
        };
        let ner = match cached_chat(
            &self.client,
            &self.cache,
            (NER_TEMPLATE, &self.ner_version),
            (&self.config.model_revision, NER_SCHEMA),
            &NerParser,
            &self.ner_request(passage),
        )
        .await
        {
            Ok(o) => o,
            Err(e) => return refused(NER_TEMPLATE, e),
        };
        let (entities, mut cached, mut repaired) = match ner {
            Outcome::Parsed { value, cached, .. } => {
                let rep = value.get("repaired").and_then(|v| v.as_bool()) == Some(true);
                (entities_of(&value), u32::from(cached), u32::from(rep))
            }
            Outcome::Invalid { raw, reason, .. } => {
                return Ok(Extraction::Invalid {
                    template: NER_TEMPLATE,
                    raw,
                    reason,
                    rejected: false,
                });
            }
        };
        let ie = match cached_chat(
            &self.client,
            &self.cache,
            (OPENIE_TEMPLATE, &self.openie_version),
            (&self.config.model_revision, OPENIE_SCHEMA),
            &OpenIeParser,
            &self.openie_request(passage, &entities),
        )
        .await
        {
            Ok(o) => o,
            Err(e) => return refused(OPENIE_TEMPLATE, e),
        };
        let entry = ie.entry().to_string();
        match ie {
            Outcome::Parsed {
                value, cached: c, ..
            } => {
                cached += u32::from(c);
                repaired +=
                    u32::from(value.get("repaired").and_then(|v| v.as_bool()) == Some(true));
                Ok(Extraction::Done {
                    entities,
                    triples: triples_of(&value),
                    cached,
                    repaired,
                    entry,
                })
            }
            Outcome::Invalid { raw, reason, .. } => Ok(Extraction::Invalid {
                template: OPENIE_TEMPLATE,
                raw,
                reason,
                rejected: false,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use distillery_core::{Paragraph, Sentence};

    #[test]
    fn paragraphs_become_passages_with_their_sentences() {
        let text = "Zürich is a city. It is big.\n\nBern is the capital.";
        let doc = Document {
            id: "d1".into(),
            title: "Swiss cities".into(),
            text: text.into(),
            paragraphs: vec![
                Paragraph {
                    start: 0,
                    end: 28,
                    section: -1,
                },
                Paragraph {
                    start: 30,
                    end: 50,
                    section: -1,
                },
            ],
            sentences: vec![
                Sentence {
                    start: 0,
                    end: 17,
                    paragraph: 0,
                },
                Sentence {
                    start: 18,
                    end: 28,
                    paragraph: 0,
                },
                Sentence {
                    start: 30,
                    end: 50,
                    paragraph: 1,
                },
            ],
            ..Default::default()
        };
        let ps = passages(&doc, Unit::Paragraph);
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].text, "Zürich is a city. It is big.");
        assert_eq!(ps[0].sentences.len(), 2);
        assert_eq!(ps[0].sentences[1].text, "It is big.");
        assert_eq!(ps[1].index, 1);
        assert_eq!(ps[1].sentences[0].index, 2);
        assert_eq!(ps[1].content(), "Swiss cities\nBern is the capital.");
        let whole = passages(&doc, Unit::Document);
        assert_eq!(whole.len(), 1);
        assert_eq!(whole[0].sentences.len(), 3);
        assert_eq!(whole[0].text, text);
    }

    fn doc(text: &str, sentences: &[(u32, u32)]) -> Document {
        Document {
            id: "d".into(),
            title: "T".into(),
            text: text.into(),
            sentences: sentences
                .iter()
                .map(|&(start, end)| Sentence {
                    start,
                    end,
                    paragraph: 0,
                })
                .collect(),
            ..Default::default()
        }
    }

    fn slice(text: &str, a: u32, b: u32) -> String {
        text.chars()
            .skip(a as usize)
            .take((b - a) as usize)
            .collect()
    }

    #[test]
    fn long_passages_split_at_sentences_and_keep_their_offsets() {
        // Sentences of 20, 14 and 20 chars; "ü" checks that offsets are chars.
        let text = "Zürich is a big one. Bern is small. Basel is on a river.";
        let d = doc(text, &[(0, 20), (21, 35), (36, 56)]);
        let p = &passages(&d, Unit::Document)[0];
        assert_eq!((p.start, p.end(), p.piece), (0, 56, None));
        assert_eq!(p.split(100), vec![(0, 56)]);
        // Two sentences fit in 36 chars, the third does not.
        let spans = p.split(36);
        assert_eq!(spans, vec![(0, 36), (36, 56)]);
        let pieces = p.pieces(&spans);
        assert_eq!(pieces.len(), 2);
        assert_eq!(pieces[0].text, "Zürich is a big one. Bern is small. ");
        assert_eq!(pieces[1].text, "Basel is on a river.");
        assert_eq!(pieces[1].content(), "T\nBasel is on a river.");
        assert_eq!(
            pieces.iter().map(|q| q.piece).collect::<Vec<_>>(),
            vec![Some(0), Some(1)]
        );
        assert_ne!(pieces[0].chunk_id(), pieces[1].chunk_id());
        for q in &pieces {
            assert_eq!(slice(text, q.start, q.end()), q.text);
            assert_eq!((q.document_id.as_str(), q.index), ("d", 0));
            for s in &q.sentences {
                assert_eq!(slice(text, s.start, s.end), s.text);
            }
        }
        assert_eq!(pieces[0].sentences.len(), 2);
        assert_eq!(pieces[1].sentences[0].index, 2);
        // One sentence per piece.
        assert_eq!(p.split(21), vec![(0, 21), (21, 36), (36, 56)]);
    }

    #[test]
    fn a_sentence_too_long_alone_is_cut_at_whitespace_and_kept_whole_as_provenance() {
        let text = "Alpha beta gamma delta epsilon zeta. Eta.";
        let d = doc(text, &[(0, 36), (37, 41)]);
        let p = &passages(&d, Unit::Document)[0];
        let spans = p.split(16);
        // Cuts after whitespace inside the first sentence, then at the sentence start.
        assert_eq!(spans, vec![(0, 11), (11, 23), (23, 37), (37, 41)]);
        let pieces = p.pieces(&spans);
        assert_eq!(pieces[0].text, "Alpha beta ");
        assert_eq!(pieces[3].text, "Eta.");
        for q in &pieces[..3] {
            assert_eq!(q.sentences.len(), 1);
            assert_eq!((q.sentences[0].start, q.sentences[0].end), (0, 36));
        }
        assert_eq!(pieces[3].sentences[0].index, 1);
        // No whitespace to cut at: hard cuts.
        let solid = doc("abcdefghij", &[]);
        let p = &passages(&solid, Unit::Document)[0];
        let spans = p.split(4);
        assert_eq!(spans, vec![(0, 4), (4, 8), (8, 10)]);
        let pieces = p.pieces(&spans);
        // Without sentence spans a piece is its own sentence.
        assert_eq!(
            (pieces[1].sentences[0].start, pieces[1].sentences[0].end),
            (4, 8)
        );
        assert_eq!(pieces[1].sentences[0].text, "efgh");
        assert_eq!(pieces[1].sentences[0].index, u32::MAX);
    }

    #[test]
    fn pieces_of_a_paragraph_are_offsets_in_the_document() {
        let text = "Intro.\n\nOne two. Three four. Five six.";
        let d = Document {
            paragraphs: vec![
                Paragraph {
                    start: 0,
                    end: 6,
                    section: -1,
                },
                Paragraph {
                    start: 8,
                    end: 38,
                    section: -1,
                },
            ],
            ..doc(text, &[(0, 6), (8, 16), (17, 28), (29, 38)])
        };
        let p = &passages(&d, Unit::Paragraph)[1];
        assert_eq!((p.start, p.end()), (8, 38));
        let pieces = p.pieces(&p.split(12));
        assert_eq!(pieces.len(), 3);
        for q in &pieces {
            assert_eq!(slice(text, q.start, q.end()), q.text);
            assert_eq!(q.index, 1);
        }
        assert_eq!(pieces[2].text, "Five six.");
        assert_eq!(pieces[2].sentences[0].index, 3);
    }
}
