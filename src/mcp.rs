//! The Model Context Protocol server (feature `mcp`, on the official Rust SDK `rmcp`): memory for
//! agent hosts that are not written in Rust, as one more thin shell over the core, like the CLI
//! and the console.
//!
//! Who is speaking is never a tool argument. A server is bound at launch to one runtime agent,
//! one conversation and one actor's connector identity ([`McpBinding`]); each tool call is
//! recorded as that actor's authenticated inbound message in that conversation, and then runs
//! through the turn engine's own path ([`TurnEngine::run_hosted_call`]): the same tool schemas
//! (`crate::tools`), validation, typed errors, store calls and retrieval service. So evidence and
//! lineage follow the existing rules (a memory made in a direct conversation stays private to its
//! members), the audience is the bound conversation's, and every search is audited. What a call
//! committed comes from the store's return values, as in a turn's ledger.
//!
//! Tools: `remember`, `recall`, `amend`, `forget`, `request_memory_sharing`. Prompt:
//! `memory_context` (argument `message`), the section the turn engine injects for that message.
//! Transports: stdio ([`serve_stdio`]), bound by an access token an operator issued
//! (`mesh-memory mcp token create`, given in `MESH_MCP_TOKEN`) and checked again on every call,
//! or by launch arguments an operator vouched for ([`StdioBinding`]); streamable HTTP on a
//! loopback address ([`serve_http`]), where every request carries such a token as its bearer
//! token ([`crate::store::TokenBinding`]). A missing, unknown, revoked or expired token gets 401
//! (HTTP) or an error (stdio) before anything is read or written.
//!
//! No lock is held across calls of different bindings: each binding's lineage session has its
//! own lock (`Sessions`), so one token's slow call never delays another token's.
//!
//! Every malformed message gets an answer (`src/mcp/framing.rs`): at most [`MAX_MESSAGE_BYTES`], checked
//! before rmcp sees it, refused with a JSON-RPC error and nothing written. Every text a host sends
//! for storing is capped by one limit, [`MAX_BODY_CHARS`] (tool arguments by `crate::tools`, the
//! prompt's message by [`TextRefused`]).

mod framing;

pub use framing::{FrameError, MAX_MESSAGE_BYTES};

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use uuid::Uuid;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode, ErrorData,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, Role, ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::ids::{AgentId, ConversationId};
use crate::store::{Store, TokenBinding, MAX_BODY_CHARS};
use crate::tools::{tool_definitions, validate_call, ToolCall};
use crate::turn::{receive, ChatModel, ChatRequest, HostedSession, ModelError, ModelFuture, TurnEngine, TurnError};

/// The prompt that renders memory context for a message.
pub const CONTEXT_PROMPT: &str = "memory_context";

/// Who an MCP server speaks for: fixed at launch by whoever starts it (an operator's host
/// configuration) or by the access token of an HTTP request, never by a tool argument.
#[derive(Clone, Debug)]
pub struct McpBinding {
    /// The runtime agent whose memory is used.
    pub agent: AgentId,
    /// The conversation every call is made in (its audience decides what may be recalled).
    pub conversation: ConversationId,
    /// The connector of that conversation (`slack`, ...).
    pub connector: String,
    /// The bound actor's id on that connector (their authenticated identity).
    pub external_id: String,
}

impl From<TokenBinding> for McpBinding {
    fn from(token: TokenBinding) -> Self {
        McpBinding {
            agent: token.agent,
            conversation: token.conversation,
            connector: token.connector,
            external_id: token.external_id,
        }
    }
}

/// Where a stdio server's binding comes from.
#[derive(Clone)]
pub enum StdioBinding {
    /// Launch arguments an operator vouched for (`mcp --agent --conversation --as --operator`).
    Vouched(McpBinding),
    /// An access token (`MESH_MCP_TOKEN`), authenticated again before every call, so that its
    /// revocation or expiry ends the session's calls at once.
    Token(String),
}

impl std::fmt::Debug for StdioBinding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StdioBinding::Vouched(binding) => f.debug_tuple("Vouched").field(binding).finish(),
            StdioBinding::Token(_) => f.write_str("Token(<secret>)"),
        }
    }
}

