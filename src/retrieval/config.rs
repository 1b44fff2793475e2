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

/// Default weight of semantic ranks in the fusion, relative to lexical ranks (1.0). Set on the
/// LoCoMo dev split (docs/retrieval-quality-2026-12-05.md): MiniLM's ranking of questions against
/// chat turns was weaker than BM25's when this was set (recall@10 0.47 alone against 0.65), and
/// hybrid recall@10 was 0.652 at 0.2, 0.650 at 0.3, 0.640 at 0.4, 0.608 at 0.5 and 0.554 at 1.0:
/// semantic hits fill in where lexical has none without reordering strong lexical matches.
pub const DEFAULT_SEMANTIC_WEIGHT: f64 = 0.3;

/// Default [`RetrievalConfig::subject_weight`]: a memory about the person a query is about scores
/// 5% above its relevance alone. Tuned on the LoCoMo dev split
/// (docs/retrieval-quality-2026-12-05.md, hybrid recall@10): 0.669 at 0.05, 0.668 at 0.1, 0.646 at
/// 0.2, 0.632 at 0.3. Small, because the full-text side no longer searches the names of the
/// destination's members a query names (the name as a term favoured memories that merely address
/// the person), so the boost only breaks near-ties.
pub const DEFAULT_SUBJECT_WEIGHT: f64 = 0.05;

/// Default [`RetrievalConfig::period_weight`]: a memory learned in the period a query names
/// scores this fraction above its relevance alone. Set on the LoCoMo dev split with the
/// conversations' own dates (docs/retrieval-quality-2026-12-06.md, hybrid recall@10): 0.685 at 0,
/// 0.686 at 0.1, 0.690 at 0.3, 0.692 at 0.5, 0.694 at 1 and at 2. Half a relevance, below the
/// plateau: a period named in passing should reorder close matches, not lift a weak match far.
pub const DEFAULT_PERIOD_WEIGHT: f64 = 0.5;

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
    /// A memory about the person the query is about (the people it names, else the current
    /// speaker) scores this fraction more than its relevance alone: the boost is
    /// `subject_weight * relevance`, so it reorders close matches and never lifts a weak match
    /// over a much better one, whatever the scale of the relevance scores. For an empty query
    /// (no relevance) it is this fraction of a best-rank contribution, `1 / (rrf_k + 1)`.
    /// Default 0.05 (see [`DEFAULT_SUBJECT_WEIGHT`]).
    pub subject_weight: f64,
    /// A memory formed in the destination conversation scores this fraction more, in the same
    /// way as [`Self::subject_weight`]. Default 0.03: below the subject weight, above the largest
    /// recency term, so empty queries rank by subject, then conversation, then recency.
    pub conversation_weight: f64,
    /// The recency term of a revision written just now, as a fraction of the relevance (or of a
    /// best-rank contribution for an empty query); it halves every `recency_half_life_days`.
    /// Default 0.02: a tie-breaker, not a ranking of its own.
    pub recency_weight: f64,
    /// Half-life of the recency term in days. Default 30. Age is counted from when the memory
    /// was learned (`memory_learned_times`) to when the question was asked.
    pub recency_half_life_days: f64,
    /// A memory learned in a period the query names ("in May 2023", "last week", resolved
    /// against the asking message's time, [`super::when::QueryPeriod`]) scores this fraction more
    /// than its relevance alone, like the subject boost. Default: see [`DEFAULT_PERIOD_WEIGHT`].
    pub period_weight: f64,
    /// The learned-time components (recency, period) are computed for this many of the best
    /// candidates by every other component, which are then reordered among themselves: one
    /// bounded statement reads their learned times. The rest keep their order below them (their
    /// time components stay 0, and adding to the window's scores can only lift it). Default 50:
    /// five times the largest default count budget, at about 0.7 ms per search for the read.
    pub time_rerank_window: u32,
    /// Added to always-on entries. Default 1.0, which puts them ahead of every ranked candidate
    /// so that packing admits them first: their contract requires them on every applicable turn.
    pub always_on_boost: f64,
    /// At most this many candidates per source (subject, conversation, lexical, semantic,
    /// always-on). Default 200.
    pub per_source_limit: u32,
    /// The withheld diagnostics count at most this many rejected full-text matches with unknown
    /// evidence, and sample at most this many for the other rules (term by term, a later term
    /// only when the earlier ones found fewer): a count that reaches it is a lower bound ("at
    /// least"). Their cost per search is proportional to it (at 1M revisions, about 4 ms at 200
    /// and 2 ms at 50, the largest statement of a lexical search), and one withheld match with
    /// unknown evidence is enough to record `eligibility_withheld_unknown`. Default 50; at least 1.
    pub withheld_count_limit: u32,
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
    /// Up to this many eligible revisions, a semantic index that searches within the eligible set
    /// gets the whole set, read in one statement (an index-only scan over audience classes), and
    /// the subject, conversation and always-on candidates are taken from it. Above it, semantic
    /// search reports `semantic_oversized` and those candidates are read on their own, as they are
    /// whenever no index searches the set. Default 10,000, the spec's semantic cap.
    pub eligible_set_limit: usize,
    /// Okapi BM25 term-frequency saturation of the lexical ranking. Default 1.2, the textbook
    /// value (and that of the exact BM25 baseline `eval` runs beside it).
    pub bm25_k1: f64,
    /// Okapi BM25 document-length normalisation, 0 (none) to 1 (full). Default 0.5: memories are
    /// one fact each, a sentence or two, and their length says little about how much of them a
    /// query matches (LoCoMo dev split, hybrid recall@10 0.643 at 0.75, 0.650 at 0.5, 0.633 at
    /// 0.9; docs/retrieval-quality-2026-12-05.md).
    pub bm25_b: f64,
}

