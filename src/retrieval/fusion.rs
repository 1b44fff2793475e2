//! Explainable fusion: every score is a sum of named components, each kept with the selection.
//!
//! `score = rrf(lexical) + rrf(semantic) + subject + conversation + recency + always_on`, where
//! `rrf(rank) = weight / (k + rank)` (per-source weights, lexical 1.0 and semantic 0.5 by default). Subject mismatch carries no penalty; a subject match only adds.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::candidates::{Candidate, CandidateSource};
use super::config::RetrievalConfig;
use crate::ids::{ActorId, ConversationId};

/// A relevance source's rank (from 1) and its reciprocal-rank contribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankContribution {
    /// Position in that source's result list, best = 1.
    pub rank: u32,
    /// `1 / (k + rank)`.
    pub rrf: f64,
}

/// The inspectable parts of a final score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Components {
    /// Which candidate sources proposed the memory.
    pub sources: Vec<CandidateSource>,
    /// Full-text rank and contribution, if it matched.
    pub lexical: Option<RankContribution>,
    /// Vector-similarity rank and contribution, if it matched.
    pub semantic: Option<RankContribution>,
    /// Added because the subject is the current actor.
    pub subject_boost: f64,
    /// Added because the memory was formed in this conversation.
    pub conversation_boost: f64,
    /// Recency term (decays with the revision's age).
    pub recency: f64,
    /// Added because the entry is always-on.
    pub always_on: f64,
}

impl Components {
    /// The final score: the plain sum of the components.
    pub fn total(&self) -> f64 {
        self.lexical.map_or(0.0, |c| c.rrf)
            + self.semantic.map_or(0.0, |c| c.rrf)
            + self.subject_boost
            + self.conversation_boost
            + self.recency
            + self.always_on
    }

    /// Whether the query matched the memory lexically or semantically.
    pub fn is_relevant(&self) -> bool {
        self.lexical.is_some() || self.semantic.is_some()
    }

    /// A readable account of why the memory scored what it did (no body, no query text).
    pub fn reason(&self) -> String {
        let mut parts = Vec::new();
        if self.always_on > 0.0 {
            parts.push(format!("always-on entry (+{:.4})", self.always_on));
        }
        if let Some(c) = self.lexical {
            parts.push(format!("full-text match, rank {} (+{:.4})", c.rank, c.rrf));
        }
        if let Some(c) = self.semantic {
            parts.push(format!("semantic match, rank {} (+{:.4})", c.rank, c.rrf));
        }
        if self.subject_boost > 0.0 {
            parts.push(format!("about the current speaker (+{:.4})", self.subject_boost));
        }
        if self.conversation_boost > 0.0 {
            parts.push(format!("formed in this conversation (+{:.4})", self.conversation_boost));
        }
        parts.push(format!("recency (+{:.4})", self.recency));
        parts.join("; ")
    }
}

/// What the scorer needs to know about the turn.
pub(crate) struct ScoringContext {
    pub current_actor: Option<ActorId>,
    pub conversation: ConversationId,
    pub now: DateTime<Utc>,
}

/// Computes a candidate's components under the configured weights.
pub(crate) fn components(candidate: &Candidate, turn: &ScoringContext, config: &RetrievalConfig) -> Components {
    let rrf = |weight: f64| move |rank: u32| RankContribution { rank, rrf: weight / (config.rrf_k + f64::from(rank)) };
    let row = &candidate.row;
    let subject_match = turn.current_actor.is_some() && row.subject_actor_id == turn.current_actor;
    let conversation_match = row.origin_conversation_id == Some(turn.conversation);
    Components {
        sources: candidate.sources.clone(),
        lexical: candidate.lexical_rank.map(rrf(config.lexical_weight)),
        semantic: candidate.semantic_rank.map(rrf(config.semantic_weight)),
        subject_boost: if subject_match { config.subject_boost } else { 0.0 },
        conversation_boost: if conversation_match { config.conversation_boost } else { 0.0 },
        recency: recency(row.created_at, turn.now, config),
        always_on: if row.always_on { config.always_on_boost } else { 0.0 },
    }
}

/// `recency_weight * 0.5^(age_days / half_life)`; a revision from the future counts as new.
fn recency(created_at: DateTime<Utc>, now: DateTime<Utc>, config: &RetrievalConfig) -> f64 {
    let age = now - created_at;
    let age_seconds = age.num_microseconds().map_or(age.num_seconds() as f64, |us| us as f64 / 1e6);
    let age_days = age_seconds.max(0.0) / 86_400.0;
    if config.recency_half_life_days <= 0.0 {
        return 0.0;
    }
    config.recency_weight * 0.5f64.powf(age_days / config.recency_half_life_days)
}
