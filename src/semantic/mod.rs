//! The semantic index: embeddings as derived, disposable indexes of immutable revision text.
//!
//! - [`embedder`]: the pluggable [`Embedder`] interface; [`openai`] (any OpenAI-compatible
//!   `/v1/embeddings` endpoint) and, with the `local-embedder` feature, `local` (all-MiniLM-L6-v2
//!   through candle).
//! - [`document`]: what text of a memory is embedded (the subject's name with the body).
//! - [`generations`]: which model's vectors serve queries; rebuilds switch atomically.
//! - [`outbox`]: the [`IndexWorker`] that drains `index_outbox` (written by every memory write in
//!   its own transaction) with `SKIP LOCKED`, bounded retries and backoff.
//! - [`rebuild`]: backfill of a new generation with progress.
//! - [`vector_index`]: [`PgVectorIndex`], retrieval's [`crate::retrieval::SemanticIndex`] over
//!   pgvector, searching only eligible rows ([`sign_bits`] shortlists the set retrieval read);
//!   with the `qdrant` feature, `qdrant` mirrors vectors into Qdrant ([`mirror`]: nothing
//!   resurrects) and searches it among the eligible set's ids; `qdrant_server` starts throwaway
//!   Qdrant servers and clusters.
//!
//! PostgreSQL stays canonical: dropping every embedding loses nothing a rebuild cannot restore.

pub mod document;
pub mod embedder;
mod embeddings;
pub mod generations;
#[cfg(feature = "local-embedder")]
pub mod local;
pub mod mirror;
pub mod openai;
pub mod outbox;
#[cfg(feature = "qdrant")]
pub mod qdrant;
#[cfg(feature = "qdrant")]
pub mod qdrant_server;
pub mod rebuild;
pub mod vector_index;

use std::sync::Arc;

pub use crate::retrieval::{SignBits, SignedQuery};
pub use document::{document_text, DOCUMENT_FORM};
pub use embedder::{EmbedError, EmbedFuture, Embedder, EmbedderInfo};
pub use embeddings::embedding_count;
pub use generations::{
    abandon_rebuild, generation_progress, list_generations, pgvector_available, rebuild_progress, Generation,
    GenerationState, RebuildProgress,
};
pub use mirror::{MirrorBatch, MirrorError, MirrorFuture, OwnedMirrorBatch, PointRef, VectorMirror};
pub use openai::{OpenAiConfig, OpenAiEmbedder};
pub use outbox::{outbox_status, BatchReport, IndexWorker, OutboxStatus, WorkerConfig};
pub use rebuild::{rebuild, rebuild_mirrored};
pub use vector_index::{
    availability, cap_distinct_hits, revalidate, IndexAvailability, PgVectorIndex, DEFAULT_MIN_SIMILARITY,
    MAX_ELIGIBLE_REVISIONS,
};

