//! The BERT encoder for inference, as Hugging Face's `BertModel` computes it (absolute
//! positions, post-layer-norm), written for throughput rather than generality:
//!
//! - query, key and value are one fused projection (one matrix product instead of three);
//! - every projection multiplies a `[tokens, hidden]` matrix, not a batch of per-text ones;
//! - on the CPU each product's bias (and residual) is added in the product's output, and the
//!   padding mask (only when a pass has padding) with the attention softmax in the scores'
//!   ([`crate::fused`]);
//! - GELU is the vectorised exact one of [`crate::gelu`] on the CPU, in place.
//!
//! The weights and their names are the checkpoint's own (`embeddings.*`, `encoder.layer.N.*`,
//! under a `bert.` or `<model_type>.` prefix or none), read through candle's `VarBuilder`;
//! the shape and activation are [`Config`], the fields of the checkpoint's `config.json` the
//! encoder uses.

use candle_core::{Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Module, VarBuilder};
use serde::Deserialize;

/// The feed-forward activation (`hidden_act` of `config.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum HiddenAct {
    /// The exact (erf) GELU, Hugging Face's `gelu`.
    #[serde(rename = "gelu")]
    Gelu,
    /// The tanh approximation of GELU: `gelu_new` and `gelu_pytorch_tanh` in transformers,
    /// `geluapproximate` in candle-transformers' configs.
    #[serde(
        rename = "gelu_new",
        alias = "gelu_pytorch_tanh",
        alias = "geluapproximate"
    )]
    GeluApproximate,
    #[serde(rename = "relu")]
    Relu,
}

/// How positions are encoded (`position_embedding_type`): only learned absolute positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PositionEmbeddingType {
    #[default]
    Absolute,
}

/// The fields of a BERT `config.json` the encoder reads; the others (dropout, initialiser
/// range, `pad_token_id`, ...) are ignored. A missing field takes the default of transformers'
/// `BertConfig` (bert-base: 768 wide, 12 layers of 12 heads, exact GELU, `layer_norm_eps`
/// 1e-12), as candle-transformers' `Config::default` has them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: HiddenAct,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub position_embedding_type: PositionEmbeddingType,
    /// Also the weights' prefix when they are not at the checkpoint's root or under `bert.`.
    pub model_type: Option<String>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            vocab_size: 30522,
            hidden_size: 768,
            num_hidden_layers: 12,
            num_attention_heads: 12,
            intermediate_size: 3072,
            hidden_act: HiddenAct::Gelu,
            max_position_embeddings: 512,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            position_embedding_type: PositionEmbeddingType::Absolute,
            model_type: Some("bert".to_string()),
        }
    }
}

/// `x · Wᵀ + b` over the last dimension, as one matrix product over all leading dimensions.
struct Linear {
    weight_t: Tensor,
    bias: Tensor,
}

impl Linear {
    fn load(vb: VarBuilder, inputs: usize, outputs: usize) -> Result<Linear> {
        let w = vb.get((outputs, inputs), "weight")?;
        let b = vb.get(outputs, "bias")?;
        Linear::new(&w, b)
    }

    fn new(weight: &Tensor, bias: Tensor) -> Result<Linear> {
        Ok(Linear {
            weight_t: weight.t()?.contiguous()?,
            bias,
        })
    }

    /// `x·Wᵀ + b`, plus `residual` (`x`'s shape but the last dimension, the output's) when
    /// given: both added in the product's output ([`crate::fused::add_bias`]).
    fn forward(&self, x: &Tensor, residual: Option<&Tensor>) -> Result<Tensor> {
        let dims = x.dims();
        let (lead, last) = dims.split_at(dims.len() - 1);
        let rows: usize = lead.iter().product();
        let y = x.reshape((rows, last[0]))?.matmul(&self.weight_t)?;
        let residual = residual
            .map(|r| r.reshape((rows, self.bias.dim(0)?)))
            .transpose()?;
        let y = crate::fused::add_bias(y, &self.bias, residual.as_ref())?;
        let mut shape = lead.to_vec();
        shape.push(self.bias.dim(0)?);
        y.reshape(shape)
    }
}

struct Layer {
    qkv: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
    heads: usize,
    act: HiddenAct,
}

impl Layer {
    fn load(vb: VarBuilder, c: &Config) -> Result<Layer> {
        let h = c.hidden_size;
        let att = vb.pp("attention");
        let s = att.pp("self");
        // Scores are (q·k)/√d: the scale is folded into the query's weights and bias.
        let scale = 1.0 / ((h / c.num_attention_heads) as f64).sqrt();
        let part = |name: &str, scaled: bool| -> Result<(Tensor, Tensor)> {
            let w = s.pp(name).get((h, h), "weight")?;
            let b = s.pp(name).get(h, "bias")?;
            if scaled {
                Ok(((w * scale)?, (b * scale)?))
            } else {
                Ok((w, b))
            }
        };
        let (qw, qb) = part("query", true)?;
        let (kw, kb) = part("key", false)?;
        let (vw, vb_) = part("value", false)?;
        let qkv = Linear::new(
            &Tensor::cat(&[qw, kw, vw], 0)?,
            Tensor::cat(&[qb, kb, vb_], 0)?,
        )?;
        Ok(Layer {
            qkv,
            attention_out: Linear::load(att.pp("output").pp("dense"), h, h)?,
            attention_norm: candle_nn::layer_norm(
                h,
                c.layer_norm_eps,
                att.pp("output").pp("LayerNorm"),
            )?,
            intermediate: Linear::load(vb.pp("intermediate").pp("dense"), h, c.intermediate_size)?,
            output: Linear::load(vb.pp("output").pp("dense"), c.intermediate_size, h)?,
            output_norm: candle_nn::layer_norm(
                h,
                c.layer_norm_eps,
                vb.pp("output").pp("LayerNorm"),
            )?,
            heads: c.num_attention_heads,
            act: c.hidden_act,
        })
    }

