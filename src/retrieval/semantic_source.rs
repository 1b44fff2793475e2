//! The semantic candidate source, as retrieval sees it: the [`SemanticIndex`] trait and every type
//! it hands an index or takes back. Retrieval owns this interface; the implementations live in
//! [`crate::semantic`] (pgvector, Qdrant, embedders), which depends on this module and never the
//! other way round (`tests/architecture.rs` checks the import graph).
//!
//! The semantic candidate source, as a trait. Until a vector index is configured the default
//! implementation reports `semantic_unavailable` and retrieval runs on its lexical, subject,
//! conversation and always-on sources.
//!
//! Contract for implementations (pgvector, Qdrant): the request carries the
//! [`EligibilityContext`] and what retrieval already knows of the eligible set ([`EligibleRows`]:
//! its rows when it read them in this search). An SQL-backed index must search only eligible
//! rows: those rows, or the eligible rows of the policy's set form (SQL
//! `memory_eligible_revisions`) in the same statement as its similarity search. Whatever an
//! implementation returns, retrieval keeps a hit only if the eligible set admits it, re-checks
//! the canonical rules when it hydrates the text, and keeps at most the requested number of
//! distinct hits even if a provider ignores the limit.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use super::sign_bits::SignBits;
use crate::ids::RevisionId;
use crate::privacy::EligibilityContext;

/// One similarity hit: a revision and how similar it is (higher is closer). Ordered best first.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SemanticHit {
    /// The revision found.
    pub revision_id: RevisionId,
    /// Similarity, higher is closer (only its order is used by fusion).
    pub similarity: f32,
}

/// The spec's cap on semantic search: above this many eligible revisions it is skipped
/// (`semantic_oversized`) rather than scanning an unbounded set within the deadline. Retrieval
/// owns it (it decides when to ask an index at all); indexes honour it.
pub const MAX_ELIGIBLE_REVISIONS: usize = 10_000;

/// What a semantic search receives.
#[derive(Clone, Copy, Debug)]
pub struct SemanticRequest<'a> {
    /// The canonical database (for SQL-backed indexes such as pgvector).
    pub pool: &'a PgPool,
    /// Agent, destination conversation and audience: the eligibility predicate's input.
    pub eligibility: &'a EligibilityContext,
    /// The query text. Implementations must not log it or put it in an error.
    pub query: &'a str,
    /// At most this many hits are wanted.
    pub limit: usize,
    /// What retrieval already knows of the eligible set: its rows, or that it is larger than
    /// retrieval reads. It decides `Oversized` without another count; an index that ranks sign
    /// bits ([`SemanticIndex::ranks_sign_bits`]) shortlists from the rows without reading the set
    /// again.
    pub eligible: EligibleRows<'a>,
}

/// What retrieval knows of a destination's eligible set when it asks an index.
#[derive(Clone, Copy, Debug)]
pub enum EligibleRows<'a> {
    /// Retrieval read the whole set in this search (at most its eligible-set limit).
    Read(&'a [EligibleRevision]),
    /// Retrieval found more than this many eligible revisions and did not read them.
    MoreThan(usize),
    /// Not looked at (a caller other than retrieval); an index that needs the size counts it.
    Unknown,
}

/// An eligible current revision as the eligible-set statement of this search returned it, with
/// its quantized embedding in the active generation (`None`: not indexed yet, or not asked for).
/// Only rows the database admitted are ever built, so ranking them cannot widen eligibility.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EligibleRevision {
    /// The revision.
    pub revision_id: RevisionId,
    /// Its sign bits (`searchable_revisions.embedding_bits`).
    pub sign_bits: Option<SignBits>,
}

/// Why semantic search produced nothing; each maps to an audit degradation category.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum SemanticFailure {
    /// No vector index is configured or reachable.
    #[error("semantic index unavailable")]
    Unavailable,
    /// The active embedding generation is being rebuilt.
    #[error("semantic index rebuilding")]
    Rebuilding,
    /// The eligible set is larger than the index may scan.
    #[error("eligible set too large for semantic search")]
    Oversized,
    /// The provider failed (its error body is deliberately not carried).
    #[error("semantic provider failed")]
    Failed,
}

/// Boxed future returned by [`SemanticIndex::search`] (a boxed future keeps the trait
/// object-safe without an extra dependency).
pub type SemanticFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<SemanticHit>, SemanticFailure>> + Send + 'a>>;

/// A vector index that proposes semantic candidates.
pub trait SemanticIndex: Send + Sync {
    /// Hits for the query, best first, limited to eligible revisions where the index can tell.
    fn search<'a>(&'a self, request: SemanticRequest<'a>) -> SemanticFuture<'a>;

    /// Whether this index ranks the eligible set by its sign bits, so that retrieval reads them
    /// with the set ([`EligibleRevision::sign_bits`]). Indexes that search elsewhere leave them
    /// unread.
    fn ranks_sign_bits(&self) -> bool {
        false
    }

    /// Whether this index searches within the eligible set retrieval reads
    /// ([`EligibleRows::Read`]: a shortlist of its rows, a filter of its ids). When no index
    /// does, retrieval reads only the rows its other sources take from that set, never the set
    /// whole. The default is `true`, which is always correct; an index that does not search at
    /// all says `false`.
    fn searches_eligible_set(&self) -> bool {
        true
    }
}

/// The default: no vector index configured; every search reports `semantic_unavailable`.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnavailableSemanticIndex;

impl SemanticIndex for UnavailableSemanticIndex {
    fn search<'a>(&'a self, _request: SemanticRequest<'a>) -> SemanticFuture<'a> {
        Box::pin(async { Err(SemanticFailure::Unavailable) })
    }

    fn searches_eligible_set(&self) -> bool {
        false
    }
}
