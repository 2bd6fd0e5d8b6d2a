//! Embedding models for the stages and `distillery search`: a local BERT-family model with
//! candle, or any OpenAI-compatible `/v1/embeddings` server through the teacher's client
//! (its retries, concurrency limit and counters).

use std::sync::Arc;

use distillery_index::IndexError;
use distillery_index::dense::{Embedder, ModelInfo};
use distillery_llm::{Client, LlmConfig};
use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::error::ExecError;

/// Where embeddings come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingOptions {
    /// The model: a sentence-transformers directory or a Hugging Face model id in the local
    /// cache (local models), or the served model name (with `server`).
    pub model: String,
    /// An OpenAI-compatible API root serving embeddings (vLLM pooling models, TEI), e.g.
    /// `http://vllm-embed:8000/v1`. Default: none, the model runs here with candle.
    #[serde(default)]
    pub server: Option<String>,
    /// Environment variable holding the server's API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The served model's revision (part of the embedding cache key; local models find
    /// theirs).
    #[serde(default)]
    pub revision: String,
    /// Where a local model runs: `cpu`, or `cuda` (a build with the `cuda` feature).
    #[serde(default = "default_device")]
    pub device: String,
    /// Texts per forward pass or request.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Requests in flight at once (server).
    #[serde(default = "default_concurrency")]
    pub max_concurrency: usize,
    /// The embedding cache (path or URL) shared by jobs. Default: `<root>/embedding-cache`.
    #[serde(default)]
    pub cache: Option<String>,
}

impl EmbeddingOptions {
    /// What is wrong with these options for a stage given `gpus` GPUs (its `gpus` key).
    pub fn problems(&self, gpus: u32) -> Vec<String> {
        let mut v = Vec::new();
        if self.batch == 0 || self.max_concurrency == 0 {
            v.push("`batch` and `max_concurrency` must be at least 1".to_string());
        }
        match self.device.as_str() {
            "cpu" => {}
            "cuda" if self.server.is_none() && gpus == 0 => v.push(
                "device `cuda` needs `gpus = 1` on the stage, so that it runs on a worker with a GPU"
                    .to_string(),
            ),
            "cuda" => {}
            other => v.push(format!("device `{other}`: `cpu` or `cuda`")),
        }
        v
    }

    /// The `gpus` key of the stage `cx` checks.
    pub fn stage_gpus(cx: &distillery_core::spec::StageCheck<'_, '_>) -> u32 {
        cx.stages
            .get(cx.index())
            .and_then(|s| s.get("gpus"))
            .and_then(toml::Value::as_integer)
            .map_or(0, |g| g.max(0) as u32)
    }
}

fn default_device() -> String {
    "cpu".into()
}

fn default_batch() -> usize {
    32
}

fn default_concurrency() -> usize {
    4
}

/// A local model.
struct Local {
    model: Arc<distillery_embed::Embedder>,
    info: ModelInfo,
}

impl Embedder for Local {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, IndexError>> {
        let model = self.model.clone();
        let texts = texts.to_vec();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                model.embed(&refs)
            })
            .await
            .map_err(|e| IndexError::Embed(e.to_string()))?
            .map_err(|e| IndexError::Embed(e.to_string()))
        })
    }
}

/// An embeddings server.
struct Server {
    client: Client,
    info: ModelInfo,
}

impl Embedder for Server {
    fn model(&self) -> &ModelInfo {
        &self.info
    }

    fn embed<'a>(
        &'a self,
        texts: &'a [String],
    ) -> BoxFuture<'a, Result<Vec<Vec<f32>>, IndexError>> {
        Box::pin(async move {
            self.client.embed(texts).await.map_err(|e| {
                if distillery_core::HasKind::is_retryable(&e) {
                    IndexError::EmbedRetryable(e.to_string())
                } else {
                    IndexError::Embed(e.to_string())
                }
            })
        })
    }
}

/// Opens the model the options name (a server is asked once for its dimension).
pub async fn open(o: &EmbeddingOptions) -> Result<Arc<dyn Embedder>, ExecError> {
    match &o.server {
        None => {
            let (spec, device) = (o.model.clone(), o.device.clone());
            let model = tokio::task::spawn_blocking(move || {
                distillery_embed::Embedder::load_on(&spec, &device)
            })
            .await
            .map_err(|e| ExecError::Task(e.to_string()))?
            .map_err(|e| ExecError::Task(e.to_string()))?;
            let info = ModelInfo {
                id: o.model.clone(),
                revision: model.revision.clone(),
                pooling: model.pooling.name().to_string(),
                normalize: true,
                dimension: model.dimension,
                server: None,
            };
            Ok(Arc::new(Local {
                model: Arc::new(model),
                info,
            }))
        }
        Some(url) => {
            let mut cfg = LlmConfig::new(url, &o.model);
            cfg.max_concurrency = o.max_concurrency.max(1);
            // Batches of passages, a few at a time: a fixed number in flight.
            cfg.adaptive = false;
            if let Some(var) = &o.api_key_env {
                cfg = cfg.api_key_from_env(var)?;
            }
            let client = Client::new(cfg)?;
            let probe = client.embed(&["dimension probe".to_string()]).await?;
            let dimension = probe.first().map_or(0, Vec::len);
            if dimension == 0 {
                return Err(ExecError::Task(format!(
                    "embeddings server {url}: model `{}` answered an empty vector",
                    o.model
                )));
            }
            Ok(Arc::new(Server {
                client,
                info: ModelInfo {
                    id: o.model.clone(),
                    revision: o.revision.clone(),
                    pooling: "server".into(),
                    normalize: true,
                    dimension,
                    server: Some(url.clone()),
                },
            }))
        }
    }
}

/// Opens the model a built index was embedded with (for queries).
pub async fn open_for(info: &ModelInfo) -> Result<Arc<dyn Embedder>, ExecError> {
    open(&EmbeddingOptions {
        model: info.id.clone(),
        server: info.server.clone(),
        api_key_env: None,
        revision: info.revision.clone(),
        device: default_device(),
        batch: default_batch(),
        max_concurrency: 1,
        cache: None,
    })
    .await
}
