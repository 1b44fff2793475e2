//! An OpenAI-compatible chat-completions client (`POST {base}/chat/completions`), usable with
//! OpenAI, vLLM, llama.cpp's server, Ollama's OpenAI endpoint and similar.
//!
//! Errors are typed ([`ModelError`]) and never carry the provider's error body or the API key:
//! a provider body can echo prompt text, and errors end up in logs and in the turn record.

use std::fmt;
use std::time::Duration;

use serde_json::{json, Value};

use super::model::{ChatMessage, ChatModel, ChatRequest, ChatResponse, ModelError, ModelFuture, RetryPolicy};
use crate::tools::ToolCall;

/// Configuration of [`OpenAiCompatibleClient`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL including the version path, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Bearer token; `None` for local servers that need none.
    pub api_key: Option<String>,
    /// Model name.
    pub model: String,
    /// Per-attempt timeout of one request (connect + answer).
    pub timeout: Duration,
    /// Retries for transient failures.
    pub retry: RetryPolicy,
    /// The role name used for developer messages. `developer` for current OpenAI models; some
    /// compatible servers only know `system`.
    pub developer_role: String,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("developer_role", &self.developer_role)
            .finish()
    }
}

impl OpenAiConfig {
    /// A configuration with default timeout (60 s), retries and developer role.
    pub fn new(base_url: impl Into<String>, api_key: Option<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key,
            model: model.into(),
            timeout: Duration::from_secs(60),
            retry: RetryPolicy::default(),
            developer_role: "developer".to_owned(),
        }
    }

    /// Reads `MESH_MODEL_BASE_URL`, `MESH_MODEL_API_KEY` (optional) and `MESH_MODEL`, plus the
    /// optional `MESH_MODEL_TIMEOUT_SECS` and `MESH_MODEL_DEVELOPER_ROLE`.
    pub fn from_env() -> Result<Self, ModelError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let base_url = var("MESH_MODEL_BASE_URL").ok_or_else(|| ModelError::Config {
            reason: "set MESH_MODEL_BASE_URL (e.g. https://api.openai.com/v1)".to_owned(),
        })?;
        let model = var("MESH_MODEL")
            .ok_or_else(|| ModelError::Config { reason: "set MESH_MODEL (the model name)".to_owned() })?;
        let mut config = OpenAiConfig::new(base_url, var("MESH_MODEL_API_KEY"), model);
        if let Some(secs) = var("MESH_MODEL_TIMEOUT_SECS") {
            let secs: u64 = secs.parse().map_err(|_| ModelError::Config {
                reason: "MESH_MODEL_TIMEOUT_SECS must be a whole number of seconds".to_owned(),
            })?;
            config.timeout = Duration::from_secs(secs.max(1));
        }
        if let Some(role) = var("MESH_MODEL_DEVELOPER_ROLE") {
            config.developer_role = role;
        }
        Ok(config)
    }
}

/// The OpenAI-compatible client.
#[derive(Clone, Debug)]
pub struct OpenAiCompatibleClient {
    config: OpenAiConfig,
    endpoint: reqwest::Url,
    http: reqwest::Client,
}

