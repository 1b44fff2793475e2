//! JSON-RPC framing in front of rmcp, for both transports. rmcp drops a message it cannot parse
//! without a word (and takes `"id": {...}` for a notification), so a host waiting for the answer
//! hangs. Here every message a host sends is bounded ([`MAX_MESSAGE_BYTES`]) and checked before
//! the MCP layer sees it; a malformed one is answered with a JSON-RPC error (`-32700` parse error,
//! `-32600` invalid request, `-32602` invalid params, `id` null unless it could be read), nothing
//! is written, and the connection keeps serving. Stdio reads lines through [`Lines`]; HTTP checks
//! each POST body with [`parse`] and answers 400 (413 when too large) with the same error body.

use std::future::Future;
use std::io;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestMethod, ClientJsonRpcMessage, ClientRequest, ConstString, ErrorCode, GetPromptRequestMethod,
    InitializeResultMethod, JsonRpcMessage, ListPromptsRequestMethod, ListToolsRequestMethod, PingRequestMethod,
    RequestId, ServerJsonRpcMessage,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// The largest JSON-RPC message accepted, in bytes (1 MiB): a line on stdio, a POST body over
/// HTTP. A legitimate message is far smaller (the longest text a tool or prompt takes is
/// [`crate::store::MAX_BODY_CHARS`] characters, at most 12 bytes each even when escaped), and the
/// bound keeps a hostile host from making the server buffer without end.
pub const MAX_MESSAGE_BYTES: usize = 1 << 20;

/// A UTF-8 byte order mark, which RFC 8259 lets a parser ignore.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why a message from a host was refused before the MCP layer saw it. The messages never echo
/// what the host sent (it may be private), only where and how it is malformed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Longer than [`MAX_MESSAGE_BYTES`].
    #[error("the message is longer than {MAX_MESSAGE_BYTES} bytes, the limit (MAX_MESSAGE_BYTES)")]
    TooLarge,
    /// Not UTF-8 (RFC 8259 §8.1).
    #[error("the message is not UTF-8 text")]
    NotUtf8,
    /// Not JSON, or JSON this server cannot represent: a lone surrogate, a number out of range,
    /// nesting deeper than 128 levels (serde_json's recursion limit, checked without recursing
    /// further, so deep input cannot overflow the stack).
    #[error("the message is not JSON the server can read: {0}")]
    NotJson(String),
    /// JSON, but not a JSON-RPC 2.0 message.
    #[error("the message is not a JSON-RPC 2.0 message: {0}")]
    NotJsonRpc(&'static str),
    /// A request with a readable id whose params do not fit its method.
    #[error("the params do not match the method's schema")]
    Params,
    /// A notification or response that does not fit its schema. JSON-RPC never answers these on
    /// a stream (an answer to an answer could loop); over HTTP the POST gets 400.
    #[error("the notification or response does not match its schema")]
    Unreadable,
}

impl FrameError {
    /// The JSON-RPC error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::NotUtf8 | FrameError::NotJson(_) => ErrorCode::PARSE_ERROR,
            FrameError::TooLarge | FrameError::NotJsonRpc(_) | FrameError::Unreadable => ErrorCode::INVALID_REQUEST,
            FrameError::Params => ErrorCode::INVALID_PARAMS,
        }
    }
}

/// A refused message: why, and its id where one could be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The request's id, when the message was readable up to it.
    pub id: Option<RequestId>,
    /// Why.
    pub error: FrameError,
}

impl Refused {
    fn new(error: FrameError) -> Self {
        Refused { id: None, error }
    }

    /// Whether a stream answers it: everything but an unreadable notification or response.
    pub fn answered_on_streams(&self) -> bool {
        self.error != FrameError::Unreadable
    }

    /// The JSON-RPC error response, one line of JSON (`"id": null` when no id could be read,
    /// as JSON-RPC 2.0 asks).
    pub fn response(&self) -> Vec<u8> {
        let data = match self.error {
            FrameError::TooLarge => json!({"limit_bytes": MAX_MESSAGE_BYTES}),
            _ => Value::Null,
        };
        let mut error = json!({"code": self.error.code().0, "message": self.error.to_string()});
        if !data.is_null() {
            error["data"] = data;
        }
        let mut line = json!({"jsonrpc": "2.0", "id": self.id, "error": error}).to_string().into_bytes();
        line.push(b'\n');
        line
    }
}

/// Removes a leading byte order mark.
pub fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}

