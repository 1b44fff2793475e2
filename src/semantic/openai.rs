//! An OpenAI-compatible `/v1/embeddings` client (OpenAI, vLLM, Ollama, LocalAI, TEI...).
//!
//! Bounded: one request has a timeout, transient failures (unreachable, timeout, HTTP 429/5xx)
//! are retried at most `max_retries` times with exponential backoff, and errors are typed
//! without the provider's response body (which may echo the input or the key).

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::embedder::{validate_vectors, EmbedError, EmbedFuture, Embedder, EmbedderInfo};

/// Where and how to call the endpoint.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL: `https://api.openai.com/v1` or `http://127.0.0.1:8080` (a base ending in `/v1`
    /// gets `/embeddings` appended, any other base `/v1/embeddings`).
    pub base_url: String,
    /// Bearer key; `None` for local servers that need none. Never logged (see `Debug`).
    pub api_key: Option<String>,
    /// The model name sent with each request and recorded on the generation.
    pub model: String,
    /// The vector length the model returns; checked on every response.
    pub dimension: usize,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
    /// Retries after the first attempt for transient failures.
    pub max_retries: u32,
    /// Backoff before the first retry; doubles on each further retry.
    pub initial_backoff: Duration,
}

impl OpenAiConfig {
    /// A configuration with conservative defaults: 10 s per request, 2 retries, 200 ms backoff.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>, dimension: usize) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            dimension,
            request_timeout: Duration::from_secs(10),
            max_retries: 2,
            initial_backoff: Duration::from_millis(200),
        }
    }

    fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        if base.ends_with("/v1") {
            format!("{base}/embeddings")
        } else {
            format!("{base}/v1/embeddings")
        }
    }
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("dimension", &self.dimension)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .finish()
    }
}

#[derive(Serialize)]
struct EmbeddingsRequest<'a> {
    model: &'a str,
    input: &'a [String],
    encoding_format: &'static str,
}

#[derive(Deserialize)]
struct EmbeddingsResponse {
    data: Vec<EmbeddingDatum>,
}

#[derive(Deserialize)]
struct EmbeddingDatum {
    index: usize,
    embedding: Vec<f32>,
}

/// The client. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    info: EmbedderInfo,
    http: reqwest::Client,
}

impl OpenAiEmbedder {
    /// Builds the client; fails only if the HTTP client cannot be constructed (TLS setup).
    pub fn new(config: OpenAiConfig) -> Result<Self, EmbedError> {
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.request_timeout)
            .build()
            .map_err(|_| EmbedError::Unreachable)?;
        let info = EmbedderInfo { provider: "openai".into(), model: config.model.clone(), dimension: config.dimension };
        Ok(Self { config, info, http })
    }

    async fn embed_with_retries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut backoff = self.config.initial_backoff;
        let mut attempt = 0;
        loop {
            match self.attempt(texts).await {
                Err(err) if is_transient(&err) && attempt < self.config.max_retries => {
                    attempt += 1;
                    tokio::time::sleep(backoff).await;
                    backoff = backoff.saturating_mul(2);
                }
                other => return other,
            }
        }
    }

    async fn attempt(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = EmbeddingsRequest { model: &self.config.model, input: texts, encoding_format: "float" };
        let mut request = self.http.post(self.config.endpoint()).json(&body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(|e| transport_error(&e))?;
        let status = response.status();
        if status.as_u16() == 429 || status.is_server_error() {
            return Err(EmbedError::ProviderFailed { status: status.as_u16() });
        }
        if !status.is_success() {
            return Err(EmbedError::Rejected { status: status.as_u16() });
        }
        let parsed: EmbeddingsResponse = response.json().await.map_err(|e| {
            if e.is_timeout() {
                EmbedError::Timeout
            } else {
                EmbedError::Malformed("body is not an embeddings response")
            }
        })?;
        let ordered = in_input_order(parsed.data, texts.len())?;
        validate_vectors(ordered, texts.len(), self.config.dimension)
    }
}

fn transport_error(err: &reqwest::Error) -> EmbedError {
    if err.is_timeout() {
        EmbedError::Timeout
    } else {
        EmbedError::Unreachable
    }
}

fn is_transient(err: &EmbedError) -> bool {
    matches!(err, EmbedError::Unreachable | EmbedError::Timeout | EmbedError::ProviderFailed { .. })
}

/// Orders the response by its `index` field; every input index must appear exactly once.
fn in_input_order(data: Vec<EmbeddingDatum>, count: usize) -> Result<Vec<Vec<f32>>, EmbedError> {
    if data.len() != count {
        return Err(EmbedError::Malformed("vector count differs from input count"));
    }
    let mut slots: Vec<Option<Vec<f32>>> = vec![None; count];
    for datum in data {
        let slot = slots.get_mut(datum.index).ok_or(EmbedError::Malformed("index out of range"))?;
        if slot.replace(datum.embedding).is_some() {
            return Err(EmbedError::Malformed("duplicate index"));
        }
    }
    slots.into_iter().map(|s| s.ok_or(EmbedError::Malformed("missing index"))).collect()
}

impl Embedder for OpenAiEmbedder {
    fn info(&self) -> &EmbedderInfo {
        &self.info
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        Box::pin(async move {
            if texts.is_empty() {
                return Ok(Vec::new());
            }
            self.embed_with_retries(texts).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_accepts_both_base_styles() {
        assert_eq!(OpenAiConfig::new("http://h:1/v1/", "m", 3).endpoint(), "http://h:1/v1/embeddings");
        assert_eq!(OpenAiConfig::new("http://h:1", "m", 3).endpoint(), "http://h:1/v1/embeddings");
    }

    #[test]
    fn debug_redacts_the_key() {
        let mut config = OpenAiConfig::new("http://h", "m", 3);
        config.api_key = Some("sk-secret".into());
        assert!(!format!("{config:?}").contains("sk-secret"));
    }
}