/// Where a server's binding comes from.
#[derive(Clone)]
enum Bound {
    /// Launch arguments (stdio).
    Fixed(McpBinding),
    /// One access token for the whole process (stdio), looked up again on every call.
    Token(Arc<str>),
    /// Each HTTP request's token, checked before the request reached the server.
    PerToken,
}

/// The lineage session of each binding (what it recalled stays lineage of what it later writes),
/// each behind its own lock: a call holds only its own session's lock while it runs, so one
/// token's slow call never delays another token's. The map itself is locked only to find or add
/// an entry, never across a call.
#[derive(Clone, Default)]
struct Sessions(Arc<std::sync::Mutex<HashMap<Uuid, Arc<Mutex<HostedSession>>>>>);

impl Sessions {
    /// The session of `key` (created empty on first use), to be locked by the caller.
    fn of(&self, key: Uuid) -> Arc<Mutex<HostedSession>> {
        let mut sessions = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(sessions.entry(key).or_default())
    }
}

/// The MCP server: a binding, one turn engine, and the lineage of each binding's session.
#[derive(Clone)]
pub struct MemoryServer {
    engine: TurnEngine,
    bound: Bound,
    sessions: Sessions,
}

impl MemoryServer {
    /// A server for `binding` over `engine` (built with the one retriever constructor).
    pub fn new(engine: TurnEngine, binding: StdioBinding) -> Self {
        let bound = match binding {
            StdioBinding::Vouched(binding) => Bound::Fixed(binding),
            StdioBinding::Token(secret) => Bound::Token(secret.into()),
        };
        MemoryServer { engine, bound, sessions: Sessions::default() }
    }

    /// A server whose every request is bound by its access token ([`serve_http`]).
    fn per_token(engine: TurnEngine) -> Self {
        MemoryServer { engine, bound: Bound::PerToken, sessions: Sessions::default() }
    }

    /// The binding of this request and the key of its lineage session.
    async fn binding(&self, context: &RequestContext<RoleServer>) -> Result<(Uuid, McpBinding), ErrorData> {
        match &self.bound {
            Bound::Fixed(binding) => Ok((Uuid::nil(), binding.clone())),
            Bound::Token(secret) => match self.engine.store().authenticate_access_token(secret).await {
                Ok(Some(token)) => Ok((token.token_id, McpBinding::from(token))),
                Ok(None) => Err(ErrorData::invalid_request(
                    "this server's access token (MESH_MCP_TOKEN) is unknown, revoked or expired; nothing was read \
                     or written",
                    None,
                )),
                Err(_) => Err(ErrorData::new(ErrorCode::INTERNAL_ERROR, "the memory store is unavailable", None)),
            },
            Bound::PerToken => context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<TokenBinding>())
                .map(|token| (token.token_id, McpBinding::from(token.clone())))
                .ok_or_else(|| ErrorData::invalid_request("this request carries no valid access token", None)),
        }
    }

    /// Records `text` as the bound actor's authenticated message in the bound conversation.
    async fn said(&self, b: &McpBinding, text: &str) -> Result<crate::MessageId, ErrorData> {
        receive(self.engine.store(), b.agent, b.conversation, &b.connector, &b.external_id, text)
            .await
            .map_err(|e| internal(&e))
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let (key, binding) = self.binding(context).await?;
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let call = ToolCall { id: "mcp".into(), name: request.name.to_string(), arguments };
        // A call that fails validation writes nothing at all, not even its message.
        if let Err(error) = validate_call(&call) {
            return Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]));
        }
        let inbound = self.said(&binding, &format!("[{} via MCP] {}", call.name, call.arguments)).await?;
        let session = self.sessions.of(key);
        let mut session = session.lock().await;
        let outcome = self.engine.run_hosted_call(inbound, &call, &mut session).await.map_err(|e| internal(&e))?;
        let text = outcome.result.to_string();
        Ok(if outcome.status.is_error() {
            CallToolResult::error(vec![ContentBlock::text(text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(text)])
        })
    }

    async fn context(
        &self,
        request: GetPromptRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<GetPromptResult, ErrorData> {
        let (key, binding) = self.binding(context).await?;
        if request.name != CONTEXT_PROMPT {
            return Err(ErrorData::invalid_params(
                format!("no prompt {:?}; the prompt is {CONTEXT_PROMPT}", request.name),
                None,
            ));
        }
        let message = request.arguments.as_ref().and_then(|a| a.get("message")).and_then(Value::as_str);
        let Some(message) = message.filter(|m| !m.trim().is_empty()) else {
            return Err(ErrorData::invalid_params("memory_context requires the argument \"message\"", None));
        };
        storable("memory_context.message", message)?;
        let inbound = self.said(&binding, message).await?;
        let session = self.sessions.of(key);
        let mut session = session.lock().await;
        let outcome = self.engine.hosted_context(inbound, &mut session).await.map_err(|e| internal(&e))?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, outcome.prompt_section())])
            .with_description(format!("memory context (retrieval event {})", outcome.event_id)))
    }
}

