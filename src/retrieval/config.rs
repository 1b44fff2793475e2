//! Retrieval configuration: fusion weights, limits and the audit digest key.
//!
//! The weights are conservative starting values, not corpus-tuned truth (see the spec: "weights
//! are configuration and evaluation results, not architectural truth"). Their scale is set by
//! reciprocal-rank fusion: with `k = 60` the best lexical (or semantic) rank contributes
//! `1/61 ≈ 0.0164`, rank 10 contributes `1/70 ≈ 0.0143`, rank 200 `1/260 ≈ 0.0038`.

use std::fmt;
use std::time::Duration;

use hkdf::Hkdf;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The HKDF info label of the query-digest subkey. Versioned: changing the derivation must change
/// the label, so digests from different derivations never compare equal by accident.
pub const QUERY_DIGEST_INFO: &[u8] = b"mesh-memory/retrieval-query-digest/v1";

/// The shortest master key accepted, in bytes. Shorter keys make the keyed digest guessable.
pub const MIN_MASTER_KEY_BYTES: usize = 16;

/// Default weight of semantic ranks in the fusion, relative to lexical ranks (1.0). Set from the
/// LoCoMo dev split (BENCHMARKS.md): with equal weights the weaker semantic ranking (MiniLM,
/// recall@10 0.325 alone vs 0.476 lexical on the 6 dev conversations) displaced good lexical
/// matches and hybrid recall@10 fell below lexical (0.462); on the first two conversations weight
/// 0.5 gave hybrid 0.434 and 0.3 gave 0.437 against lexical 0.430. A lower weight lets semantic
/// hits fill in where lexical has none without reordering strong lexical matches.
pub const DEFAULT_SEMANTIC_WEIGHT: f64 = 0.3;

/// Default number of memories per search.
pub const DEFAULT_MAX_COUNT: u32 = 8;

/// Default memory allowance in (upper-bound) tokens.
pub const DEFAULT_TOKEN_BUDGET: u32 = 4096;

/// Tunable parameters of the one retrieval service.
#[derive(Clone, Debug)]
pub struct RetrievalConfig {
    /// The `k` of reciprocal-rank fusion: a source's contribution is `1 / (k + rank)`, rank
    /// counted from 1. Default 60 (the value of the original RRF paper): large enough that the
    /// top few ranks of one source do not drown the other source, small enough that rank still
    /// matters.
    pub rrf_k: f64,
    /// Multiplies the lexical RRF contribution. Default 1.0.
    pub lexical_weight: f64,
    /// Multiplies the semantic RRF contribution. Default: see [`DEFAULT_SEMANTIC_WEIGHT`].
    pub semantic_weight: f64,
    /// Added when the revision's subject is the current actor. Default 0.0005: about the gap
    /// between two or three neighbouring lexical ranks near the top (RRF compresses ranks: rank 1
    /// and rank 10 differ by only 0.002), so a subject match breaks near-ties among relevant
    /// memories without burying a better match about someone else. Measured on the LoCoMo dev
    /// split (2 samples, lexical only): recall@10 0.430 at 0.0005, 0.346 at 0.002, 0.138 at 0.004
    /// and 0.096 at the earlier 0.010 (see BENCHMARKS.md). Non-empty queries still require lexical
    /// or semantic relevance, so a boost never makes an irrelevant memory relevant.
    pub subject_boost: f64,
    /// Added when the entry was formed in the destination conversation. Default 0.0003: below
    /// the subject boost, above the largest recency term, so empty queries rank by subject, then
    /// conversation, then recency.
    pub conversation_boost: f64,
    /// Maximum recency term, for a revision written just now; it halves every
    /// `recency_half_life_days`. Default 0.0002: a tie-breaker, not a ranking of its own.
    pub recency_weight: f64,
    /// Half-life of the recency term in days. Default 30.
    pub recency_half_life_days: f64,
    /// Added to always-on entries. Default 1.0, which puts them ahead of every ranked candidate
    /// so that packing admits them first: their contract requires them on every applicable turn.
    pub always_on_boost: f64,
    /// At most this many candidates per source (subject, conversation, lexical, semantic,
    /// always-on). Default 200.
    pub per_source_limit: u32,
    /// Deadline of semantic work; on expiry retrieval degrades to lexical (`semantic_timeout`).
    /// Default 3 s.
    pub semantic_deadline: Duration,
    /// Tokens added to every entry's cost for the framing around it (list markers, separators,
    /// tool-result structure). Default 16.
    pub attribution_overhead_tokens: u32,
    /// Key of the audit query digest; `None` records no digest (never a plain hash).
    pub digest_key: Option<DigestKey>,
    /// Whether the lexical (full-text) source runs. Default true; the evaluation turns it off to
    /// measure semantic candidates alone.
    pub lexical_enabled: bool,
    /// Up to this many eligible revisions, retrieval reads the whole eligible set once (an
    /// index-only scan over audience classes) and draws the subject, conversation and always-on
    /// candidates from it and passes it to the semantic index; above it, each source runs its own
    /// statement and semantic search reports `semantic_oversized`. Default 10,000, the spec's
    /// semantic cap.
    pub eligible_set_limit: usize,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        Self {
            rrf_k: 60.0,
            lexical_weight: 1.0,
            semantic_weight: DEFAULT_SEMANTIC_WEIGHT,
            subject_boost: 0.0005,
            conversation_boost: 0.0003,
            recency_weight: 0.0002,
            recency_half_life_days: 30.0,
            always_on_boost: 1.0,
            per_source_limit: 200,
            semantic_deadline: Duration::from_secs(3),
            attribution_overhead_tokens: 16,
            digest_key: None,
            lexical_enabled: true,
            eligible_set_limit: crate::semantic::MAX_ELIGIBLE_REVISIONS,
        }
    }
}

/// Why a master key was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "MESH_AGENT_MASTER_KEY is {0} bytes; it must be at least {MIN_MASTER_KEY_BYTES} bytes of secret material \
     (e.g. `openssl rand -hex 32`), or unset to record no query digest"
)]
pub struct WeakMasterKey(pub usize);

/// The HMAC key of the audit query digest: an HKDF-SHA256 subkey of `MESH_AGENT_MASTER_KEY`
/// under [`QUERY_DIGEST_INFO`]. A plain hash of a short query ("tabs or spaces?") is reversed by
/// hashing guesses; a keyed digest is not, yet equal queries still compare equal under one key.
#[derive(Clone)]
pub struct DigestKey([u8; 32]);

impl DigestKey {
    /// Derives the subkey from the master key bytes.
    pub fn from_master_key(master: &[u8]) -> Result<DigestKey, WeakMasterKey> {
        if master.len() < MIN_MASTER_KEY_BYTES {
            return Err(WeakMasterKey(master.len()));
        }
        let mut key = [0u8; 32];
        Hkdf::<Sha256>::new(None, master)
            .expand(QUERY_DIGEST_INFO, &mut key)
            .expect("32 bytes is a valid HKDF-SHA256 output length");
        Ok(DigestKey(key))
    }

    /// HMAC-SHA256 of the query text under this key (32 bytes).
    pub fn digest(&self, query: &str) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        mac.update(query.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey(<redacted>)")
    }
}
