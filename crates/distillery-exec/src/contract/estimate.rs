//! What a teacher stage projects for `plan --estimate`: calls, tokens and cost.

use std::fmt;

/// How tokens were counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Counter {
    Server(String),
    Tokenizer(String),
    Chars,
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Counter::Server(u) => write!(f, "server {u}/tokenize"),
            Counter::Tokenizer(p) => write!(f, "tokenizer {p}"),
            Counter::Chars => write!(f, "4 characters a token (no server, no tokenizer)"),
        }
    }
}

/// The estimate of one LLM stage.
#[derive(Debug, Clone)]
pub struct StageEstimate {
    pub stage: String,
    pub model: String,
    pub sample_passages: u64,
    /// Input bytes read for the sample, and in all.
    pub sample_bytes: u64,
    pub total_bytes: u64,
    /// Whether the sample read every input file to its end (the totals are then exact).
    pub exhaustive: bool,
    pub passages: u64,
    /// What the passages are extracted as: each one, or its pieces when it does not fit the
    /// teacher's context (2 calls each).
    pub pieces: u64,
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_typical: u64,
    pub completion_max: u64,
    pub cost_typical: f64,
    pub cost_max: f64,
    /// Share of sampled passages whose NER answer is in the cache.
    pub cached_share: f64,
    pub counter: Counter,
}

impl fmt::Display for StageEstimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = if self.exhaustive {
            "every file read whole: exact passage count"
        } else {
            "big files projected by bytes read"
        };
        writeln!(
            f,
            "stage {} (model {}): {} passages sampled from {} of {} input bytes ({how})",
            self.stage, self.model, self.sample_passages, self.sample_bytes, self.total_bytes
        )?;
        writeln!(
            f,
            "  passages {}   calls {}   prompt tokens {}",
            self.passages, self.calls, self.prompt_tokens
        )?;
        if self.pieces != self.passages {
            writeln!(
                f,
                "  {} pieces: passages too long for the context are cut to fit, as the run cuts them",
                self.pieces
            )?;
        }
        writeln!(
            f,
            "  completion tokens: typical {} (one-shot answer length), at most {} (max_tokens)",
            self.completion_typical, self.completion_max
        )?;
        writeln!(
            f,
            "  cost: typical {:.4}, at most {:.4} (by [llm.price]); {:.0}% of the sampled passages are already cached",
            self.cost_typical,
            self.cost_max,
            100.0 * self.cached_share
        )?;
        write!(f, "  tokens counted by {}", self.counter)
    }
}
