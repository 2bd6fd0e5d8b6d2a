//! The `triples` stage's estimate.
//!
//! The stage's input files are read with the real readers until
//! `sample` passages are in hand (the rest of the file is not read); each sampled passage's
//! NER and OpenIE chats are rendered exactly as the stage renders them and their tokens
//! counted by the server's `/tokenize` (vLLM; the chat template applied), falling back to a
//! local `tokenizer.json` when one is given, else to 4 characters a token, and the report says
//! which. The OpenIE prompt is counted with the one-shot example's entities standing in for
//! the passage's. The sample is spread over the files (`sample / files` passages each); files
//! up to 8 MiB are read whole, so their passage counts are exact, and bigger ones are read
//! until their share of documents is in hand and their passages projected by the bytes read.
//! Totals are capped by `max_passages`. A sampled passage too long for the teacher's context
//! is cut as the run cuts it ([`Fitter`], while the server counts tokens or
//! `llm.context_tokens` is set) and its pieces counted: calls and answers are projected per
//! piece. Answers are projected two ways: typical (as long
//! as the one-shot example answers) and at most (`max_tokens` each). The share of sampled
//! passages whose NER answer is already cached is reported too: those calls cost nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use distillery_core::spec::FormatOptions;
use distillery_core::{Document, Record, RecordSink, SinkError};
use distillery_ingest::input::file_name;
use distillery_ingest::{IngestError, InputCtx, read_input};
use distillery_llm::ChatMessage;
use distillery_triples::fit::Fitter;
use distillery_triples::prompt::Prompts;
use distillery_triples::{Passage, TriplesOptions, Unit, passages};

use crate::contract::{Counter, EstimateCx, StageEstimate};
use crate::error::ExecError;
use crate::kit::teacher::Teacher;
use crate::store::StoreOpener;

/// Files up to this size are read whole by the estimate.
const SMALL_FILE: u64 = 8 << 20;

/// Keeps distinct documents until it has enough, then stops the reader.
struct SampleSink {
    docs: Vec<Document>,
    seen: HashSet<String>,
    want: usize,
}

const SAMPLE_DONE: &str = "estimate sample complete";

impl RecordSink for SampleSink {
    fn emit(&mut self, record: Record) -> Result<(), SinkError> {
        if let Record::Document(d) = record
            && self.seen.insert(d.id.clone())
        {
            self.docs.push(d);
        }
        if self.docs.len() >= self.want {
            return Err(SinkError(SAMPLE_DONE.into()));
        }
        Ok(())
    }
}

/// The tokens of a chat: the server's `/tokenize` while it answers, then the local
/// tokenizer when one is given, else 4 characters a token; `counter` says which counted.
async fn count(
    counter: &mut Counter,
    local: Option<&tokenizers::Tokenizer>,
    tokenizer: Option<&str>,
    client: &distillery_llm::Client,
    messages: &[ChatMessage],
) -> u64 {
    if matches!(counter, Counter::Server(_)) {
        match client.count_tokens(messages).await {
            Ok(n) => return n,
            Err(_) => {
                *counter = match tokenizer {
                    Some(t) => Counter::Tokenizer(t.to_string()),
                    None => Counter::Chars,
                }
            }
        }
    }
    let text: String = messages
        .iter()
        .map(|m| format!("{}\n{}\n", m.role, m.content))
        .collect();
    match local {
        Some(t) => t
            .encode(text.as_str(), true)
            .map(|e| e.len() as u64)
            .unwrap_or_else(|_| text.chars().count() as u64 / 4),
        None => text.chars().count().div_ceil(4) as u64,
    }
}

