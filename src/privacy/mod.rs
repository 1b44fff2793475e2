//! The privacy policy: who may receive which memory revision.
//!
//! The policy lives in SQL only, never in a Rust post-filter, in two forms built on one statement
//! of grant coverage and one of the rule order (migration `20261207100000_one_privacy_policy.sql`;
//! [`eligibility`] says which caller uses which; `docs/policy.md` states the rules in words, each
//! with the function that implements it and the test that pins it).
//!
//! `tests/eligibility.rs` recomputes the policy independently in Rust from raw rows and compares
//! both forms, the withheld diagnostics and every search result with it over generated
//! workspaces, so the forms cannot drift.

pub mod eligibility;
pub mod repair;
pub mod sharing;

pub use eligibility::{
    explain_entry, recheck_delivery, revision_verdicts, AudienceChange, DeliveryRecheck, EligibilityContext,
    EntryExplanation, FailingSource, PrivacyError, Rule, RuleName, StaleRevision, Verdict,
};
