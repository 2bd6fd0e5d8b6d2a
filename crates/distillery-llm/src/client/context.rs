//! What the server says of the model's context: its length (`GET /models`, asked once per
//! client, or the configured one) and a chat's prompt tokens (vLLM's `/tokenize`).

use distillery_core::HasKind;
use distillery_core::retry::RetryPolicy;
use serde_json::{Value, json};

use super::{ChatMessage, Client, retry_delay};
use crate::LlmError;

impl Client {
    /// Counts the tokens of a chat as the server's chat template renders it, with vLLM's
    /// `/tokenize` endpoint (next to `/v1`; `add_generation_prompt` set). One attempt, no
    /// retries: callers fall back to another count when the server has no such endpoint.
    pub async fn count_tokens(&self, messages: &[ChatMessage]) -> Result<u64, LlmError> {
        let root = self.config.base_url.trim_end_matches("/v1");
        let url = format!("{root}/tokenize");
        let body = json!({
            "model": self.config.model,
            "messages": messages,
            "add_generation_prompt": true,
        });
        let mut req = self
            .http
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .timeout(self.config.timeout)
            .body(body.to_string());
        if let Some(k) = &self.config.api_key {
            req = req.bearer_auth(k.expose());
        }
        let resp = req.send().await.map_err(|e| LlmError::Transport {
            url: url.clone(),
            message: e.to_string(),
        })?;
        let status = resp.status().as_u16();
        let text = resp.text().await.map_err(|e| LlmError::Transport {
            url: url.clone(),
            message: e.to_string(),
        })?;
        if status != 200 {
            return Err(LlmError::Http {
                url,
                status,
                message: text.chars().take(200).collect(),
                retry_after: None,
            });
        }
        serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("count").and_then(Value::as_u64))
            .ok_or_else(|| LlmError::BadResponse {
                url,
                message: "no `count` in the /tokenize answer".into(),
            })
    }
}

impl Client {
    /// [`Client::context_tokens`] asked at most once per client: an error (a server that
    /// does not answer) counts as unknown for the client's lifetime instead of being retried
    /// on every call. For checks that may go without it (a kept refusal's).
    pub async fn context_tokens_once(&self) -> Option<u64> {
        *self
            .context_once
            .get_or_init(|| async { self.context_tokens().await.ok().flatten() })
            .await
    }

    /// The model's context length (prompt + answer tokens): the configured
    /// [`LlmConfig::context_tokens`] when set, else [`Client::max_model_len`].
    pub async fn context_tokens(&self) -> Result<Option<u64>, LlmError> {
        match self.config.context_tokens {
            Some(n) => Ok(Some(n)),
            None => self.max_model_len().await,
        }
    }

    /// The retry policy of this client's settings.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(self.config.backoff_base, self.config.backoff_max)
    }

    /// The `max_model_len` the server reports for the configured model: vLLM's
    /// `GET {base_url}/models` answers `{"data": [{"id": MODEL, "max_model_len": N, ...}]}`.
    /// Asked once per client (clones share the answer). `None` when the server does not say:
    /// no such endpoint (an error status other than 429 and 5xx, or 501 Not Implemented), an
    /// answer that is not JSON, no entry with the model's `id`, or an entry without
    /// `max_model_len`. 429, other 5xx and transport errors are retried as chat requests
    /// are; when they persist, the error.
    pub async fn max_model_len(&self) -> Result<Option<u64>, LlmError> {
        self.model_len
            .get_or_try_init(|| self.ask_model_len())
            .await
            .copied()
    }

    async fn ask_model_len(&self) -> Result<Option<u64>, LlmError> {
        let url = format!("{}/models", self.config.base_url);
        let mut attempt = 0u32;
        let mut delays = self.retry_policy().delays();
        loop {
            attempt += 1;
            match self.get_models_once(&url).await {
                Ok(v) => {
                    let len = v
                        .get("data")
                        .and_then(Value::as_array)
                        .and_then(|models| {
                            models.iter().find(|m| {
                                m.get("id").and_then(Value::as_str) == Some(&self.config.model)
                            })
                        })
                        .and_then(|m| m.get("max_model_len"))
                        .and_then(Value::as_u64);
                    tracing::debug!(url = %url, max_model_len = ?len, "model context length");
                    return Ok(len);
                }
                // No such endpoint (501 Not Implemented, 404, 405, ...): the server does not
                // say, and asking again will not change that.
                Err(LlmError::Http { status, .. })
                    if status == 501 || (status != 429 && status < 500) =>
                {
                    tracing::debug!(url = %url, status, "the server does not say its context length");
                    return Ok(None);
                }
                Err(e) if e.is_retryable() && attempt <= self.config.max_retries => {
                    let delay = retry_delay(&mut delays, &e);
                    tracing::warn!(attempt, delay_ms = delay.as_millis() as u64, error = %e, "llm models request failed, retrying");
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// One `GET /models`: its JSON (`Null` for a success that is not JSON).
    async fn get_models_once(&self, url: &str) -> Result<Value, LlmError> {
        let mut rb = self.http.get(url);
        if let Some(key) = &self.config.api_key {
            rb = rb.bearer_auth(key.expose());
        }
        let bytes = self.exchange(rb, url).await?;
        Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}