impl Default for RetrievalConfig {
    fn default() -> Self {
        Self {
            rrf_k: 60.0,
            lexical_weight: 1.0,
            semantic_weight: DEFAULT_SEMANTIC_WEIGHT,
            subject_weight: DEFAULT_SUBJECT_WEIGHT,
            conversation_weight: 0.03,
            recency_weight: 0.02,
            recency_half_life_days: 30.0,
            period_weight: DEFAULT_PERIOD_WEIGHT,
            time_rerank_window: 50,
            always_on_boost: 1.0,
            per_source_limit: 200,
            withheld_count_limit: 50,
            semantic_deadline: Duration::from_secs(3),
            attribution_overhead_tokens: 16,
            digest_key: None,
            lexical_enabled: true,
            eligible_set_limit: super::MAX_ELIGIBLE_REVISIONS,
            bm25_k1: 1.2,
            bm25_b: 0.5,
        }
    }
}

/// A configuration value outside its meaningful range (the field and why).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("retrieval configuration: {field} = {value} {why}")]
pub struct InvalidRetrievalConfig {
    /// The field, as named in [`RetrievalConfig`].
    pub field: &'static str,
    /// The value given.
    pub value: f64,
    /// What it must be.
    pub why: &'static str,
}

impl RetrievalConfig {
    /// Checks every numeric field for a value retrieval can rank with: weights and boosts finite
    /// and non-negative, `rrf_k` and `bm25_k1` positive, `bm25_b` within 0..=1,
    /// `withheld_count_limit` at least 1. Shells call it on
    /// configuration they read from users before building a retriever.
    pub fn validate(&self) -> Result<(), InvalidRetrievalConfig> {
        let non_negative = [
            ("lexical_weight", self.lexical_weight),
            ("semantic_weight", self.semantic_weight),
            ("subject_weight", self.subject_weight),
            ("conversation_weight", self.conversation_weight),
            ("recency_weight", self.recency_weight),
            ("recency_half_life_days", self.recency_half_life_days),
            ("period_weight", self.period_weight),
            ("always_on_boost", self.always_on_boost),
        ];
        for (field, value) in non_negative {
            if !value.is_finite() || value < 0.0 {
                return Err(InvalidRetrievalConfig { field, value, why: "must be a finite number >= 0" });
            }
        }
        for (field, value) in [("rrf_k", self.rrf_k), ("bm25_k1", self.bm25_k1)] {
            if !value.is_finite() || value <= 0.0 {
                return Err(InvalidRetrievalConfig { field, value, why: "must be a finite number > 0" });
            }
        }
        if !(0.0..=1.0).contains(&self.bm25_b) {
            return Err(InvalidRetrievalConfig { field: "bm25_b", value: self.bm25_b, why: "must be within 0..=1" });
        }
        if self.withheld_count_limit == 0 {
            // Zero would count nothing, and a withheld memory with unknown evidence would go unrecorded.
            let value = f64::from(self.withheld_count_limit);
            return Err(InvalidRetrievalConfig { field: "withheld_count_limit", value, why: "must be at least 1" });
        }
        Ok(())
    }

    /// Sets one numeric tuning field by its name in this struct (`semantic_weight`, `bm25_k1`,
    /// ...), for the evaluation's `--set` and `--also`. Unknown names are refused, and so is a
    /// value [`Self::validate`] would refuse.
    pub fn set_field(&mut self, name: &str, value: f64) -> Result<(), InvalidRetrievalConfig> {
        let mut changed = self.clone();
        let field = changed.field_mut(name).ok_or(InvalidRetrievalConfig {
            field: "(name)",
            value,
            why: "names no tunable field (rrf_k, lexical_weight, semantic_weight, subject_weight, \
                  conversation_weight, recency_weight, recency_half_life_days, period_weight, always_on_boost, \
                  bm25_k1, bm25_b)",
        })?;
        *field = value;
        changed.validate()?;
        *self = changed;
        Ok(())
    }

