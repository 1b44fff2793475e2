//! What became of one tool call: the `"status"` of every tool result a model or an MCP host
//! reads, and the status a turn records per call (`agent_turns.tool_calls`).
//!
//! One enum for the turn engine, which sets it, and the MCP server, which turns it into a
//! result's `isError`: before it, each matched its own copies of the strings. The serialised
//! names are the wire format models, hosts and stored turns already use, so they never change.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The status of a tool call, serialised as its snake_case name (`"nothing_changed"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// A durable write committed (the ledger holds it).
    Committed,
    /// The write changed nothing (unknown or already forgotten entry); never licence to claim it.
    NothingChanged,
    /// A read (recall) answered.
    Ok,
    /// A sharing request was recorded as pending; nothing was shared.
    Pending,
    /// The call was not run because its round was rejected (an invalid call in it, or tools
    /// offered no longer); nothing of the round was written.
    Rejected,
    /// The store or the sharing rules refused the call; nothing was written.
    Error,
    /// The arguments failed validation (hosted calls); nothing ran.
    Invalid,
}

impl ToolStatus {
    /// The name the wire format uses.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Committed => "committed",
            Self::NothingChanged => "nothing_changed",
            Self::Ok => "ok",
            Self::Pending => "pending",
            Self::Rejected => "rejected",
            Self::Error => "error",
            Self::Invalid => "invalid",
        }
    }

    /// Whether the call failed, so that a host shows its result as an error (MCP `isError`):
    /// nothing was written and the caller has something to fix or report.
    pub const fn is_error(self) -> bool {
        matches!(self, Self::Rejected | Self::Error | Self::Invalid)
    }

    /// A tool result: the JSON object `fields` with its `"status"` set to this status, returned
    /// beside it. Every result is built here, so the status a caller branches on and the one the
    /// model reads cannot disagree. `fields` must be a JSON object (a `json!({...})`).
    pub fn result(self, mut fields: Value) -> (ToolStatus, Value) {
        debug_assert!(fields.is_object(), "a tool result is a JSON object");
        fields["status"] = Value::from(self.as_str());
        (self, fields)
    }
}

impl fmt::Display for ToolStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::ToolStatus;

    const ALL: [ToolStatus; 7] = [
        ToolStatus::Committed,
        ToolStatus::NothingChanged,
        ToolStatus::Ok,
        ToolStatus::Pending,
        ToolStatus::Rejected,
        ToolStatus::Error,
        ToolStatus::Invalid,
    ];

    #[test]
    fn serialises_to_the_wire_names_and_back() {
        for status in ALL {
            let wire = serde_json::to_value(status).unwrap();
            assert_eq!(wire, json!(status.as_str()));
            assert_eq!(status.to_string(), status.as_str());
            assert_eq!(serde_json::from_value::<ToolStatus>(wire).unwrap(), status);
        }
        assert_eq!(ToolStatus::NothingChanged.as_str(), "nothing_changed");
    }

    #[test]
    fn a_result_carries_its_status_and_serialises_as_before() {
        let (status, result) = ToolStatus::Committed.result(json!({"entry_id": "0a1b2c3d4e5f", "revision": 1}));
        assert_eq!(status, ToolStatus::Committed);
        // Keys serialise sorted, so where "status" was inserted does not change the bytes.
        assert_eq!(result.to_string(), r#"{"entry_id":"0a1b2c3d4e5f","revision":1,"status":"committed"}"#);
        let failed: Vec<ToolStatus> = ALL.into_iter().filter(|s| s.is_error()).collect();
        assert_eq!(failed, [ToolStatus::Rejected, ToolStatus::Error, ToolStatus::Invalid]);
    }
}