impl OpenAiCompatibleClient {
    /// Builds a client; fails on an unusable base URL or model name.
    pub fn new(config: OpenAiConfig) -> Result<Self, ModelError> {
        if config.model.trim().is_empty() {
            return Err(ModelError::Config { reason: "the model name is empty".to_owned() });
        }
        let base = config.base_url.trim().trim_end_matches('/');
        let endpoint = reqwest::Url::parse(&format!("{base}/chat/completions")).map_err(|_| ModelError::Config {
            reason: "the base URL does not parse; use e.g. https://api.openai.com/v1".to_owned(),
        })?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(ModelError::Config { reason: "the base URL must be http or https".to_owned() });
        }
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .build()
            .map_err(|_| ModelError::Config { reason: "cannot build the HTTP client (TLS setup failed)".to_owned() })?;
        Ok(OpenAiCompatibleClient { config, endpoint, http })
    }

    /// The request body in the chat-completions wire format.
    pub fn wire_body(&self, request: &ChatRequest) -> Value {
        let messages: Vec<Value> = request.messages.iter().map(|m| self.wire_message(m)).collect();
        let mut body = json!({"model": self.config.model, "messages": messages});
        if let Some(tools) = &request.tools {
            body["tools"] = Value::Array(tools.clone());
            body["tool_choice"] = json!("auto");
        }
        body
    }

    fn wire_message(&self, message: &ChatMessage) -> Value {
        match message {
            ChatMessage::System { content } => json!({"role": "system", "content": content}),
            ChatMessage::Developer { content } => json!({"role": self.config.developer_role, "content": content}),
            ChatMessage::User { content } => json!({"role": "user", "content": content}),
            ChatMessage::Assistant { content, tool_calls } => {
                let mut m = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    m["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                m
            }
            ChatMessage::Tool { tool_call_id, content } => {
                json!({"role": "tool", "tool_call_id": tool_call_id, "content": content})
            }
        }
    }

    async fn attempt(&self, body: &Value) -> Result<Value, Attempt> {
        let mut request = self.http.post(self.endpoint.clone()).json(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(classify)?;
        let status = response.status();
        if status.is_success() {
            return response.json::<Value>().await.map_err(|e| {
                if e.is_timeout() {
                    Attempt::Timeout
                } else {
                    Attempt::Fatal(ModelError::Malformed { reason: "the answer body is not JSON".to_owned() })
                }
            });
        }
        let code = status.as_u16();
        if code == 401 || code == 403 {
            return Err(Attempt::Fatal(ModelError::Unauthorized { status: code }));
        }
        if code == 429 || status.is_server_error() {
            return Err(Attempt::Retryable(code));
        }
        Err(Attempt::Fatal(ModelError::Status { status: code, attempts: 1 }))
    }

    async fn complete_with_retries(&self, request: &ChatRequest) -> Result<ChatResponse, ModelError> {
        let body = self.wire_body(request);
        let attempts_allowed = self.config.retry.max_retries + 1;
        let mut last = Attempt::Unreachable;
        for attempt in 1..=attempts_allowed {
            if attempt > 1 {
                tokio::time::sleep(self.config.retry.backoff(attempt - 1)).await;
            }
            match self.attempt(&body).await {
                Ok(value) => return parse_completion(&value),
                Err(Attempt::Fatal(ModelError::Status { status, .. })) => {
                    return Err(ModelError::Status { status, attempts: attempt })
                }
                Err(Attempt::Fatal(error)) => return Err(error),
                Err(transient) => {
                    tracing::warn!(attempt, "transient model failure: {}", transient.category());
                    last = transient;
                }
            }
        }
        Err(match last {
            Attempt::Timeout => {
                ModelError::Timeout { timeout_ms: self.config.timeout.as_millis() as u64, attempts: attempts_allowed }
            }
            Attempt::Retryable(status) => ModelError::Status { status, attempts: attempts_allowed },
            Attempt::Unreachable | Attempt::Fatal(_) => ModelError::Unreachable { attempts: attempts_allowed },
        })
    }
}

/// The result of one failed attempt.
enum Attempt {
    Timeout,
    Unreachable,
    Retryable(u16),
    Fatal(ModelError),
}

impl Attempt {
    fn category(&self) -> String {
        match self {
            Attempt::Timeout => "timeout".to_owned(),
            Attempt::Unreachable => "unreachable".to_owned(),
            Attempt::Retryable(status) => format!("HTTP {status}"),
            Attempt::Fatal(e) => e.to_string(),
        }
    }
}

/// Classifies a transport error without keeping its text (it may name the URL).
fn classify(error: reqwest::Error) -> Attempt {
    if error.is_timeout() {
        Attempt::Timeout
    } else if error.is_builder() {
        Attempt::Fatal(ModelError::Config { reason: "the request could not be built".to_owned() })
    } else {
        Attempt::Unreachable
    }
}

/// Reads `choices[0].message` of a chat completion.
pub fn parse_completion(value: &Value) -> Result<ChatResponse, ModelError> {
    let malformed = |reason: &str| ModelError::Malformed { reason: reason.to_owned() };
    let message = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .and_then(|c| c.get("message"))
        .ok_or_else(|| malformed("no choices[0].message"))?;
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(malformed("message.content is not a string")),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|v| !v.is_null()) {
        let calls = calls.as_array().ok_or_else(|| malformed("message.tool_calls is not an array"))?;
        for call in calls {
            let id = call.get("id").and_then(Value::as_str).ok_or_else(|| malformed("a tool call has no id"))?;
            let function = call.get("function").ok_or_else(|| malformed("a tool call has no function"))?;
            let name =
                function.get("name").and_then(Value::as_str).ok_or_else(|| malformed("a tool call has no name"))?;
            let arguments = match function.get("arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Object(_)) => function["arguments"].to_string(),
                None | Some(Value::Null) => "{}".to_owned(),
                Some(_) => return Err(malformed("tool call arguments are neither text nor an object")),
            };
            tool_calls.push(ToolCall { id: id.to_owned(), name: name.to_owned(), arguments });
        }
    }
    Ok(ChatResponse { content, tool_calls })
}

impl ChatModel for OpenAiCompatibleClient {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> ModelFuture<'a> {
        Box::pin(self.complete_with_retries(request))
    }
}
