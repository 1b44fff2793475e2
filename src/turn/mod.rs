//! The truthful turn engine: bounded tool rounds, the committed ledger, the claim guard, the
//! delivery recheck and the model clients.
//!
//! One turn answers one connector-authenticated inbound message. Its shape is structural, not
//! advisory: at most three model requests, the last without tools; a bounded number of calls
//! per round, all validated before any executes; every durable write recorded from the store's
//! return value into a [`Ledger`] that the model sees as a developer message before it replies;
//! a [`guard`] that fails a reply claiming a mutation that did not commit; and a recheck of the
//! audience and the used revisions just before delivery.

pub mod guard;
pub mod ledger;
pub mod model;
pub mod openai;
pub mod scripted;

pub use guard::{unbacked_claims, ClaimKind, UnbackedClaim};
pub use ledger::{CommittedSharingRequest, Ledger, RecordedLedger, RecordedWrite};
pub use model::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelError, ModelFuture, RetryPolicy};
pub use openai::{OpenAiCompatibleClient, OpenAiConfig};
pub use scripted::ScriptedModel;

pub mod context;
pub mod engine;
pub mod record;

pub use context::{receive, TurnContext};
pub use engine::{
    HostedCall, HostedSession, PreparedTurn, ToolCallLog, TurnConfig, TurnEngine, TurnOutcome, TurnReport,
    DEFAULT_MAX_CALLS_PER_ROUND, DEFAULT_SYSTEM_PROMPT, MAX_ROUNDS,
};
pub use record::{get_turn, list_turns, TurnRecord, TurnSummary};

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ids::MessageId;

/// One persisted turn (`agent_turns.id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct TurnId(pub Uuid);

impl TurnId {
    /// A fresh, time-ordered id.
    pub fn generate() -> Self {
        TurnId(Uuid::now_v7())
    }
}

impl std::fmt::Display for TurnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for TurnId {
    type Err = crate::ids::MalformedId;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Uuid::parse_str(text.trim())
            .map(TurnId)
            .map_err(|_| crate::ids::MalformedId { kind: "turn", text: text.chars().take(80).collect() })
    }
}

/// Why a turn could not run or be recorded. Model failures and guard failures are not errors:
/// they are persisted outcomes ([`TurnOutcome`]).
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// Only a connector-authenticated inbound message starts a turn.
    #[error("message {0} is not a connector-authenticated inbound message; only those start a turn")]
    NotAuthenticatedInbound(MessageId),
    /// The sender's connector identity is unknown.
    #[error("no {connector} identity {external_id:?}; add the connector identity before receiving its messages")]
    UnknownIdentity {
        /// Connector.
        connector: String,
        /// External id.
        external_id: String,
    },
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
    /// Retrieval failed.
    #[error(transparent)]
    Retrieval(#[from] crate::retrieval::RetrievalError),
    /// An eligibility check failed.
    #[error(transparent)]
    Privacy(#[from] crate::privacy::PrivacyError),
    /// PostgreSQL failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored turn could not be (de)serialized.
    #[error("turn record encoding: {0}")]
    Encoding(#[from] serde_json::Error),
}
