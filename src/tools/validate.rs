//! Argument validation: raw model tool calls become typed [`ToolInvocation`]s or a typed
//! [`ToolError`]. Pure (no database): identity references are resolved later, still before any
//! call of the round executes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::ids::EntryReference;
use crate::store::MAX_BODY_CHARS;

/// Default number of memories a `recall` returns.
pub const DEFAULT_RECALL_LIMIT: u32 = 8;
/// Most memories one `recall` may ask for.
pub const MAX_RECALL_LIMIT: u32 = 20;
/// Longest recall query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 1000;
/// Longest sharing rationale accepted (the column's limit).
pub const MAX_RATIONALE_CHARS: usize = 2000;
const MAX_REFERENCE_CHARS: usize = 200;

/// A tool call exactly as the model sent it: the provider's call id, the tool name and the
/// arguments as a JSON text. Nothing here is trusted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id, echoed back with the result.
    pub id: String,
    /// The function name.
    pub name: String,
    /// The arguments, a JSON object as text.
    pub arguments: String,
}

/// Why a tool call was rejected before anything ran. The message is returned to the model, so it
/// says what to fix; it never echoes argument values (they may be private).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum ToolError {
    /// No tool has this name.
    #[error("unknown tool {name:?}; available tools: remember, recall, amend, forget, request_memory_sharing")]
    UnknownTool {
        /// The name the model used (cut to 64 characters).
        name: String,
    },
    /// The arguments are not a JSON object.
    #[error("arguments of {tool} must be a JSON object: {reason}")]
    NotAnObject {
        /// The tool.
        tool: String,
        /// What was wrong.
        reason: String,
    },
    /// A field the schema does not define (schemas set `additionalProperties: false`).
    #[error("{tool} has no field {field:?}; remove it")]
    UnknownField {
        /// The tool.
        tool: String,
        /// The unexpected field (cut to 64 characters).
        field: String,
    },
    /// A required field is absent.
    #[error("{tool} requires the field {field:?}")]
    MissingField {
        /// The tool.
        tool: String,
        /// The missing field.
        field: String,
    },
    /// A field has the wrong type or breaks a limit.
    #[error("{tool}.{field} is invalid: {reason}")]
    InvalidField {
        /// The tool.
        tool: String,
        /// The field.
        field: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A reference (actor, conversation) that does not resolve for this runtime agent.
    #[error("{tool}.{field}: {reason}")]
    UnresolvedReference {
        /// The tool.
        tool: String,
        /// The field.
        field: String,
        /// What could not be found.
        reason: String,
    },
    /// The tool may not be used in this conversation.
    #[error("{tool} is not allowed here: {reason}")]
    NotAllowedHere {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
}

/// How an amendment names its subject.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "reference", rename_all = "snake_case")]
pub enum SubjectArg {
    /// Field absent: keep the current subject.
    Keep,
    /// `null`: mark the subject unresolved.
    Clear,
    /// A connector user id or actor id, resolved before execution.
    Set(String),
}

/// `remember` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberArgs {
    /// The fact.
    pub body: String,
    /// Unresolved subject reference.
    pub subject: Option<String>,
    /// Standing instruction flag.
    pub always_on: bool,
}

/// `recall` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecallArgs {
    /// Query text (may be empty: broad mode).
    pub query: String,
    /// How many memories to return.
    pub limit: u32,
}

/// `amend` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AmendArgs {
    /// Entry to amend (short id from recall, or a full id).
    pub entry: EntryReference,
    /// The revision number the model read (the amend fails if the entry moved on since).
    pub expected_revision: i32,
    /// New body, if any.
    pub body: Option<String>,
    /// Subject change.
    pub subject: SubjectArg,
}

/// `forget` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgetArgs {
    /// Entry to retire (short id from recall, or a full id).
    pub entry: EntryReference,
}

/// `request_memory_sharing` arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharingArgs {
    /// The entry whose revision is to be released (short id from recall, or a full id).
    pub entry: EntryReference,
    /// The one revision to release, by number (it must be the entry's current one).
    pub revision: i32,
    /// Why (shown to the approver).
    pub rationale: String,
    /// Conversation id or external channel id whose members would receive it.
    pub target_conversation: String,
}

/// A validated tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "tool", content = "arguments", rename_all = "snake_case")]
pub enum ToolInvocation {
    /// Create a memory.
    Remember(RememberArgs),
    /// Search memory.
    Recall(RecallArgs),
    /// Add a revision.
    Amend(AmendArgs),
    /// Retire an entry.
    Forget(ForgetArgs),
    /// Propose a release.
    RequestMemorySharing(SharingArgs),
}

impl ToolInvocation {
    /// The tool's name.
    pub fn name(&self) -> &'static str {
        match self {
            ToolInvocation::Remember(_) => "remember",
            ToolInvocation::Recall(_) => "recall",
            ToolInvocation::Amend(_) => "amend",
            ToolInvocation::Forget(_) => "forget",
            ToolInvocation::RequestMemorySharing(_) => "request_memory_sharing",
        }
    }
}

fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