/// Reads one message: the MCP message, or why it is refused.
pub fn parse(bytes: &[u8]) -> Result<ClientJsonRpcMessage, Refused> {
    let bytes = without_bom(bytes);
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(Refused::new(FrameError::TooLarge));
    }
    let text = std::str::from_utf8(bytes).map_err(|_| Refused::new(FrameError::NotUtf8))?;
    // Syntax errors name a position only, never the input.
    let value: Value = serde_json::from_str(text).map_err(|e| Refused::new(FrameError::NotJson(e.to_string())))?;
    let invalid = |reason| Refused::new(FrameError::NotJsonRpc(reason));
    let Value::Object(map) = &value else {
        return Err(invalid(if value.is_array() {
            "batches are not supported; send one message at a time"
        } else {
            "a message is a JSON object"
        }));
    };
    if map.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    match map.get("method") {
        Some(Value::String(_)) => {}
        Some(_) => return Err(invalid("\"method\" must be a string")),
        // A response (to a request this server sent) is never answered, so no two peers can
        // answer each other's errors forever; its `id` may be null.
        None if map.contains_key("result") || map.contains_key("error") => {
            return serde_json::from_value(value).map_err(|_| Refused::new(FrameError::Unreadable));
        }
        None => return Err(invalid("a message has a \"method\", a \"result\" or an \"error\"")),
    }
    let id = match map.get("id") {
        None => None,
        Some(Value::String(s)) => Some(RequestId::String(s.as_str().into())),
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().map(RequestId::Number),
        Some(_) => return Err(invalid("\"id\" must be a string or an integer")),
    };
    let params = || Refused { id: id.clone(), error: FrameError::Params };
    match serde_json::from_value(value) {
        // rmcp reads a served method whose params do not fit as a custom request, and would
        // answer "method not found".
        Ok(JsonRpcMessage::Request(r)) if matches!(&r.request, ClientRequest::CustomRequest(c) if served(&c.method)) => {
            Err(params())
        }
        Ok(message) => Ok(message),
        Err(_) if id.is_some() => Err(params()),
        Err(_) => Err(Refused::new(FrameError::Unreadable)),
    }
}

/// The request methods this server answers (tools and prompts, and the protocol's own).
fn served(method: &str) -> bool {
    [
        InitializeResultMethod::VALUE,
        PingRequestMethod::VALUE,
        ListToolsRequestMethod::VALUE,
        CallToolRequestMethod::VALUE,
        ListPromptsRequestMethod::VALUE,
        GetPromptRequestMethod::VALUE,
    ]
    .contains(&method)
}

/// The stdio transport: newline-delimited JSON-RPC (as rmcp's own), each line read into a buffer
/// of at most [`MAX_MESSAGE_BYTES`] and checked by [`parse`]; a refused line is answered on the
/// spot and the next line is read. A longer line is answered as soon as it passes the limit (the
/// host may be waiting for that answer before it sends a newline) and skipped to its end.
pub struct Lines<R, W> {
    read: BufReader<R>,
    /// The line read so far (it survives a cancelled `receive`, which rmcp does).
    line: Vec<u8>,
    /// The current line passed the limit and was answered; skip to its end.
    skipping: bool,
    write: Arc<Mutex<Option<W>>>,
}

impl<R: AsyncRead, W> Lines<R, W> {
    /// A transport reading `read` and writing `write` (stdin and stdout).
    pub fn new(read: R, write: W) -> Self {
        Lines {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: false,
            write: Arc::new(Mutex::new(Some(write))),
        }
    }
}

/// Writes one whole line under the lock, so lines never interleave.
async fn write_line<W: AsyncWrite + Unpin>(write: &Mutex<Option<W>>, line: &[u8]) -> io::Result<()> {
    let mut write = write.lock().await;
    let write = write.as_mut().ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "the transport is closed"))?;
    write.write_all(line).await?;
    write.flush().await
}

/// Sends `refused`'s answer from a task of its own, so `receive` stays cancellation-safe (rmcp
/// polls it inside a `select!`, and a half-written line would corrupt the stream).
fn answer<W: AsyncWrite + Unpin + Send + 'static>(write: &Arc<Mutex<Option<W>>>, refused: &Refused) {
    tracing::debug!(code = refused.error.code().0, "refused a malformed MCP message: {}", refused.error);
    let (write, line) = (write.clone(), refused.response());
    tokio::spawn(async move {
        if let Err(e) = write_line(&write, &line).await {
            tracing::debug!("could not answer a malformed MCP message: {e}");
        }
    });
}

