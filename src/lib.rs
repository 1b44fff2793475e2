//! Mesh Memory: the durable memory of an AI agent runtime.
//!
//! Memory is an append-only record in PostgreSQL ([`store`]); what reaches a prompt is a small,
//! audience-safe, explainable selection of it. See `ARCHITECTURE.md` for the code map and the
//! invariants, and `../shared/spec/memory-retrieval.md` for the normative contract.

pub mod bench;
pub mod database;
pub mod demo;
pub mod evaluation;
pub mod ids;
pub mod pg;
pub mod privacy;
pub mod retrieval;
pub mod semantic;
pub mod store;
pub mod tools;
pub mod turn;

pub use ids::*;
