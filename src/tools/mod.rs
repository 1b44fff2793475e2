//! The agent-facing memory tools: their JSON schemas (OpenAI function-calling format) and the
//! validation of the arguments a model sends.
//!
//! Validation is pure and runs for every call of a round before any call executes (see
//! [`crate::turn`]), so a malformed call can never leave a committed write behind from a round
//! the runtime rejects. The schemas are deliberately narrow: `remember` has no entry id, no
//! revision and no supersede flag, so no request through it can ask to modify an existing entry;
//! and no tool takes a source actor, a conversation or an audience of the speaker — those come
//! from the turn's connector-authenticated inbound message.

mod schema;
mod status;
mod validate;

pub use schema::{tool_definitions, tool_names};
pub use status::ToolStatus;
pub use validate::{
    validate_call, AmendArgs, ForgetArgs, RecallArgs, RememberArgs, SharingArgs, SubjectArg, ToolCall, ToolError,
    ToolInvocation, DEFAULT_RECALL_LIMIT, MAX_QUERY_CHARS, MAX_RATIONALE_CHARS, MAX_RECALL_LIMIT,
};
