//! Explainable fusion: every score is a sum of named components, each kept with the selection.
//!
//! `score = rrf(lexical) + rrf(semantic) + subject + conversation + recency + period + always_on`,
//! where `rrf(rank) = weight / (k + rank)` (per-source weights from [`RetrievalConfig`]). The
//! subject, conversation, recency and period boosts are fractions of the candidate's relevance
//! (the two RRF terms), so they scale with it: a boost reorders close matches and never lifts a
//! weak match over a much better one. For an empty query they are fractions of a best-rank contribution `1 / (k + 1)`.
//! Subject mismatch carries no penalty; a subject match only adds.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::candidates::{Candidate, CandidateSource};
use super::config::RetrievalConfig;
use super::when::QueryPeriod;
use crate::ids::{ActorId, ConversationId};

/// A relevance source's rank (from 1) and its reciprocal-rank contribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct RankContribution {
    /// Position in that source's result list, best = 1.
    pub rank: u32,
    /// `1 / (k + rank)`.
    pub rrf: f64,
}

/// The inspectable parts of a final score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
pub struct Components {
    /// Which candidate sources proposed the memory.
    pub sources: Vec<CandidateSource>,
    /// Full-text rank and contribution, if it matched.
    pub lexical: Option<RankContribution>,
    /// Vector-similarity rank and contribution, if it matched.
    pub semantic: Option<RankContribution>,
    /// Added because the memory is about the person the query is about.
    pub subject_boost: f64,
    /// Why the subject matched (absent when it did not, and in events recorded before the
    /// query's named people were resolved).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_match: Option<SubjectMatch>,
    /// Added because the memory was formed in this conversation.
    pub conversation_boost: f64,
    /// Recency term (decays with the time since the memory was learned).
    pub recency: f64,
    /// Added because the memory was learned in a period the query names (0 in events recorded
    /// before learned times existed).
    #[serde(default)]
    pub period_boost: f64,
    /// The period it was learned in, in words (`May 2023`), when the boost applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
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
            + self.period_boost
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
            let whom = match self.subject_match {
                Some(SubjectMatch::NamedInQuery) => "about a person the query names",
                Some(SubjectMatch::CurrentSpeaker) | None => "about the current speaker",
            };
            parts.push(format!("{whom} (+{:.4})", self.subject_boost));
        }
        if self.conversation_boost > 0.0 {
            parts.push(format!("formed in this conversation (+{:.4})", self.conversation_boost));
        }
        if self.period_boost > 0.0 {
            let period = self.period.as_deref().unwrap_or("a period the query names");
            parts.push(format!("learned in {period}, which the query names (+{:.4})", self.period_boost));
        }
        parts.push(format!("recency (+{:.4})", self.recency));
        parts.join("; ")
    }
}

/// Why a memory counted as being about the person the query is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum SubjectMatch {
    /// The query names no one the audience knows of, and the memory is about the speaker.
    CurrentSpeaker,
    /// The memory is about a person the query names (display name or connector id).
    NamedInQuery,
}

/// Who a query is about: the people it names, else the current speaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SubjectFocus {
    /// No speaker and no one named.
    Nobody,
    /// The current speaker (the query names no one).
    Speaker(ActorId),
    /// The people the query names.
    Named(Vec<ActorId>),
}

impl SubjectFocus {
    /// Whether a memory about `subject` is about the focus, and why.
    fn matches(&self, subject: Option<ActorId>) -> Option<SubjectMatch> {
        let subject = subject?;
        match self {
            SubjectFocus::Nobody => None,
            SubjectFocus::Speaker(actor) => (*actor == subject).then_some(SubjectMatch::CurrentSpeaker),
            SubjectFocus::Named(actors) => actors.contains(&subject).then_some(SubjectMatch::NamedInQuery),
        }
    }
}

/// What the scorer needs to know about the turn.
pub(crate) struct ScoringContext {
    pub focus: SubjectFocus,
    pub conversation: ConversationId,
    /// When the question was asked (the asking message's time): recency counts from it.
    pub now: DateTime<Utc>,
    /// The periods the query names, resolved against `now`.
    pub periods: Vec<QueryPeriod>,
}

/// Computes a candidate's components under the configured weights, all but those that depend on
/// when the memory was learned (recency and period: 0 here, see [`add_learned_time`]).
pub(crate) fn components(candidate: &Candidate, turn: &ScoringContext, config: &RetrievalConfig) -> Components {
    let rrf = |weight: f64| move |rank: u32| RankContribution { rank, rrf: weight / (config.rrf_k + f64::from(rank)) };
    let row = &candidate.row;
    let lexical = candidate.lexical_rank.map(rrf(config.lexical_weight));
    let semantic = candidate.semantic_rank.map(rrf(config.semantic_weight));
    let mut components = Components {
        sources: candidate.sources.clone(),
        lexical,
        semantic,
        subject_boost: 0.0,
        subject_match: turn.focus.matches(row.subject_actor_id),
        conversation_boost: 0.0,
        recency: 0.0,
        period_boost: 0.0,
        period: None,
        always_on: if row.always_on { config.always_on_boost } else { 0.0 },
    };
    let scale = scale(&components, config);
    if components.subject_match.is_some() {
        components.subject_boost = config.subject_weight * scale;
    }
    if row.origin_conversation_id == Some(turn.conversation) {
        components.conversation_boost = config.conversation_weight * scale;
    }
    components
}

/// Adds the components that depend on when the memory was learned: recency (from `learned_at`
/// to when the question was asked) and the period boost (learned in a period the query names).
/// Both only add, so a candidate never falls below where [`components`] ranked it.
pub(crate) fn add_learned_time(
    components: &mut Components,
    learned_at: DateTime<Utc>,
    turn: &ScoringContext,
    config: &RetrievalConfig,
) {
    let scale = scale(components, config);
    components.recency = scale * recency(learned_at, turn.now, config);
    if let Some(period) = turn.periods.iter().find(|p| p.contains(learned_at)) {
        components.period_boost = config.period_weight * scale;
        components.period = Some(period.label.clone());
    }
}

/// What the boosts are fractions of: the relevance (the two RRF terms), or for a candidate with
/// none (an empty query) a best-rank contribution `1 / (k + 1)`.
fn scale(components: &Components, config: &RetrievalConfig) -> f64 {
    let relevance = components.lexical.map_or(0.0, |c| c.rrf) + components.semantic.map_or(0.0, |c| c.rrf);
    if relevance > 0.0 {
        relevance
    } else {
        1.0 / (config.rrf_k + 1.0)
    }
}

/// `recency_weight * 0.5^(age_days / half_life)` (a fraction of the scale); a memory learned
/// after the question was asked counts as new.
fn recency(learned_at: DateTime<Utc>, now: DateTime<Utc>, config: &RetrievalConfig) -> f64 {
    let age = now - learned_at;
    let age_seconds = age.num_microseconds().map_or(age.num_seconds() as f64, |us| us as f64 / 1e6);
    let age_days = age_seconds.max(0.0) / 86_400.0;
    if config.recency_half_life_days <= 0.0 {
        return 0.0;
    }
    config.recency_weight * 0.5f64.powf(age_days / config.recency_half_life_days)
}