    /// `x`: `[batch, tokens, hidden]`; `mask`: `[batch, 1, 1, tokens]`, 0 or the f32 minimum.
    fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (b, n, h) = x.dims3()?;
        let d = h / self.heads;
        let qkv = self
            .qkv
            .forward(x, None)?
            .reshape((b, n, 3, self.heads, d))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let (q, k, v) = (qkv.get(0)?, qkv.get(1)?, qkv.get(2)?);
        let probs = crate::fused::softmax_last_dim(q.matmul(&k.t()?)?, mask)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, n, h))?;
        let attended = self
            .attention_norm
            .forward(&self.attention_out.forward(&context, Some(x))?)?;
        let inner = self.intermediate.forward(&attended, None)?;
        let inner = match self.act {
            HiddenAct::Gelu => crate::gelu::gelu_erf(inner)?,
            HiddenAct::GeluApproximate => inner.gelu()?,
            HiddenAct::Relu => inner.relu()?,
        };
        self.output_norm
            .forward(&self.output.forward(&inner, Some(&attended))?)
    }
}

/// A BERT encoder: token ids in, the last layer's token vectors out.
pub struct Bert {
    words: Embedding,
    positions: Embedding,
    types: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
}

impl Bert {
    /// Loads the weights under the checkpoint's root, `bert.`, or `<model_type>.`.
    pub fn load(vb: VarBuilder, c: &Config) -> Result<Bert> {
        let mut prefixes = vec![String::new(), "bert".to_string()];
        prefixes.extend(c.model_type.clone());
        let root = prefixes
            .iter()
            .map(|p| if p.is_empty() { vb.clone() } else { vb.pp(p) })
            .find(|v| v.contains_tensor("embeddings.word_embeddings.weight"))
            .unwrap_or_else(|| vb.clone());
        let e = root.pp("embeddings");
        let h = c.hidden_size;
        Ok(Bert {
            words: candle_nn::embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: candle_nn::embedding(
                c.max_position_embeddings,
                h,
                e.pp("position_embeddings"),
            )?,
            types: candle_nn::embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: candle_nn::layer_norm(h, c.layer_norm_eps, e.pp("LayerNorm"))?,
            layers: (0..c.num_hidden_layers)
                .map(|i| Layer::load(root.pp(format!("encoder.layer.{i}")), c))
                .collect::<Result<_>>()?,
        })
    }

    /// `ids`: `[batch, tokens]` (u32, token type 0 throughout); `mask`: the same shape, 1 for a
    /// real token and 0 for padding, or `None` when the pass has no padding.
    pub fn forward(&self, ids: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let (_, n) = ids.dims2()?;
        let positions = Tensor::arange(0u32, n as u32, ids.device())?;
        let types = Tensor::zeros(1, candle_core::DType::U32, ids.device())?;
        let x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.types.forward(&types)?)?
            .broadcast_add(&self.positions.forward(&positions)?)?;
        let mut x = self.norm.forward(&x)?;
        // Padding gets the f32 minimum added to its scores, as transformers does.
        let mask = match mask {
            Some(m) => Some(
                ((m.to_dtype(candle_core::DType::F32)? - 1.0)? * f64::from(f32::MAX))?
                    .unsqueeze(1)?
                    .unsqueeze(1)?,
            ),
            None => None,
        };
        for layer in &self.layers {
            x = layer.forward(&x, mask.as_ref())?;
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reads_a_sentence_transformers_bert_config() {
        // all-MiniLM-L6-v2's config.json.
        let c: Config = serde_json::from_str(
            r#"{"_name_or_path": "nreimers/MiniLM-L6-H384-uncased", "architectures": ["BertModel"],
            "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": false,
            "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 384,
            "initializer_range": 0.02, "intermediate_size": 1536, "layer_norm_eps": 1e-12,
            "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
            "num_hidden_layers": 6, "pad_token_id": 0, "position_embedding_type": "absolute",
            "transformers_version": "4.8.2", "type_vocab_size": 2, "use_cache": true,
            "vocab_size": 30522}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Config {
                hidden_size: 384,
                num_hidden_layers: 6,
                intermediate_size: 1536,
                ..Config::default()
            }
        );
    }

    #[test]
    fn config_defaults_are_bert_base() {
        let c: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.hidden_act, HiddenAct::Gelu);
        assert_eq!(c.layer_norm_eps, 1e-12);
        assert_eq!((c.hidden_size, c.num_hidden_layers), (768, 12));
        assert_eq!(c.model_type.as_deref(), Some("bert"));
    }

    #[test]
    fn config_activations_and_unsupported_positions() {
        let act = |a: &str| {
            serde_json::from_str::<Config>(&format!(r#"{{"hidden_act": "{a}"}}"#))
                .map(|c| c.hidden_act)
                .ok()
        };
        assert_eq!(act("gelu"), Some(HiddenAct::Gelu));
        assert_eq!(act("relu"), Some(HiddenAct::Relu));
        for tanh in ["gelu_new", "gelu_pytorch_tanh", "geluapproximate"] {
            assert_eq!(act(tanh), Some(HiddenAct::GeluApproximate), "{tanh}");
        }
        assert_eq!(act("swish"), None);
        assert!(
            serde_json::from_str::<Config>(r#"{"position_embedding_type": "relative_key"}"#)
                .is_err()
        );
    }
}