    fn field_mut(&mut self, name: &str) -> Option<&mut f64> {
        Some(match name {
            "rrf_k" => &mut self.rrf_k,
            "lexical_weight" => &mut self.lexical_weight,
            "semantic_weight" => &mut self.semantic_weight,
            "subject_weight" => &mut self.subject_weight,
            "conversation_weight" => &mut self.conversation_weight,
            "recency_weight" => &mut self.recency_weight,
            "recency_half_life_days" => &mut self.recency_half_life_days,
            "period_weight" => &mut self.period_weight,
            "always_on_boost" => &mut self.always_on_boost,
            "bm25_k1" => &mut self.bm25_k1,
            "bm25_b" => &mut self.bm25_b,
            _ => return None,
        })
    }

    /// Applies `name=value` settings separated by commas (`semantic_weight=0.5,bm25_b=0.6`).
    pub fn with_settings(mut self, settings: &str) -> Result<Self, InvalidSetting> {
        for setting in settings.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = setting.split_once('=').ok_or_else(|| InvalidSetting(setting.to_owned()))?;
            let value: f64 = value.trim().parse().map_err(|_| InvalidSetting(setting.to_owned()))?;
            if name.trim() == "lexical_enabled" {
                self.lexical_enabled = value != 0.0;
                continue;
            }
            self.set_field(name.trim(), value).map_err(|e| InvalidSetting(format!("{setting}: {e}")))?;
        }
        Ok(self)
    }

    /// The BM25 parameters the lexical statement binds.
    pub(crate) fn bm25(&self) -> super::candidates::Bm25Parameters {
        super::candidates::Bm25Parameters { k1: self.bm25_k1, b: self.bm25_b }
    }
}

/// A `name=value` setting that could not be applied (what was given, and why).
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("retrieval setting {0:?} is not `name=number` for a tunable field")]
pub struct InvalidSetting(pub String);

/// Why a master key was refused.
#[derive(Debug, thiserror::Error)]
#[error(
    "MESH_AGENT_MASTER_KEY is {0} bytes; it must be at least {MIN_MASTER_KEY_BYTES} bytes of secret material \
     (e.g. `openssl rand -hex 32`), or unset to record no query digest"
)]
pub struct WeakMasterKey(pub usize);

/// A 32-byte HKDF-SHA256 subkey of the master key under `info`: each use of the master key (the
/// audit digest, erasure fingerprints) gets its own, so one's outputs say nothing about another's.
pub(crate) fn derive_subkey(master: &[u8], info: &[u8]) -> Result<[u8; 32], WeakMasterKey> {
    if master.len() < MIN_MASTER_KEY_BYTES {
        return Err(WeakMasterKey(master.len()));
    }
    let mut key = [0u8; 32];
    Hkdf::<Sha256>::new(None, master).expand(info, &mut key).expect("32 bytes is a valid HKDF-SHA256 output length");
    Ok(key)
}

/// The HMAC key of the audit query digest: an HKDF-SHA256 subkey of `MESH_AGENT_MASTER_KEY`
/// under [`QUERY_DIGEST_INFO`]. A plain hash of a short query ("tabs or spaces?") is reversed by
/// hashing guesses; a keyed digest is not, yet equal queries still compare equal under one key.
#[derive(Clone)]
pub struct DigestKey([u8; 32]);

impl DigestKey {
    /// Derives the subkey from the master key bytes.
    pub fn from_master_key(master: &[u8]) -> Result<DigestKey, WeakMasterKey> {
        derive_subkey(master, QUERY_DIGEST_INFO).map(DigestKey)
    }

    /// The key as 64 lower-case hex digits, for a process that must digest queries without
    /// holding the master key (`MESH_AUDIT_DIGEST_KEY`, printed by `mesh-memory mcp digest-key`).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The key from [`DigestKey::to_hex`]'s form; `None` unless exactly 64 hex digits.
    pub fn from_hex(text: &str) -> Option<DigestKey> {
        let mut key = [0u8; 32];
        hex::decode_to_slice(text.trim(), &mut key).ok()?;
        Some(DigestKey(key))
    }

    /// HMAC-SHA256 of the query text under this key (32 bytes).
    pub fn digest(&self, query: &str) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        mac.update(query.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }
}

/// Keys compare by their bytes (two configurations agree on the digest they record).
impl PartialEq for DigestKey {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl Eq for DigestKey {}

impl fmt::Debug for DigestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DigestKey(<redacted>)")
    }
}
