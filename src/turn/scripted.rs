//! A scripted model for tests and the demo: each request consumes the next step, and every
//! request is kept so that tests can assert what the engine sent (e.g. no tools on the last
//! round, the ledger message before the reply).

use std::collections::VecDeque;
use std::sync::Mutex;

use serde_json::Value;

use super::model::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelError, ModelFuture};
use crate::tools::ToolCall;

/// One step: computes the answer from the request (so a script can use ids returned by an
/// earlier tool call).
pub type ScriptStep = Box<dyn Fn(&ChatRequest) -> ChatResponse + Send + Sync>;

/// A model that answers from a fixed script.
#[derive(Default)]
pub struct ScriptedModel {
    steps: Mutex<VecDeque<ScriptStep>>,
    requests: Mutex<Vec<ChatRequest>>,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel").field("steps_left", &self.steps_left()).finish()
    }
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a step computed from the request.
    pub fn step(self, step: impl Fn(&ChatRequest) -> ChatResponse + Send + Sync + 'static) -> Self {
        self.steps.lock().expect("script lock").push_back(Box::new(step));
        self
    }

    /// Appends a plain text reply.
    pub fn reply(self, text: &str) -> Self {
        let text = text.to_owned();
        self.step(move |_| ChatResponse::text(text.clone()))
    }

    /// Appends a round of tool calls `(name, arguments)`; call ids are `call-N`.
    pub fn calls(self, calls: Vec<(&str, Value)>) -> Self {
        let calls: Vec<(String, String)> = calls.into_iter().map(|(n, a)| (n.to_owned(), a.to_string())).collect();
        self.raw_calls(calls)
    }

    /// Appends a round of tool calls whose argument text is given verbatim (for malformed input).
    pub fn raw_calls(self, calls: Vec<(String, String)>) -> Self {
        self.step(move |_| ChatResponse {
            content: None,
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("call-{}", i + 1),
                    name: name.clone(),
                    arguments: arguments.clone(),
                })
                .collect(),
        })
    }

    /// Steps not yet consumed.
    pub fn steps_left(&self) -> usize {
        self.steps.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().expect("requests lock").clone()
    }
}

/// The JSON results of the tool messages in a request, newest last (for script steps that act
/// on an earlier result, e.g. amend the entry a recall returned).
pub fn tool_results(request: &ChatRequest) -> Vec<Value> {
    request
        .messages
        .iter()
        .filter_map(|m| match m {
            ChatMessage::Tool { content, .. } => serde_json::from_str(content).ok(),
            _ => None,
        })
        .collect()
}

impl ChatModel for ScriptedModel {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a> {
        Box::pin(async move {
            let number = {
                let mut requests = self.requests.lock().expect("requests lock");
                requests.push(request.clone());
                requests.len()
            };
            let step = self.steps.lock().expect("script lock").pop_front();
            match step {
                Some(step) => Ok(step(request)),
                None => Err(ModelError::ScriptExhausted { request: number }),
            }
        })
    }
}