/// Samples the stage's inputs and projects its calls, tokens and cost.
pub async fn estimate(
    opts: &TriplesOptions,
    cx: EstimateCx<'_>,
) -> Result<StageEstimate, ExecError> {
    let (p, plan, stage, sample, tokenizer) =
        (cx.pipeline, cx.plan, cx.stage, cx.sample, cx.tokenizer);
    let Some(llm) = &p.llm else {
        return Err(ExecError::Task(format!(
            "stage `{}` has no [llm]",
            stage.name
        )));
    };
    let teacher = Teacher::new(llm, &p.output)?;
    let prompts = Prompts::load(opts.templates.as_deref())?;
    let (ex_ner, ex_ie) = prompts.example_answers();
    let (ex_ner, ex_ie) = (ex_ner.to_string(), ex_ie.to_string());
    let example_entities = distillery_triples::parse::parse_entities(&ex_ner)
        .map(|e| e.entities)
        .unwrap_or_default();
    let extractor = teacher.extractor(llm, opts, prompts);
    let unit = Unit::from_name(&opts.unit).unwrap_or(Unit::Paragraph);

    // --- the sample ---
    let files: Vec<_> = plan
        .files
        .iter()
        .filter(|f| stage.inputs.contains(&f.input))
        .cloned()
        .collect();
    let total_bytes: u64 = files.iter().filter_map(|f| f.size).sum();
    let per_file = sample.div_ceil(files.len().max(1)).max(1);
    let mut sampled: Vec<Passage> = Vec::new();
    let mut sample_bytes = 0u64;
    let mut exhaustive = true;
    let mut projected = 0f64;
    for file in files {
        let input = p.input(&file.input).expect("planned").clone();
        let handle = tokio::runtime::Handle::current();
        // Small files are read whole (their passage count is then exact); big ones until
        // `per_file` documents are in hand.
        let want = if file.size.is_some_and(|s| s <= SMALL_FILE) {
            usize::MAX
        } else {
            per_file
        };
        let size = file.size;
        let (docs, read, complete) = tokio::task::spawn_blocking(move || {
            let opener = StoreOpener::new(handle);
            let counter = Arc::new(AtomicU64::new(0));
            let options: FormatOptions = input.options.clone();
            let ctx = InputCtx {
                source: file_name(&file.location),
                location: file.location.clone(),
                file_index: file.index,
                split: input.split.clone(),
                options: &options,
                opener: &opener,
                bytes_read: counter.clone(),
                range: file.range,
            };
            let mut sink = SampleSink {
                docs: Vec::new(),
                seen: HashSet::new(),
                want,
            };
            let complete = match read_input(file.format, &ctx, &mut sink) {
                Ok(_) => true,
                Err(IngestError::Sink(e)) if e.0 == SAMPLE_DONE => false,
                Err(e) => return Err(ExecError::from(e)),
            };
            let read = if complete {
                file.size.unwrap_or(counter.load(Ordering::Relaxed))
            } else {
                counter.load(Ordering::Relaxed)
            };
            Ok((sink.docs, read, complete))
        })
        .await
        .map_err(|e| ExecError::Task(e.to_string()))??;
        exhaustive &= complete;
        sample_bytes += read;
        let mut in_file = 0u64;
        let mut taken = 0usize;
        for d in &docs {
            for ps in passages(d, unit) {
                if (ps.text.chars().count() as u32) < opts.min_chars {
                    continue;
                }
                in_file += 1;
                if taken < per_file {
                    taken += 1;
                    sampled.push(ps);
                }
            }
        }
        projected += match (complete, size) {
            (false, Some(size)) if read > 0 => in_file as f64 * size as f64 / read as f64,
            _ => in_file as f64,
        };
    }

    // --- tokens ---
    let mut counter = Counter::Server(llm.base_url.trim_end_matches("/v1").to_string());
    let local = match tokenizer {
        Some(path) => Some(
            tokenizers::Tokenizer::from_file(path)
                .map_err(|e| ExecError::Task(format!("tokenizer {path}: {e}")))?,
        ),
        None => None,
    };
    let local = local.as_ref();
    let client = &teacher.client;
    // Passages too long for the context are projected as the pieces the run cuts them into
    // (the run's cuts when the cache has them; new cuts are not kept), while the server
    // counts tokens or `llm.context_tokens` is set.
    let fitter = Fitter::estimating(extractor.clone());
    let mut fitting = true;
    let (mut prompt_sample, mut pieces_sample) = (0u64, 0u64);
    for ps in &sampled {
        let chats = |q: &Passage| {
            [
                extractor.ner_request(q).messages,
                extractor.openie_request(q, &example_entities).messages,
            ]
        };
        let mut whole = 0u64;
        for m in chats(ps) {
            whole += count(&mut counter, local, tokenizer, client, &m).await;
        }
        fitting &= llm.context_tokens.is_some() || matches!(counter, Counter::Server(_));
        let pieces = if fitting {
            match fitter.fit(ps).await {
                Ok(pieces) => pieces,
                Err(_) => {
                    fitting = false;
                    vec![ps.clone()]
                }
            }
        } else {
            vec![ps.clone()]
        };
        pieces_sample += pieces.len() as u64;
        if pieces.len() <= 1 {
            prompt_sample += whole;
            continue;
        }
        for q in &pieces {
            for m in chats(q) {
                prompt_sample += count(&mut counter, local, tokenizer, client, &m).await;
            }
        }
    }
    // One batched lookup of the sample's NER keys.
    let keys: Vec<_> = sampled.iter().map(|ps| extractor.ner_key(ps)).collect();
    let cached = teacher
        .cache
        .get_many(&keys)
        .await?
        .iter()
        .filter(|e| e.is_some())
        .count() as u64;
    let answer = |s: &str| vec![ChatMessage::new("assistant", s)];
    let per_answer = count(&mut counter, local, tokenizer, client, &answer(&ex_ner)).await
        + count(&mut counter, local, tokenizer, client, &answer(&ex_ie)).await;

    // --- projection ---
    let n = sampled.len() as u64;
    let mut passages_total = projected.round() as u64;
    if let Some(cap) = opts.max_passages {
        passages_total = passages_total.min(cap);
    }
    let per_passage_prompt = if n > 0 {
        prompt_sample as f64 / n as f64
    } else {
        0.0
    };
    let prompt_tokens = (per_passage_prompt * passages_total as f64).round() as u64;
    let pieces_total = if n > 0 {
        (passages_total as f64 * pieces_sample as f64 / n as f64).round() as u64
    } else {
        passages_total
    };
    let completion_typical = per_answer * pieces_total;
    let completion_max = 2 * u64::from(opts.max_tokens) * pieces_total;
    let price = teacher.budget.price;
    Ok(StageEstimate {
        stage: stage.name.clone(),
        model: llm.model.clone(),
        sample_passages: n,
        sample_bytes,
        total_bytes: total_bytes.max(sample_bytes),
        exhaustive,
        passages: passages_total,
        pieces: pieces_total,
        calls: 2 * pieces_total,
        prompt_tokens,
        completion_typical,
        completion_max,
        cost_typical: price.cost(prompt_tokens, completion_typical),
        cost_max: price.cost(prompt_tokens, completion_max),
        cached_share: if n > 0 { cached as f64 / n as f64 } else { 0.0 },
        counter,
    })
}
