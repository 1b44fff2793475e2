//! Mesh Memory: the durable memory of an AI agent runtime.
//!
//! Memory is an append-only record in PostgreSQL ([`store`]); what reaches a prompt is a small,
//! audience-safe, explainable selection of it. See `ARCHITECTURE.md` for the code map and the
//! invariants, and `../shared/spec/memory-retrieval.md` for the normative contract.

pub mod bench;
pub mod database;
pub mod demo;
pub mod erasure;
pub mod evaluation;
pub mod ids;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod operator;
pub mod pg;
pub mod privacy;
pub mod retrieval;
pub mod semantic;
pub mod service;
pub mod sqlstate;
pub mod store;
pub mod tools;
pub mod turn;
pub mod views;

pub use ids::*;

/// The PostgreSQL types the public API takes and returns (`Store::new`, `database::connect`,
/// `database::with_session_settings`), re-exported so that a user of this crate need not pin
/// `sqlx` to the same version to name them.
pub use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
/// The database error the public API's error types wrap.
pub use sqlx::Error as DatabaseError;