/// The parsed argument object of one call, with typed accessors that produce [`ToolError`]s.
struct Args {
    tool: &'static str,
    map: Map<String, Value>,
}

impl Args {
    fn parse(tool: &'static str, text: &str, allowed: &[&str]) -> Result<Args, ToolError> {
        let text = if text.trim().is_empty() { "{}" } else { text };
        let value: Value = serde_json::from_str(text).map_err(|e| ToolError::NotAnObject {
            tool: tool.to_owned(),
            reason: format!("not valid JSON (line {}, column {})", e.line(), e.column()),
        })?;
        let Value::Object(map) = value else {
            return Err(ToolError::NotAnObject { tool: tool.to_owned(), reason: "got a non-object value".to_owned() });
        };
        if let Some(field) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ToolError::UnknownField { tool: tool.to_owned(), field: cut(field) });
        }
        Ok(Args { tool, map })
    }

    fn invalid(&self, field: &str, reason: impl Into<String>) -> ToolError {
        ToolError::InvalidField { tool: self.tool.to_owned(), field: field.to_owned(), reason: reason.into() }
    }

    fn missing(&self, field: &str) -> ToolError {
        ToolError::MissingField { tool: self.tool.to_owned(), field: field.to_owned() }
    }

    /// A string field; `Ok(None)` when absent (or `null`, if `null_ok`).
    fn optional_string(&self, field: &str, max_chars: usize) -> Result<Option<String>, ToolError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => {
                if s.contains('\0') {
                    return Err(self.invalid(field, "must not contain NUL characters"));
                }
                let chars = s.chars().count();
                if chars > max_chars {
                    return Err(self.invalid(field, format!("is {chars} characters; the limit is {max_chars}")));
                }
                Ok(Some(s.clone()))
            }
            Some(_) => Err(self.invalid(field, "must be a string")),
        }
    }

    fn required_text(&self, field: &str, max_chars: usize) -> Result<String, ToolError> {
        let text = self.optional_string(field, max_chars)?.ok_or_else(|| self.missing(field))?;
        if text.trim().is_empty() {
            return Err(self.invalid(field, "must not be empty"));
        }
        Ok(text)
    }

    fn reference(&self, field: &str) -> Result<Option<String>, ToolError> {
        let Some(text) = self.optional_string(field, MAX_REFERENCE_CHARS)? else { return Ok(None) };
        if text.trim().is_empty() {
            return Err(self.invalid(field, "must not be empty (omit it or use null instead)"));
        }
        Ok(Some(text.trim().to_owned()))
    }

    fn entry(&self, field: &str) -> Result<EntryReference, ToolError> {
        let text = self.required_text(field, 100)?;
        text.parse().map_err(|_| self.invalid(field, "must be an entry id exactly as recall shows it (12 hex digits)"))
    }

    fn revision_number(&self, field: &str) -> Result<i32, ToolError> {
        let invalid = || self.invalid(field, "must be a revision number (a positive integer) as recall shows it");
        match self.map.get(field) {
            None | Some(Value::Null) => Err(self.missing(field)),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if v >= 1 => i32::try_from(v).map_err(|_| invalid()),
                _ => Err(invalid()),
            },
            Some(_) => Err(invalid()),
        }
    }

    fn bool(&self, field: &str) -> Result<bool, ToolError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.invalid(field, "must be true or false")),
        }
    }

    fn limit(&self, field: &str) -> Result<u32, ToolError> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(DEFAULT_RECALL_LIMIT),
            Some(Value::Number(n)) => match n.as_u64() {
                Some(v) if (1..=u64::from(MAX_RECALL_LIMIT)).contains(&v) => Ok(v as u32),
                _ => Err(self.invalid(field, format!("must be an integer from 1 to {MAX_RECALL_LIMIT}"))),
            },
            Some(_) => Err(self.invalid(field, "must be an integer")),
        }
    }
}

