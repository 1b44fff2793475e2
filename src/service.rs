//! The one constructor of a configured retriever, for every shell (CLI `recall` and `chat`, the
//! evaluation, the benchmarks, the demo, and the MCP server to come).
//!
//! A retriever needs four things besides the store: its weights ([`RetrievalConfig`]), a
//! semantic index (or none), the audit digest key and how packing counts tokens. Shells used to assemble them each in their
//! own way, so `chat` ran without the semantic index `recall` used and read
//! `MESH_AGENT_MASTER_KEY` itself. Here each has one source: the environment
//! ([`RetrieverSetup::from_environment`]: `MESH_EMBEDDER` and its settings through
//! [`crate::semantic::semantic_index_from_env`], `MESH_AGENT_MASTER_KEY` through
//! [`digest_key_from_environment`] (and [`fingerprint_key_from_environment`] for erasures), the only place that reads it, `MESH_PROMPT_TOKENIZER` through
//! [`crate::retrieval::tokens::token_counter_from_environment`]) or an explicit choice (evaluation
//! variants, tests).

use std::sync::Arc;

use crate::erasure::FingerprintKey;
use crate::retrieval::tokens::{token_counter_from_environment, TokenCounter, TokenizerError};
use crate::retrieval::{DigestKey, RetrievalConfig, Retriever, SemanticIndex, WeakMasterKey};
use crate::store::Store;

/// Where the semantic index of a retriever comes from.
#[derive(Clone)]
pub enum SemanticChoice {
    /// No vector index: semantic candidates report `semantic_unavailable`.
    Off,
    /// The index `MESH_EMBEDDER` configures (none when it configures none).
    FromEnvironment,
    /// This index.
    Index(Arc<dyn SemanticIndex>),
}

/// Where the audit digest key of a retriever comes from.
#[derive(Clone, Debug)]
pub enum DigestKeyChoice {
    /// `MESH_AGENT_MASTER_KEY` or `MESH_AUDIT_DIGEST_KEY` ([`digest_key_from_environment`]).
    FromEnvironment,
    /// What the configuration says (`RetrievalConfig::digest_key`, usually none).
    AsConfigured,
}

/// How packing counts the cost of an entry.
#[derive(Clone)]
pub enum TokenCounting {
    /// UTF-8 bytes, the contract's conservative bound.
    Bytes,
    /// The tokenizer `MESH_PROMPT_TOKENIZER` names, else bytes.
    FromEnvironment,
    /// This counter.
    Counter(Arc<dyn TokenCounter>),
}

/// Everything a configured retriever is built from.
#[derive(Clone)]
pub struct RetrieverSetup {
    /// Weights and limits (validated when the retriever is built).
    pub config: RetrievalConfig,
    /// The semantic index.
    pub semantic: SemanticChoice,
    /// The audit digest key.
    pub digest_key: DigestKeyChoice,
    /// How entry costs are counted.
    pub tokens: TokenCounting,
}

impl RetrieverSetup {
    /// What a shell serving users runs with: `config`, the semantic index and the digest key the
    /// environment configures.
    pub fn from_environment(config: RetrievalConfig) -> Self {
        RetrieverSetup {
            config,
            semantic: SemanticChoice::FromEnvironment,
            digest_key: DigestKeyChoice::FromEnvironment,
            tokens: TokenCounting::FromEnvironment,
        }
    }

    /// `config` with an explicit semantic index (or none) and no environment read at all.
    pub fn explicit(config: RetrievalConfig, semantic: Option<Arc<dyn SemanticIndex>>) -> Self {
        let semantic = semantic.map_or(SemanticChoice::Off, SemanticChoice::Index);
        RetrieverSetup { config, semantic, digest_key: DigestKeyChoice::AsConfigured, tokens: TokenCounting::Bytes }
    }
}