/// Why a text a host sent is not stored: the one cap every stored text has, the memory body's
/// ([`MAX_BODY_CHARS`]), so a prompt's message cannot be stored whole at any size while a
/// remembered body is refused past 4,000 characters.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextRefused {
    /// Longer than [`MAX_BODY_CHARS`].
    #[error("{field} is {chars} characters; the limit is {MAX_BODY_CHARS} (MAX_BODY_CHARS, as for a memory body)")]
    TooLong {
        /// The argument.
        field: &'static str,
        /// Its length in characters.
        chars: usize,
    },
    /// Holds a NUL character, which PostgreSQL text cannot store.
    #[error("{field} must not contain NUL characters")]
    Nul {
        /// The argument.
        field: &'static str,
    },
}

impl From<TextRefused> for ErrorData {
    fn from(refused: TextRefused) -> Self {
        ErrorData::invalid_params(refused.to_string(), Some(serde_json::json!({"limit_chars": MAX_BODY_CHARS})))
    }
}

/// Checks a text a host sent before it is stored.
fn storable(field: &'static str, text: &str) -> Result<(), TextRefused> {
    let chars = text.chars().count();
    if chars > MAX_BODY_CHARS {
        return Err(TextRefused::TooLong { field, chars });
    }
    if text.contains('\0') {
        return Err(TextRefused::Nul { field });
    }
    Ok(())
}

/// A failure the caller cannot fix (the database is down...): a protocol error whose message
/// names the kind of failure only.
fn internal(error: &TurnError) -> ErrorData {
    let message = match error {
        TurnError::UnknownIdentity { .. } => "the bound identity is not a connector identity of this store".to_owned(),
        _ => "the memory store failed; nothing was written".to_owned(),
    };
    ErrorData::new(ErrorCode::INTERNAL_ERROR, message, None)
}

/// The tools in MCP's form: the turn engine's definitions, unchanged.
pub fn tools() -> Vec<Tool> {
    tool_definitions()
        .into_iter()
        .filter_map(|definition| {
            let function = definition.get("function")?;
            let name = function.get("name")?.as_str()?.to_owned();
            let description = function.get("description").and_then(Value::as_str).unwrap_or_default().to_owned();
            let schema: Map<String, Value> = function.get("parameters")?.as_object()?.clone();
            Some(Tool::new(name, description, Arc::new(schema)))
        })
        .collect()
}

impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(ServerCapabilities::builder().enable_tools().enable_prompts().build())
            .with_server_info(Implementation::new("mesh-memory", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Durable, audience-safe memory. Each tool result says exactly what committed (entry, revision, \
                 number) or that nothing changed. The speaker and conversation are fixed by this server's binding.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult { tools: tools(), ..Default::default() })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(request, &context).await?.into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let argument = PromptArgument::new("message")
            .with_description("The user's message the context is assembled for.")
            .with_required(true);
        let prompt = Prompt::new(
            CONTEXT_PROMPT,
            Some("The memories relevant to a message, as the turn engine injects them (audited)."),
            Some(vec![argument]),
        );
        Ok(ListPromptsResult { prompts: vec![prompt], ..Default::default() })
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(self.context(request, &context).await?.into())
    }
}