/// Validates one raw call into a [`ToolInvocation`]. Unknown tools, unknown fields, missing or
/// mistyped fields, over-long text and malformed ids are all rejected with a typed error.
pub fn validate_call(call: &ToolCall) -> Result<ToolInvocation, ToolError> {
    match call.name.as_str() {
        "remember" => {
            let args = Args::parse("remember", &call.arguments, &["body", "subject", "always_on"])?;
            Ok(ToolInvocation::Remember(RememberArgs {
                body: args.required_text("body", MAX_BODY_CHARS)?,
                subject: args.reference("subject")?,
                always_on: args.bool("always_on")?,
            }))
        }
        "recall" => {
            let args = Args::parse("recall", &call.arguments, &["query", "limit"])?;
            Ok(ToolInvocation::Recall(RecallArgs {
                query: args.optional_string("query", MAX_QUERY_CHARS)?.unwrap_or_default(),
                limit: args.limit("limit")?,
            }))
        }
        "amend" => {
            let args = Args::parse("amend", &call.arguments, &["entry_id", "expected_revision", "body", "subject"])?;
            let body = match args.optional_string("body", MAX_BODY_CHARS)? {
                Some(b) if b.trim().is_empty() => return Err(args.invalid("body", "must not be empty")),
                other => other,
            };
            let subject = match args.map.get("subject") {
                None => SubjectArg::Keep,
                Some(Value::Null) => SubjectArg::Clear,
                Some(_) => SubjectArg::Set(args.reference("subject")?.unwrap_or_default()),
            };
            if body.is_none() && subject == SubjectArg::Keep {
                return Err(args.invalid("body", "an amendment needs a new body, a subject change, or both"));
            }
            Ok(ToolInvocation::Amend(AmendArgs {
                entry: args.entry("entry_id")?,
                expected_revision: args.revision_number("expected_revision")?,
                body,
                subject,
            }))
        }
        "forget" => {
            let args = Args::parse("forget", &call.arguments, &["entry_id"])?;
            Ok(ToolInvocation::Forget(ForgetArgs { entry: args.entry("entry_id")? }))
        }
        "request_memory_sharing" => {
            let args = Args::parse(
                "request_memory_sharing",
                &call.arguments,
                &["entry_id", "revision", "rationale", "target_conversation"],
            )?;
            Ok(ToolInvocation::RequestMemorySharing(SharingArgs {
                entry: args.entry("entry_id")?,
                revision: args.revision_number("revision")?,
                rationale: args.required_text("rationale", MAX_RATIONALE_CHARS)?,
                target_conversation: args.required_text("target_conversation", MAX_REFERENCE_CHARS)?.trim().to_owned(),
            }))
        }
        other => Err(ToolError::UnknownTool { name: cut(other) }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall { id: "c1".into(), name: name.into(), arguments: args.into() }
    }

    #[test]
    fn remember_rejects_entry_and_supersede_fields() {
        for field in ["entry_id", "revision_id", "supersedes", "source_actor", "conversation"] {
            let args = format!(r#"{{"body": "x", "{field}": "y"}}"#);
            assert!(matches!(validate_call(&call("remember", &args)), Err(ToolError::UnknownField { .. })), "{field}");
        }
    }

    #[test]
    fn remember_accepts_minimal_body() {
        let v = validate_call(&call("remember", r#"{"body": "Likes tea"}"#)).unwrap();
        assert_eq!(
            v,
            ToolInvocation::Remember(RememberArgs { body: "Likes tea".into(), subject: None, always_on: false })
        );
    }

    #[test]
    fn typed_errors_for_bad_input() {
        assert!(matches!(validate_call(&call("remember", "{}")), Err(ToolError::MissingField { .. })));
        assert!(matches!(validate_call(&call("remember", r#"{"body": 3}"#)), Err(ToolError::InvalidField { .. })));
        assert!(matches!(validate_call(&call("remember", "[1]")), Err(ToolError::NotAnObject { .. })));
        assert!(matches!(validate_call(&call("remember", "{body")), Err(ToolError::NotAnObject { .. })));
        assert!(matches!(validate_call(&call("supersede", "{}")), Err(ToolError::UnknownTool { .. })));
        assert!(matches!(
            validate_call(&call("forget", r#"{"entry_id": "nope"}"#)),
            Err(ToolError::InvalidField { .. })
        ));
        assert!(matches!(
            validate_call(&call("recall", r#"{"query": "", "limit": 99}"#)),
            Err(ToolError::InvalidField { .. })
        ));
        let no_change = r#"{"entry_id": "5c06e1f2a9b3", "expected_revision": 1}"#;
        assert!(matches!(validate_call(&call("amend", no_change)), Err(ToolError::InvalidField { .. })));
    }

    #[test]
    fn amend_subject_null_clears_and_absent_keeps() {
        let id = uuid::Uuid::now_v7();
        let clear = format!(r#"{{"entry_id": "{id}", "expected_revision": 1, "subject": null}}"#);
        let ToolInvocation::Amend(a) = validate_call(&call("amend", &clear)).unwrap() else { panic!() };
        assert_eq!(a.subject, SubjectArg::Clear);
        let body = r#"{"entry_id": "5C06E1F2A9B3", "expected_revision": 2, "body": "b"}"#;
        let ToolInvocation::Amend(a) = validate_call(&call("amend", body)).unwrap() else { panic!() };
        assert_eq!(a.subject, SubjectArg::Keep);
        assert_eq!(a.entry, "5c06e1f2a9b3".parse().unwrap());
        assert_eq!(a.expected_revision, 2);
        for bad in [r#""2""#, "0", "-1", "1.5", "null"] {
            let args = format!(r#"{{"entry_id": "5c06e1f2a9b3", "expected_revision": {bad}, "body": "b"}}"#);
            assert!(validate_call(&call("amend", &args)).is_err(), "expected_revision {bad}");
        }
    }

    #[test]
    fn schemas_forbid_additional_properties_and_remember_has_no_id() {
        for tool in super::super::tool_definitions() {
            assert_eq!(tool["function"]["parameters"]["additionalProperties"], Value::Bool(false));
        }
        let remember = &super::super::tool_definitions()[0];
        let props = remember["function"]["parameters"]["properties"].as_object().unwrap();
        let mut keys: Vec<&String> = props.keys().collect();
        keys.sort();
        assert_eq!(keys, vec!["always_on", "body", "subject"]);
    }
}
