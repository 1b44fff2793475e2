//! The embedder interface: text in, unit-length vectors out. Embeddings are a derived index, so
//! an embedder is pluggable (local MiniLM through candle, or any OpenAI-compatible endpoint) and
//! every vector is stored with the provider, model and dimension that produced it.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};

/// Which model produced a vector. Recorded on every embedding generation, so that a model change
/// means a new generation (a rebuild), never a silent mix of incomparable vectors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbedderInfo {
    /// The provider kind, e.g. `local` or `openai`.
    pub provider: String,
    /// The model id, e.g. `all-MiniLM-L6-v2`.
    pub model: String,
    /// The length of every vector it returns.
    pub dimension: usize,
}

/// Why an embedder produced no vectors. Deliberately carries no provider response body and no
/// input text: errors end up in logs and in `index_outbox.last_error_category`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmbedError {
    /// The provider could not be reached (connection refused, DNS, TLS).
    #[error("embedding provider unreachable; check the endpoint URL and that the service is running")]
    Unreachable,
    /// The provider did not answer in time (after the bounded retries).
    #[error("embedding provider timed out")]
    Timeout,
    /// The provider refused the request (HTTP 4xx other than 429): a key, model or input problem
    /// that retrying will not fix.
    #[error("embedding provider rejected the request with HTTP {status}; check the API key and model name")]
    Rejected {
        /// The HTTP status.
        status: u16,
    },
    /// The provider failed (HTTP 5xx or 429) after the bounded retries.
    #[error("embedding provider failed with HTTP {status} after retries")]
    ProviderFailed {
        /// The HTTP status.
        status: u16,
    },
    /// The response was not the documented shape (wrong count, missing fields, non-finite values).
    #[error("embedding provider returned a malformed response: {0}")]
    Malformed(&'static str),
    /// A vector had another length than the generation's dimension.
    #[error(
        "embedding has dimension {actual}, expected {expected}; the model changed: run `mesh-memory index rebuild`"
    )]
    DimensionMismatch {
        /// The configured dimension.
        expected: usize,
        /// What came back.
        actual: usize,
    },
    /// The local model could not be loaded or run.
    #[error("local embedding model failed: {0}; run scripts/setup-embedder.sh or set MESH_EMBEDDER_MODEL_DIR")]
    LocalModel(String),
}

impl EmbedError {
    /// The stable category recorded in `index_outbox.last_error_category` and in diagnostics.
    pub fn category(&self) -> &'static str {
        match self {
            Self::Unreachable => "provider_unreachable",
            Self::Timeout => "provider_timeout",
            Self::Rejected { .. } => "provider_rejected",
            Self::ProviderFailed { .. } => "provider_failed",
            Self::Malformed(_) => "provider_malformed",
            Self::DimensionMismatch { .. } => "dimension_mismatch",
            Self::LocalModel(_) => "local_model_failed",
        }
    }
}

/// Boxed future of [`Embedder::embed`] (keeps the trait object-safe).
pub type EmbedFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<Vec<f32>>, EmbedError>> + Send + 'a>>;

/// Turns texts into vectors, one per text, in order, each of length `info().dimension`.
pub trait Embedder: Send + Sync {
    /// Provider, model and dimension of the vectors.
    fn info(&self) -> &EmbedderInfo;

    /// Embeds a batch. Implementations must not log the texts.
    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a>;
}

/// Checks count, dimension and finiteness of what an embedder returned, and L2-normalises each
/// vector so that cosine distance and inner product agree whichever provider produced it.
pub fn validate_vectors(
    vectors: Vec<Vec<f32>>,
    expected_count: usize,
    dimension: usize,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    if vectors.len() != expected_count {
        return Err(EmbedError::Malformed("vector count differs from input count"));
    }
    vectors.into_iter().map(|v| normalized(v, dimension)).collect()
}

fn normalized(mut vector: Vec<f32>, dimension: usize) -> Result<Vec<f32>, EmbedError> {
    if vector.len() != dimension {
        return Err(EmbedError::DimensionMismatch { expected: dimension, actual: vector.len() });
    }
    if vector.iter().any(|x| !x.is_finite()) {
        return Err(EmbedError::Malformed("non-finite component"));
    }
    let norm = vector.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 {
        return Err(EmbedError::Malformed("zero vector"));
    }
    for x in &mut vector {
        *x = (f64::from(*x) / norm) as f32;
    }
    Ok(vector)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_and_checks_shape() {
        let out = validate_vectors(vec![vec![3.0, 4.0]], 1, 2).unwrap();
        assert!((out[0][0] - 0.6).abs() < 1e-6 && (out[0][1] - 0.8).abs() < 1e-6);
        assert_eq!(
            validate_vectors(vec![vec![1.0]], 1, 2),
            Err(EmbedError::DimensionMismatch { expected: 2, actual: 1 })
        );
        assert!(validate_vectors(vec![], 1, 2).is_err());
        assert!(validate_vectors(vec![vec![f32::NAN, 1.0]], 1, 2).is_err());
        assert!(validate_vectors(vec![vec![0.0, 0.0]], 1, 2).is_err());
    }
}
