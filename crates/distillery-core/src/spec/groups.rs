//! Option groups several stages share, each field declared once: a stage flattens the group
//! into its own options (`#[serde(flatten)]`), so a pipeline file writes the fields beside
//! the stage's others, as before. A group has no `deny_unknown_fields` of its own: the stage's
//! options deny unknown keys for the whole table (serde supports this one level deep).

use serde::{Deserialize, Serialize};

fn default_validation() -> f64 {
    0.05
}

/// The validation split and the decontamination of a stage that writes SFT samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SftSplit {
    /// Share of the stage's items (by id hash: questions, or documents for `text2triple`;
    /// one item's samples go together) in the validation split.
    #[serde(default = "default_validation")]
    pub validation_share: f64,
    /// Evaluation files (QA datasets in any supported format: the matching entry of
    /// `decontaminate_formats`, else told from the file's first record) whose questions must
    /// not appear in any training sample. Each is read whole: a file of unknown format, with a
    /// bad record, or with no question fails the stage.
    #[serde(default)]
    pub decontaminate: Vec<String>,
    /// Formats of the `decontaminate` files, one per file (default: told from each file).
    #[serde(default)]
    pub decontaminate_formats: Vec<String>,
}

impl Default for SftSplit {
    fn default() -> SftSplit {
        SftSplit {
            validation_share: default_validation(),
            decontaminate: Vec::new(),
            decontaminate_formats: Vec::new(),
        }
    }
}

impl SftSplit {
    /// Whether `validation_share` is in [0, 1).
    pub fn share_ok(&self) -> bool {
        (0.0..1.0).contains(&self.validation_share)
    }
}

/// A cap on the questions a stage reads, in part order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuestionCap {
    /// Build samples for at most this many questions (in part order; the stage then runs as
    /// one task, so which questions fall under the cap does not depend on the task count).
    #[serde(default)]
    pub max_questions: Option<u64>,
}

impl QuestionCap {
    /// The most tasks the stage may run as: 1 when capped (see [`QuestionCap::max_questions`]).
    pub fn max_tasks(&self) -> Option<u32> {
        self.max_questions.is_some().then_some(1)
    }

    /// The questions left to read (`u64::MAX` uncapped).
    pub fn budget(&self) -> u64 {
        self.max_questions.unwrap_or(u64::MAX)
    }
}