impl<R, W> Transport<RoleServer> for Lines<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(&mut self, item: ServerJsonRpcMessage) -> impl Future<Output = io::Result<()>> + Send + 'static {
        let write = self.write.clone();
        async move {
            let mut line = serde_json::to_vec(&item)?;
            line.push(b'\n');
            write_line(&write, &line).await
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            // The only await: nothing is consumed until it returns, so a cancelled call loses nothing.
            let buffered = match self.read.fill_buf().await {
                Ok([]) => return None, // end of input (an unterminated last line is incomplete)
                Ok(buffered) => buffered,
                Err(e) => {
                    tracing::debug!("reading the MCP input failed: {e}");
                    return None;
                }
            };
            let newline = buffered.iter().position(|b| *b == b'\n');
            let taken = newline.unwrap_or(buffered.len());
            if !self.skipping {
                if self.line.len() + taken > MAX_MESSAGE_BYTES + BOM.len() {
                    self.skipping = true;
                    self.line = Vec::new();
                    answer(&self.write, &Refused::new(FrameError::TooLarge));
                } else {
                    self.line.extend_from_slice(&buffered[..taken]);
                }
            }
            self.read.consume(taken + usize::from(newline.is_some()));
            if newline.is_none() || std::mem::take(&mut self.skipping) {
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match parse(line) {
                Ok(message) => return Some(message),
                Err(refused) if refused.answered_on_streams() => answer(&self.write, &refused),
                Err(_) => tracing::debug!("ignored an unreadable MCP notification or response"),
            }
        }
    }

    async fn close(&mut self) -> io::Result<()> {
        self.write.lock().await.take();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(bytes: &[u8]) -> Refused {
        parse(bytes).expect_err("refused")
    }

    #[test]
    fn malformed_messages_are_refused_with_the_right_code_and_id() {
        let call = |arguments: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"remember","arguments":{arguments}}}}}"#
            )
        };
        let deep = call(&format!(r#"{{"body":{}{}}}"#, "[".repeat(100_000), "]".repeat(100_000)));
        let mut invalid_utf8 = call(r#"{"body":"~"}"#).into_bytes();
        let at = invalid_utf8.iter().position(|b| *b == b'~').unwrap();
        invalid_utf8[at] = 0xff;
        for (bytes, code) in [
            (b"not json".to_vec(), ErrorCode::PARSE_ERROR),
            (call(r#"{"body":"\ud800"}"#).into_bytes(), ErrorCode::PARSE_ERROR),
            (call(r#"{"body":"\udc00"}"#).into_bytes(), ErrorCode::PARSE_ERROR),
            (invalid_utf8, ErrorCode::PARSE_ERROR),
            (deep.into_bytes(), ErrorCode::PARSE_ERROR),
            (call(r#"{"query":"x","limit":1e400}"#).into_bytes(), ErrorCode::PARSE_ERROR),
            (br#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1,"method":7}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"{"jsonrpc":"2.0","id":1}"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec(), ErrorCode::INVALID_REQUEST),
            (b"42".to_vec(), ErrorCode::INVALID_REQUEST),
            (vec![b'x'; MAX_MESSAGE_BYTES + 1], ErrorCode::INVALID_REQUEST),
        ] {
            let refused = refused(&bytes);
            assert_eq!(
                refused.error.code(),
                code,
                "{:?}: {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(80)]),
                refused.error
            );
            assert_eq!(refused.id, None);
            let response: Value = serde_json::from_slice(&refused.response()).unwrap();
            assert_eq!(response["id"], Value::Null);
            assert_eq!(response["error"]["code"], code.0);
        }
    }

    #[test]
    fn a_request_whose_params_do_not_fit_is_answered_with_its_id() {
        let refused = refused(br#"{"jsonrpc":"2.0","id":"abc","method":"tools/call","params":{"name":5}}"#);
        assert_eq!((&refused.id, &refused.error), (&Some(RequestId::String("abc".into())), &FrameError::Params));
        let response: Value = serde_json::from_slice(&refused.response()).unwrap();
        assert_eq!((response["id"].as_str(), response["error"]["code"].as_i64()), (Some("abc"), Some(-32602)));
    }

    #[test]
    fn well_formed_messages_pass_and_unreadable_notifications_are_not_answered() {
        assert!(parse(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).is_ok());
        assert!(parse(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}").is_ok());
        assert!(
            parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#).is_ok(),
            "our own answer, echoed back, is no new request"
        );
        for unreadable in [
            br#"{"jsonrpc":"2.0","method":"notifications/whatever","params":[1]}"#.as_slice(),
            br#"{"jsonrpc":"2.0","id":{"a":1},"error":{"code":"x"}}"#,
        ] {
            let unreadable = refused(unreadable);
            assert!(!unreadable.answered_on_streams(), "{unreadable:?}");
        }
    }
}
