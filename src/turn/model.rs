//! The model-client boundary: a provider-neutral chat request/response and the [`ChatModel`]
//! trait that the OpenAI-compatible client and the scripted model implement.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::ToolCall;

/// One message of a chat request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Standing instructions and the assembled memory section.
    System {
        /// Text.
        content: String,
    },
    /// Runtime-authored instructions of higher authority than the user (the committed ledger).
    Developer {
        /// Text.
        content: String,
    },
    /// A participant's message (prefixed with the speaker's rendered label).
    User {
        /// Text.
        content: String,
    },
    /// The model's own earlier output.
    Assistant {
        /// Text, if any.
        content: Option<String>,
        /// Tool calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The call this answers.
        tool_call_id: String,
        /// JSON result text.
        content: String,
    },
}

/// A chat-completions request. `tools` is `None` on the last permitted round: the model is not
/// asked to stop calling tools, it is unable to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Tool definitions (OpenAI function format), or `None` when no tool may be called.
    pub tools: Option<Vec<Value>>,
}

/// What the model answered.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// Reply text, if any.
    pub content: Option<String>,
    /// Tool calls, if any.
    pub tool_calls: Vec<ToolCall>,
}

impl ChatResponse {
    /// A plain text reply.
    pub fn text(content: impl Into<String>) -> Self {
        ChatResponse { content: Some(content.into()), tool_calls: Vec::new() }
    }
}

/// Why a model call failed. Messages never contain the provider's error body, the API key or
/// any prompt text, so they are safe to log and to persist as a turn's failure reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ModelError {
    /// The client is misconfigured (bad base URL, missing model name...).
    #[error("model client misconfigured: {reason}")]
    Config {
        /// What to fix.
        reason: String,
    },
    /// No answer within the timeout, after every retry.
    #[error("the model did not answer within {timeout_ms} ms ({attempts} attempts); check the endpoint or raise the timeout")]
    Timeout {
        /// Per-attempt timeout.
        timeout_ms: u64,
        /// Attempts made.
        attempts: u32,
    },
    /// The endpoint could not be reached, after every retry.
    #[error("cannot reach the model endpoint ({attempts} attempts); check MESH_MODEL_BASE_URL and the network")]
    Unreachable {
        /// Attempts made.
        attempts: u32,
    },
    /// The provider refused the credentials.
    #[error("the model provider rejected the credentials (HTTP {status}); check MESH_MODEL_API_KEY")]
    Unauthorized {
        /// HTTP status.
        status: u16,
    },
    /// The provider answered with an error status (body deliberately not kept).
    #[error("the model provider answered HTTP {status} ({attempts} attempts)")]
    Status {
        /// HTTP status.
        status: u16,
        /// Attempts made.
        attempts: u32,
    },
    /// The answer was not a chat completion this client understands.
    #[error("the model answer was malformed: {reason}")]
    Malformed {
        /// What was missing or wrong (never the body itself).
        reason: String,
    },
    /// A scripted model ran out of steps (a test or demo script is too short).
    #[error("the scripted model has no step left for request {request}")]
    ScriptExhausted {
        /// 1-based request number.
        request: usize,
    },
}

/// The future a [`ChatModel`] returns (boxed so that the trait stays object-safe).
pub type ModelFuture<'a> = Pin<Box<dyn Future<Output = Result<ChatResponse, ModelError>> + Send + 'a>>;

/// A chat model. Object-safe so that the turn engine, the CLI and the console can hold any
/// provider as `&dyn ChatModel`.
pub trait ChatModel: Send + Sync {
    /// Sends one request and returns the answer.
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a>;
}

/// Retry policy for transient provider failures (timeouts, connection errors, 429 and 5xx).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts at most).
    pub max_retries: u32,
    /// Delay before the first retry; doubled for each further one.
    pub initial_backoff: Duration,
    /// Upper bound of one delay.
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy { max_retries: 2, initial_backoff: Duration::from_millis(500), max_backoff: Duration::from_secs(8) }
    }
}

impl RetryPolicy {
    /// The delay before retry number `retry` (1-based).
    pub fn backoff(&self, retry: u32) -> Duration {
        let factor = 2u32.saturating_pow(retry.saturating_sub(1));
        self.initial_backoff.saturating_mul(factor).min(self.max_backoff)
    }
}
