//! The privacy policy: who may receive which memory revision.
//!
//! The eligibility predicate lives in SQL only, never in a Rust post-filter:
//! - `memory_eligibility_verdict` (migration `20261202001000_retrieval_eligibility.sql`) gives the
//!   first failing rule and names the failing source; the explain API and the delivery recheck
//!   ([`eligibility`]) use it;
//! - the boolean form, SQL function `memory_revision_eligible`, is written inline into every
//!   candidate query's `WHERE` clause ([`ELIGIBLE_SQL`], so the planner makes semi-joins of it);
//!   since `20261202006000_eligibility_audience_summary.sql` it answers the same rules from the
//!   trigger-maintained `revision_audience_summary` for speed.
//!
//! `tests/eligibility.rs` recomputes the predicate independently in Rust from raw rows and checks
//! every search result and every explain verdict against it, so the two SQL forms cannot drift.

pub mod eligibility;
pub mod repair;
pub mod sharing;

pub use eligibility::{
    explain_entry, recheck_delivery, revision_verdicts, AudienceChange, DeliveryRecheck, EligibilityContext,
    EntryExplanation, FailingSource, PrivacyError, Rule, StaleRevision, Verdict, ELIGIBLE_SQL,
};
