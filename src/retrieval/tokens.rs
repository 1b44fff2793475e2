//! How packing counts what an entry costs of the prompt allowance.
//!
//! The contract's bound is the default ([`ByteBound`]): the UTF-8 length of a representation,
//! which no tokenizer in use exceeds (see [`super::packing`]). With a model's tokenizer
//! configured (`MESH_PROMPT_TOKENIZER`, a `tokenizer.json`; built with the `prompt-tokenizer`
//! feature), packing counts that tokenizer's real tokens of the same representations instead,
//! which is three to four times fewer for English text. Every audited search records which bound
//! it used ([`CostBound`]).

use std::fmt::Debug;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Which count a search's costs are in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum CostBound {
    /// UTF-8 bytes: an upper bound on the tokens of any tokenizer in use (the contract's bound).
    #[default]
    Bytes,
    /// Tokens of the configured model tokenizer.
    Tokenizer,
}

impl CostBound {
    /// The stored name (`memory_retrieval_events.cost_bound`).
    pub fn as_str(&self) -> &'static str {
        match self {
            CostBound::Bytes => "bytes",
            CostBound::Tokenizer => "tokenizer",
        }
    }

    /// Reads a stored name; anything unknown reads as the conservative bound.
    pub fn from_stored(name: &str) -> Self {
        match name {
            "tokenizer" => CostBound::Tokenizer,
            _ => CostBound::Bytes,
        }
    }
}

/// Counts the cost of a representation of an entry.
pub trait TokenCounter: Send + Sync + Debug {
    /// The cost of `text`.
    fn count(&self, text: &str) -> u32;

    /// Which bound these counts are.
    fn bound(&self) -> CostBound;
}

/// The contract's conservative bound: one token per UTF-8 byte.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByteBound;

impl TokenCounter for ByteBound {
    fn count(&self, text: &str) -> u32 {
        u32::try_from(text.len()).unwrap_or(u32::MAX)
    }

    fn bound(&self) -> CostBound {
        CostBound::Bytes
    }
}

/// Why a configured tokenizer could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// This binary was built without the `prompt-tokenizer` feature.
    #[error(
        "MESH_PROMPT_TOKENIZER is set, but this binary was built without the `prompt-tokenizer` feature \
         (rebuild with --features prompt-tokenizer, or unset it to count UTF-8 bytes)"
    )]
    NotBuiltIn,
    /// The file could not be read or is not a tokenizer definition.
    #[error("MESH_PROMPT_TOKENIZER {path}: not a readable tokenizer.json ({reason})")]
    Unreadable {
        /// The configured path.
        path: String,
        /// What went wrong (the library's message; it names no secret).
        reason: String,
    },
}

/// A model's tokenizer, loaded from its `tokenizer.json`: counts the tokens the model would see,
/// without special tokens, truncation or padding.
#[cfg(feature = "prompt-tokenizer")]
#[derive(Debug)]
pub struct ModelTokenizer {
    tokenizer: tokenizers::Tokenizer,
}

#[cfg(feature = "prompt-tokenizer")]
impl ModelTokenizer {
    /// Loads `path` (a Hugging Face `tokenizer.json`).
    pub fn from_file(path: &std::path::Path) -> Result<Self, TokenizerError> {
        let unreadable = |reason: String| TokenizerError::Unreadable { path: path.display().to_string(), reason };
        let mut tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| unreadable(e.to_string()))?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(|e| unreadable(e.to_string()))?;
        Ok(ModelTokenizer { tokenizer })
    }
}

#[cfg(feature = "prompt-tokenizer")]
impl TokenCounter for ModelTokenizer {
    fn count(&self, text: &str) -> u32 {
        match self.tokenizer.encode(text, false) {
            Ok(encoding) => u32::try_from(encoding.len()).unwrap_or(u32::MAX),
            // A text the tokenizer refuses is counted by the bound that holds for every tokenizer.
            Err(_) => ByteBound.count(text),
        }
    }

    fn bound(&self) -> CostBound {
        CostBound::Tokenizer
    }
}

/// The counter `MESH_PROMPT_TOKENIZER` configures: the byte bound when it is unset or empty.
pub fn token_counter_from_environment() -> Result<Arc<dyn TokenCounter>, TokenizerError> {
    match std::env::var_os("MESH_PROMPT_TOKENIZER") {
        Some(path) if !path.is_empty() => model_tokenizer(std::path::Path::new(&path)),
        _ => Ok(Arc::new(ByteBound)),
    }
}

#[cfg(feature = "prompt-tokenizer")]
fn model_tokenizer(path: &std::path::Path) -> Result<Arc<dyn TokenCounter>, TokenizerError> {
    Ok(Arc::new(ModelTokenizer::from_file(path)?))
}

#[cfg(not(feature = "prompt-tokenizer"))]
fn model_tokenizer(_path: &std::path::Path) -> Result<Arc<dyn TokenCounter>, TokenizerError> {
    Err(TokenizerError::NotBuiltIn)
}
