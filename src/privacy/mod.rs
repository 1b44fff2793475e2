//! The privacy policy: who may receive which memory revision.
//!
//! The eligibility predicate has exactly one definition, the SQL function
//! `memory_eligibility_verdict` (migration `20261202001000_retrieval_eligibility.sql`). Every
//! retrieval candidate query embeds it in its `WHERE` clause, and [`eligibility`] wraps the same
//! function for the explain API and for the delivery recheck, so the three can never disagree.

pub mod eligibility;
pub mod repair;
pub mod sharing;

pub use eligibility::{
    explain_entry, recheck_delivery, revision_verdicts, AudienceChange, DeliveryRecheck, EligibilityContext,
    EntryExplanation, FailingSource, PrivacyError, Rule, StaleRevision, Verdict, ELIGIBLE_SQL,
};