/// Why a semantic-index operation failed. Messages say what to do; none carries a provider body.
#[derive(Debug, thiserror::Error)]
pub enum SemanticError {
    /// The embedder failed (after its own bounded retries).
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// PostgreSQL failed.
    #[error("database error in the semantic index: {0}")]
    Database(#[from] sqlx::Error),
    /// The configured embedder is not the model of the active (or building) generation.
    #[error("embedder {embedder} does not match the index generation {generation}; run `mesh-memory index rebuild` to switch models")]
    EmbedderMismatch {
        /// The configured embedder.
        embedder: String,
        /// The generation in service.
        generation: String,
    },
    /// Another model's rebuild is in progress.
    #[error("generation {generation} ({model}) is being rebuilt; finish it with that model or run `mesh-memory index rebuild --abandon`")]
    RebuildInProgress {
        /// The building generation.
        generation: i64,
        /// Its model.
        model: String,
    },
    /// Two processes changed generations at once; rerun.
    #[error("another process changed the embedding generations at the same time; rerun the command")]
    ConcurrentGenerationChange,
    /// A dimension outside what the schema accepts.
    #[error("embedding dimension {0} is not supported (1..=16000)")]
    InvalidDimension(usize),
    /// No embedder is configured.
    #[error("no embedder configured: {0}")]
    NoEmbedder(String),
    /// The external vector index (Qdrant) failed a write; the category says how
    /// (`index_unreachable`, `index_failed`). Rerun when it is back.
    #[error("the external vector index failed ({0}); rerun when it is reachable")]
    Mirror(&'static str),
    /// The vector index configuration (`MESH_VECTOR_INDEX`, `QDRANT_URL`, ...) is unusable.
    #[error("vector index configuration: {0}")]
    VectorIndexConfig(String),
}

/// Which embedder to use, from the environment:
/// - `MESH_EMBEDDER=openai` with `MESH_EMBEDDER_URL`, `MESH_EMBEDDER_MODEL`, `MESH_EMBEDDER_DIMENSION`
///   and optionally `MESH_EMBEDDER_API_KEY`;
/// - `MESH_EMBEDDER=local` (the default when built with `local-embedder`): all-MiniLM-L6-v2 from
///   `MESH_EMBEDDER_MODEL_DIR` or the setup script's install directory.
pub fn embedder_from_env() -> Result<Arc<dyn Embedder>, SemanticError> {
    let kind = std::env::var("MESH_EMBEDDER").unwrap_or_else(|_| default_embedder_kind().to_owned());
    match kind.as_str() {
        "openai" => openai_from_env(),
        "local" => local_embedder(),
        "none" => Err(SemanticError::NoEmbedder("MESH_EMBEDDER=none".into())),
        other => Err(SemanticError::NoEmbedder(format!("unknown MESH_EMBEDDER={other:?}; use local or openai"))),
    }
}

fn default_embedder_kind() -> &'static str {
    if cfg!(feature = "local-embedder") {
        "local"
    } else {
        "none"
    }
}

fn openai_from_env() -> Result<Arc<dyn Embedder>, SemanticError> {
    let var = |name: &str| std::env::var(name).map_err(|_| SemanticError::NoEmbedder(format!("{name} is not set")));
    let dimension: usize = var("MESH_EMBEDDER_DIMENSION")?
        .parse()
        .map_err(|_| SemanticError::NoEmbedder("MESH_EMBEDDER_DIMENSION is not a number".into()))?;
    let mut config = OpenAiConfig::new(var("MESH_EMBEDDER_URL")?, var("MESH_EMBEDDER_MODEL")?, dimension);
    config.api_key = std::env::var("MESH_EMBEDDER_API_KEY").ok().filter(|k| !k.is_empty());
    Ok(Arc::new(OpenAiEmbedder::new(config)?))
}

#[cfg(feature = "local-embedder")]
fn local_embedder() -> Result<Arc<dyn Embedder>, SemanticError> {
    Ok(Arc::new(local::LocalMiniLm::load_default()?))
}

#[cfg(not(feature = "local-embedder"))]
fn local_embedder() -> Result<Arc<dyn Embedder>, SemanticError> {
    Err(SemanticError::NoEmbedder(
        "this binary was built without the `local-embedder` feature; rebuild with --features local-embedder or set MESH_EMBEDDER=openai".into(),
    ))
}

/// The semantic candidate source for retrieval, configured from the environment (see
/// [`embedder_from_env`] and [`vector_backend`]): pgvector or Qdrant search with that embedder.
/// `Ok(None)` when no embedder is configured (`MESH_EMBEDDER=none`, or a build without
/// `local-embedder` and no `MESH_EMBEDDER`); retrieval then reports `semantic_unavailable` and runs
/// on its other sources.
pub fn semantic_index_from_env() -> Result<Option<Arc<dyn crate::retrieval::SemanticIndex>>, SemanticError> {
    match embedder_from_env() {
        Ok(embedder) => Ok(Some(vector_backend(VectorIndexChoice::from_env()?, embedder)?.index)),
        Err(SemanticError::NoEmbedder(_)) if std::env::var_os("MESH_EMBEDDER").is_none() => Ok(None),
        Err(SemanticError::NoEmbedder(reason)) if reason == "MESH_EMBEDDER=none" => Ok(None),
        Err(err) => Err(err),
    }
}

/// Which vector index holds the vectors: pgvector inside PostgreSQL, or a Qdrant server or
/// cluster beside it (the way past one machine, ARCHITECTURE.md "How a deployment scales").
#[derive(Clone, Debug)]
pub enum VectorIndexChoice {
    /// `revision_embeddings` in PostgreSQL, searched over the eligible set.
    PgVector,
    /// Qdrant (build feature `qdrant`), configured by [`qdrant::QdrantConfig`].
    #[cfg(feature = "qdrant")]
    Qdrant(qdrant::QdrantConfig),
}

impl VectorIndexChoice {
    /// `MESH_VECTOR_INDEX` (`pgvector` or `qdrant`); unset: `qdrant` when `QDRANT_URL` is set,
    /// else `pgvector`. Asking for Qdrant in a build without it is an error, not a fallback.
    pub fn from_env() -> Result<Self, SemanticError> {
        let chosen = std::env::var("MESH_VECTOR_INDEX").ok().filter(|v| !v.is_empty());
        let qdrant_url = std::env::var_os("QDRANT_URL").is_some_and(|u| !u.is_empty());
        match chosen.as_deref() {
            Some("pgvector") => Ok(Self::PgVector),
            None if !qdrant_url => Ok(Self::PgVector),
            Some("qdrant") | None => Self::qdrant_from_env(),
            Some(other) => Err(SemanticError::VectorIndexConfig(format!(
                "unknown MESH_VECTOR_INDEX={other:?}; use pgvector or qdrant"
            ))),
        }
    }

    #[cfg(feature = "qdrant")]
    fn qdrant_from_env() -> Result<Self, SemanticError> {
        Ok(Self::Qdrant(qdrant::QdrantConfig::from_env()?))
    }

    #[cfg(not(feature = "qdrant"))]
    fn qdrant_from_env() -> Result<Self, SemanticError> {
        Err(SemanticError::VectorIndexConfig(
            "this binary was built without the `qdrant` feature; rebuild with --features qdrant or unset QDRANT_URL"
                .into(),
        ))
    }
}

/// A configured vector index: what retrieval searches, and what the worker and rebuilds must also
/// write (an external index; `None` for pgvector, which lives in the worker's own rows).
#[derive(Clone)]
pub struct VectorBackend {
    /// Retrieval's semantic source.
    pub index: Arc<dyn crate::retrieval::SemanticIndex>,
    /// The external index to keep in line ([`IndexWorker::with_mirror`], [`rebuild_mirrored`]).
    pub mirror: Option<Arc<dyn VectorMirror>>,
}

/// Builds the index `choice` names, embedding queries with `embedder`.
pub fn vector_backend(choice: VectorIndexChoice, embedder: Arc<dyn Embedder>) -> Result<VectorBackend, SemanticError> {
    match choice {
        VectorIndexChoice::PgVector => {
            Ok(VectorBackend { index: Arc::new(PgVectorIndex::new(embedder)), mirror: None })
        }
        #[cfg(feature = "qdrant")]
        VectorIndexChoice::Qdrant(config) => {
            let index =
                Arc::new(qdrant::QdrantIndex::new(config, embedder).map_err(|e| SemanticError::Mirror(e.category()))?);
            Ok(VectorBackend { index: index.clone(), mirror: Some(index) })
        }
    }
}
