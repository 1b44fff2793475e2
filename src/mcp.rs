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
//! Transport: stdio ([`serve_stdio`]).

use std::sync::Arc;

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
use crate::tools::{tool_definitions, validate_call, ToolCall};
use crate::turn::{receive, ChatModel, ChatRequest, HostedSession, ModelError, ModelFuture, TurnEngine, TurnError};

/// The prompt that renders memory context for a message.
pub const CONTEXT_PROMPT: &str = "memory_context";

/// Who an MCP server speaks for: fixed at launch by whoever starts it (an operator's host
/// configuration), never by a tool argument.
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

/// The MCP server: one binding, one turn engine, one session of lineage.
#[derive(Clone)]
pub struct MemoryServer {
    engine: TurnEngine,
    binding: McpBinding,
    session: Arc<Mutex<HostedSession>>,
}

impl MemoryServer {
    /// A server for `binding` over `engine` (built with the one retriever constructor).
    pub fn new(engine: TurnEngine, binding: McpBinding) -> Self {
        MemoryServer { engine, binding, session: Arc::new(Mutex::new(HostedSession::default())) }
    }

    /// Records `text` as the bound actor's authenticated message in the bound conversation.
    async fn said(&self, text: &str) -> Result<crate::MessageId, ErrorData> {
        let b = &self.binding;
        receive(self.engine.store(), b.agent, b.conversation, &b.connector, &b.external_id, text)
            .await
            .map_err(|e| internal(&e))
    }

    async fn call(&self, request: CallToolRequestParams) -> Result<CallToolResult, ErrorData> {
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        let call = ToolCall { id: "mcp".into(), name: request.name.to_string(), arguments };
        // A call that fails validation writes nothing at all, not even its message.
        if let Err(error) = validate_call(&call) {
            return Ok(CallToolResult::error(vec![ContentBlock::text(error.to_string())]));
        }
        let inbound = self.said(&format!("[{} via MCP] {}", call.name, call.arguments)).await?;
        let mut session = self.session.lock().await;
        let outcome = self.engine.run_hosted_call(inbound, &call, &mut session).await.map_err(|e| internal(&e))?;
        let text = outcome.result.to_string();
        Ok(match outcome.status {
            "invalid" | "error" => CallToolResult::error(vec![ContentBlock::text(text)]),
            _ => CallToolResult::success(vec![ContentBlock::text(text)]),
        })
    }

    async fn context(&self, request: GetPromptRequestParams) -> Result<GetPromptResult, ErrorData> {
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
        let inbound = self.said(message).await?;
        let mut session = self.session.lock().await;
        let outcome = self.engine.hosted_context(inbound, &mut session).await.map_err(|e| internal(&e))?;
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, outcome.prompt_section())])
            .with_description(format!("memory context (retrieval event {})", outcome.event_id)))
    }
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
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        Ok(self.call(request).await?.into())
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
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(self.context(request).await?.into())
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
}

/// Serves `binding` over stdin/stdout until the client disconnects.
pub async fn serve_stdio(
    retriever: crate::retrieval::Retriever,
    store: crate::store::Store,
    binding: McpBinding,
) -> Result<(), McpError> {
    let engine = TurnEngine::new(store, retriever, Arc::new(HostRunsTheModel));
    let service = MemoryServer::new(engine, binding)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| McpError::Transport(e.to_string()))?;
    service.waiting().await.map_err(|e| McpError::Transport(e.to_string()))?;
    Ok(())
}