/// The host runs its own model: the engine behind an MCP server is never asked to complete.
#[derive(Debug)]
struct HostRunsTheModel;

impl ChatModel for HostRunsTheModel {
    fn complete<'a>(&'a self, _request: &'a ChatRequest) -> ModelFuture<'a> {
        Box::pin(async {
            Err(ModelError::Config { reason: "an MCP server does not run a model; the host does".into() })
        })
    }
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The transport failed to start or broke.
    #[error("MCP transport: {0}")]
    Transport(String),
    /// The stdio server's access token is unknown, revoked or expired.
    #[error("MESH_MCP_TOKEN is not a valid access token (unknown, revoked or expired); ask an operator for one")]
    TokenRefused,
    /// The store could not be asked.
    #[error("the memory store is unavailable: {0}")]
    Store(#[from] crate::store::StoreError),
    /// `--http` named an address other machines could reach.
    #[error("--http {0}: the HTTP transport listens on loopback addresses only (127.0.0.1 or [::1])")]
    NotLoopback(SocketAddr),
}

/// Serves `binding` over stdin/stdout until the client disconnects; a malformed line is answered
/// and the next one read (`framing::Lines`). A token binding is checked before serving
/// (`TokenRefused`) and again on every call.
pub async fn serve_stdio(
    retriever: crate::retrieval::Retriever,
    store: Store,
    binding: StdioBinding,
) -> Result<(), McpError> {
    if let StdioBinding::Token(secret) = &binding {
        store.authenticate_access_token(secret).await?.ok_or(McpError::TokenRefused)?;
    }
    let engine = TurnEngine::new(store, retriever, Arc::new(HostRunsTheModel));
    let service = MemoryServer::new(engine, binding)
        .serve(framing::Lines::new(tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    service.waiting().await.map_err(|e| McpError::Transport(e.to_string()))?;
    Ok(())
}

/// A whole HTTP response, as rmcp's service answers.
type HttpResponse = http::Response<BoxBody<Bytes, Infallible>>;

/// A short plain-text response (no request detail in it).
fn plain(status: http::StatusCode, text: &'static str) -> HttpResponse {
    let mut response = http::Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    if status == http::StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(http::header::WWW_AUTHENTICATE, http::HeaderValue::from_static("Bearer"));
    }
    response
}

/// A refused message's JSON-RPC error as the HTTP answer: 413 when too large, else 400.
fn refused(refused: &framing::Refused) -> HttpResponse {
    let status = match refused.error {
        FrameError::TooLarge => http::StatusCode::PAYLOAD_TOO_LARGE,
        _ => http::StatusCode::BAD_REQUEST,
    };
    let mut response = http::Response::new(Full::new(Bytes::from(refused.response())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    response
}

/// How much of a too-large body is read and discarded before the 413, so that a client still
/// sending it reads the answer rather than a reset connection.
const MAX_DISCARDED_BYTES: usize = 16 * MAX_MESSAGE_BYTES;

/// Reads a POST body (at most [`MAX_MESSAGE_BYTES`]) and checks it as stdio checks a line, so a
/// malformed one is answered with a JSON-RPC error, never 415 or 202 as rmcp would.
async fn checked(request: http::Request<hyper::body::Incoming>) -> Result<http::Request<Full<Bytes>>, HttpResponse> {
    let (parts, mut body) = request.into_parts();
    if parts.method != http::Method::POST {
        return Ok(http::Request::from_parts(parts, Full::default()));
    }
    let (mut kept, mut length) = (Vec::new(), 0usize);
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return Err(plain(http::StatusCode::BAD_REQUEST, "the request body could not be read\n"));
        };
        let Ok(data) = frame.into_data() else { continue };
        length = length.saturating_add(data.len());
        if length <= MAX_MESSAGE_BYTES {
            kept.extend_from_slice(&data);
        } else if length > MAX_DISCARDED_BYTES {
            break;
        }
    }
    if length > MAX_MESSAGE_BYTES {
        return Err(refused(&framing::Refused { id: None, error: FrameError::TooLarge }));
    }
    if let Err(refusal) = framing::parse(&kept) {
        return Err(refused(&refusal));
    }
    let body = Bytes::from(kept);
    let skipped = body.len() - framing::without_bom(&body).len();
    Ok(http::Request::from_parts(parts, Full::new(body.slice(skipped..))))
}

/// The token of an `Authorization: Bearer <token>` header; the scheme name is case-insensitive
/// (RFC 9110 §11.1).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(|c: char| c.is_ascii_whitespace())?;
    Some(token.trim()).filter(|token| scheme.eq_ignore_ascii_case("bearer") && !token.is_empty())
}

/// Checks the request's bearer token, then its body, then hands it to the MCP service with its
/// binding attached; a missing, unknown or revoked token is answered 401 here, before the MCP
/// layer runs, and a malformed body 400 (413 when too large) with a JSON-RPC error.
async fn authorized(
    store: Store,
    mcp: StreamableHttpService<MemoryServer, LocalSessionManager>,
    request: http::Request<hyper::body::Incoming>,
) -> HttpResponse {
    let secret = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .map(str::to_owned);
    let binding = match secret {
        None => None,
        Some(secret) => match store.authenticate_access_token(&secret).await {
            Ok(binding) => binding,
            Err(_) => return plain(http::StatusCode::SERVICE_UNAVAILABLE, "the memory store is unavailable\n"),
        },
    };
    let Some(binding) = binding else {
        return plain(
            http::StatusCode::UNAUTHORIZED,
            "a valid bearer token is required (an operator issues one with `mesh-memory mcp token create`)\n",
        );
    };
    let mut request = match checked(request).await {
        Ok(request) => request,
        Err(response) => return response,
    };
    request.extensions_mut().insert(binding);
    mcp.handle(request).await
}

/// Serves streamable HTTP on `addr` (loopback only) until the process ends; each request is bound
/// by its bearer token. `listening` is told the bound address (port 0 picks a free one).
pub async fn serve_http(
    retriever: crate::retrieval::Retriever,
    store: Store,
    addr: SocketAddr,
    listening: impl FnOnce(SocketAddr),
) -> Result<(), McpError> {
    if !addr.ip().is_loopback() {
        return Err(McpError::NotLoopback(addr));
    }
    let engine = TurnEngine::new(store.clone(), retriever, Arc::new(HostRunsTheModel));
    let server = MemoryServer::per_token(engine);
    let mcp = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default().with_max_request_body_bytes(MAX_MESSAGE_BYTES),
    );
    let transport = |e: std::io::Error| McpError::Transport(e.to_string());
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(transport)?;
    listening(listener.local_addr().map_err(transport)?);
    loop {
        let (stream, _) = listener.accept().await.map_err(transport)?;
        let (store, mcp) = (store.clone(), mcp.clone());
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let (store, mcp) = (store.clone(), mcp.clone());
                async move { Ok::<_, Infallible>(authorized(store, mcp, request).await) }
            });
            // A connection that breaks ends alone; the server keeps serving the others.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_name_is_case_insensitive() {
        for header in ["Bearer mmt_1", "bearer mmt_1", "BEARER   mmt_1 ", " bEaReR\tmmt_1"] {
            assert_eq!(bearer(header), Some("mmt_1"), "{header:?}");
        }
        for header in ["Basic mmt_1", "Bearer", "Bearer   ", "Bearermmt_1", "mmt_1"] {
            assert_eq!(bearer(header), None, "{header:?}");
        }
    }

    #[test]
    fn every_stored_text_has_the_memory_body_limit() {
        assert_eq!(storable("m", &"é".repeat(MAX_BODY_CHARS)), Ok(()));
        let refused = storable("memory_context.message", &"a".repeat(MAX_BODY_CHARS + 1)).unwrap_err();
        assert_eq!(refused, TextRefused::TooLong { field: "memory_context.message", chars: MAX_BODY_CHARS + 1 });
        assert!(refused.to_string().contains("the limit is 4000"), "{refused}");
        assert_eq!(ErrorData::from(refused).code, ErrorCode::INVALID_PARAMS);
        assert_eq!(storable("m", "a\0b"), Err(TextRefused::Nul { field: "m" }));
    }
}
