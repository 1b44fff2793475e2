//! Tool schemas in the OpenAI function-calling format (`{"type": "function", "function": {...}}`).
//! Every parameter object sets `additionalProperties: false`; [`super::validate_call`] enforces
//! the same shape, so a provider that ignores the schema still cannot smuggle extra fields in.

use serde_json::{json, Value};

use super::validate::{DEFAULT_RECALL_LIMIT, MAX_QUERY_CHARS, MAX_RATIONALE_CHARS, MAX_RECALL_LIMIT};
use crate::store::MAX_BODY_CHARS;

/// An entry id as tools take it: the 12 hex digits recall shows (a full UUID is accepted too).
fn entry_id_schema() -> Value {
    json!({"type": "string", "minLength": 12, "maxLength": 36,
           "description": "The entry id recall showed (12 hex digits, e.g. 5c06e1f2a9b3)."})
}

/// The tool names, in the order they are offered.
pub fn tool_names() -> [&'static str; 5] {
    ["remember", "recall", "amend", "forget", "request_memory_sharing"]
}

fn function(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": false,
            },
        },
    })
}

/// The five tool definitions, ready to be sent as the `tools` field of a chat-completions request.
pub fn tool_definitions() -> Vec<Value> {
    vec![
        function(
            "remember",
            "Store ONE new durable fact as a new memory entry. Create-only: it never changes, replaces \
             or supersedes an existing memory (use amend for corrections, forget to retire one). The \
             speaker and conversation are recorded automatically.",
            json!({
                "body": {"type": "string", "minLength": 1, "maxLength": MAX_BODY_CHARS,
                         "description": "The fact in natural prose, without names or ids of the subject."},
                "subject": {"type": ["string", "null"], "maxLength": 200,
                            "description": "Who the fact is about: a connector user id (e.g. U123) or an actor id. Omit or null if not known."},
                "always_on": {"type": "boolean",
                              "description": "True only for standing instructions that must apply on every turn."},
            }),
            &["body"],
        ),
        function(
            "recall",
            "Search durable memory. Returns one line per memory: `[entry_id rev N] About <who it is about>, \
             told by <who supplied it> in <where it was learned>: <the memory>`. The entry id (12 hex digits) \
             and revision number are what amend, forget and request_memory_sharing take. An empty query \
             returns the most relevant memories for this conversation.",
            json!({
                "query": {"type": "string", "maxLength": MAX_QUERY_CHARS},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL_LIMIT, "default": DEFAULT_RECALL_LIMIT},
            }),
            &["query"],
        ),
        function(
            "amend",
            "Correct an existing memory by adding a new revision. Requires the entry id and the \
             revision number you obtained from recall (the amend fails if the memory changed since). Give a \
             new body, a new subject, or both.",
            json!({
                "entry_id": entry_id_schema(),
                "expected_revision": {"type": "integer", "minimum": 1,
                                      "description": "The revision number recall showed (rev N)."},
                "body": {"type": "string", "minLength": 1, "maxLength": MAX_BODY_CHARS},
                "subject": {"type": ["string", "null"], "maxLength": 200,
                            "description": "New subject (connector user id or actor id); null marks it unresolved; omit to keep it."},
            }),
            &["entry_id", "expected_revision"],
        ),
        function(
            "forget",
            "Retire a memory entry so it is no longer recalled. Its history is kept for audit.",
            json!({"entry_id": entry_id_schema()}),
            &["entry_id"],
        ),
        function(
            "request_memory_sharing",
            "Propose releasing ONE memory revision (the entry's current one) to a wider audience. Only available in a private direct \
             conversation. It creates a pending request; only the memory's source person or an operator can \
             approve it. It never shares anything by itself.",
            json!({
                "entry_id": entry_id_schema(),
                "revision": {"type": "integer", "minimum": 1, "description": "The revision number recall showed (rev N)."},
                "rationale": {"type": "string", "minLength": 1, "maxLength": MAX_RATIONALE_CHARS},
                "target_conversation": {"type": "string", "maxLength": 200,
                                        "description": "The conversation (id or channel id) whose members would receive it."},
            }),
            &["entry_id", "revision", "rationale", "target_conversation"],
        ),
    ]
}