/// Why a retriever could not be configured. Nothing was searched.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A weight or limit is out of range.
    #[error(transparent)]
    InvalidConfig(#[from] crate::retrieval::InvalidRetrievalConfig),
    /// `MESH_AGENT_MASTER_KEY` is too short to key a digest, or `MESH_AUDIT_DIGEST_KEY` is not one.
    #[error(transparent)]
    DigestKey(#[from] DigestKeyError),
    /// `MESH_PROMPT_TOKENIZER` names no usable tokenizer.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
}

/// A configured retriever and what its shell should tell the user about it.
pub struct ConfiguredRetriever {
    /// The retriever.
    pub retriever: Retriever,
    /// Why semantic search is off although the environment asked for it (a missing model, a bad
    /// `MESH_EMBEDDER`): the retriever still runs on its other sources and reports
    /// `semantic_unavailable`; shells print this once.
    pub semantic_unavailable: Option<String>,
}

/// Builds the retriever `setup` describes over `store`.
pub fn configured_retriever(store: &Store, setup: RetrieverSetup) -> Result<ConfiguredRetriever, SetupError> {
    let mut config = setup.config;
    config.validate()?;
    if let DigestKeyChoice::FromEnvironment = setup.digest_key {
        config.digest_key = digest_key_from_environment()?;
    }
    let (index, semantic_unavailable) = match setup.semantic {
        SemanticChoice::Off => (None, None),
        SemanticChoice::Index(index) => (Some(index), None),
        SemanticChoice::FromEnvironment => match crate::semantic::semantic_index_from_env() {
            Ok(index) => (index, None),
            Err(err) => (None, Some(err.to_string())),
        },
    };
    let retriever = match setup.tokens {
        TokenCounting::Bytes => Retriever::new(store.clone(), config),
        TokenCounting::FromEnvironment => {
            Retriever::new(store.clone(), config).with_token_counter(token_counter_from_environment()?)
        }
        TokenCounting::Counter(counter) => Retriever::new(store.clone(), config).with_token_counter(counter),
    };
    let retriever = match index {
        Some(index) => retriever.with_semantic_index(index),
        None => retriever,
    };
    Ok(ConfiguredRetriever { retriever, semantic_unavailable })
}

/// Why the environment's audit digest key was refused.
#[derive(Debug, thiserror::Error)]
pub enum DigestKeyError {
    /// `MESH_AGENT_MASTER_KEY` is too short to be a secret.
    #[error(transparent)]
    WeakMasterKey(#[from] WeakMasterKey),
    /// `MESH_AUDIT_DIGEST_KEY` is not 64 hex digits.
    #[error("MESH_AUDIT_DIGEST_KEY must be the 64 hex digits `mesh-memory mcp digest-key` prints")]
    Malformed,
    /// Both variables are set and name different keys.
    #[error("MESH_AUDIT_DIGEST_KEY is not the digest key of MESH_AGENT_MASTER_KEY; set only one of them")]
    Disagrees,
}

/// The audit digest key: derived from `MESH_AGENT_MASTER_KEY`, or given as such in
/// `MESH_AUDIT_DIGEST_KEY` (what an MCP host sets, so that it digests its searches as the runtime
/// does without holding the master key, which also keys erasure fingerprints). `None` when both
/// are unset or empty (no digest is recorded); an error when the master key is too short, the
/// digest key is not 64 hex digits, or both are set and disagree.
pub fn digest_key_from_environment() -> Result<Option<DigestKey>, DigestKeyError> {
    let derived = digest_key_from_master_key()?;
    let given = std::env::var_os("MESH_AUDIT_DIGEST_KEY")
        .filter(|value| !value.is_empty())
        .map(|value| value.to_str().and_then(DigestKey::from_hex).ok_or(DigestKeyError::Malformed))
        .transpose()?;
    match (derived, given) {
        (Some(derived), Some(given)) if derived != given => Err(DigestKeyError::Disagrees),
        (derived, given) => Ok(derived.or(given)),
    }
}

/// The audit digest key derived from `MESH_AGENT_MASTER_KEY` alone (`mesh-memory mcp digest-key`
/// prints it for a host's `MESH_AUDIT_DIGEST_KEY`).
pub fn digest_key_from_master_key() -> Result<Option<DigestKey>, WeakMasterKey> {
    master_key_from_environment().map(|key| DigestKey::from_master_key(&key)).transpose()
}

/// The erasure fingerprint key from `MESH_AGENT_MASTER_KEY` (another subkey of the same master
/// key): `None` when it is unset or empty (an erasure then records no fingerprints), an error
/// when it is too short.
pub fn fingerprint_key_from_environment() -> Result<Option<FingerprintKey>, WeakMasterKey> {
    master_key_from_environment().map(|key| FingerprintKey::from_master_key(&key)).transpose()
}

/// `MESH_AGENT_MASTER_KEY`'s bytes, `None` when unset or empty. The only reader of the variable.
fn master_key_from_environment() -> Option<Vec<u8>> {
    std::env::var_os("MESH_AGENT_MASTER_KEY").filter(|value| !value.is_empty()).map(|value| value.into_encoded_bytes())
}
