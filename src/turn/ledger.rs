//! The committed ledger: the authoritative list of durable operations of one turn, built only
//! from the store's return values ([`CommittedWrite`]) and from committed sharing requests, never
//! from what the model asked for. It is injected as a developer-role message before the reply.

use serde::{Deserialize, Serialize};

use crate::ids::{EntryId, RevisionId};
use crate::privacy::sharing::SharingRequestId;
use crate::store::{CommittedWrite, WriteOperation};

/// A pending sharing request the turn created (a durable row, but no grant).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedSharingRequest {
    /// The request row.
    pub request_id: SharingRequestId,
    /// The revision it proposes to release.
    pub revision_id: RevisionId,
    /// Its entry (absent in ledgers recorded before short entry ids).
    #[serde(default)]
    pub entry_id: Option<EntryId>,
    /// Its revision number (absent in ledgers recorded before short entry ids).
    #[serde(default)]
    pub revision_number: Option<i32>,
}

/// Everything that committed in a turn, in commit order. No `Deserialize`: a ledger is built
/// from the store's return values only; what `agent_turns` recorded reads back as a
/// [`RecordedLedger`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Ledger {
    /// Memory writes (create, amend, forget) exactly as the store returned them.
    pub writes: Vec<CommittedWrite>,
    /// Pending sharing requests created.
    pub sharing_requests: Vec<CommittedSharingRequest>,
}

impl Ledger {
    /// Records a committed memory write.
    pub fn record_write(&mut self, write: CommittedWrite) {
        self.writes.push(write);
    }

    /// Records a committed sharing request.
    pub fn record_sharing_request(&mut self, request: CommittedSharingRequest) {
        self.sharing_requests.push(request);
    }

    /// Whether nothing committed.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.sharing_requests.is_empty()
    }

    /// Whether an operation of this kind committed.
    pub fn has(&self, operation: WriteOperation) -> bool {
        self.writes.iter().any(|w| w.operation() == operation)
    }

    /// Whether an amend that changed the subject committed (the only licence for "re-attributed").
    pub fn has_reattribution(&self) -> bool {
        self.writes.iter().any(|w| w.operation() == WriteOperation::Amend && w.subject_changed())
    }

    /// Entries the turn itself amended or forgot: their earlier revisions, used by the reply,
    /// changed because of this turn, which the reply may acknowledge.
    pub fn entries_changed(&self) -> Vec<EntryId> {
        self.writes.iter().filter(|w| w.operation() != WriteOperation::Create).map(CommittedWrite::entry_id).collect()
    }

    /// The developer-role instruction: the complete list plus the explicit prohibitions.
    pub fn developer_message(&self) -> String {
        let mut text =
            String::from("COMMITTED LEDGER (authoritative; written by the runtime from the database's own results).\n");
        if self.is_empty() {
            text.push_str("No durable operation has committed in this turn.\n");
        } else {
            text.push_str("These durable operations committed in this turn, and nothing else:\n");
        }
        for w in &self.writes {
            let what = match w.operation() {
                WriteOperation::Create => "created new memory entry".to_owned(),
                WriteOperation::Amend if w.subject_changed() => "amended (subject changed) entry".to_owned(),
                WriteOperation::Amend => "amended (body only, subject unchanged) entry".to_owned(),
                WriteOperation::Forget => "forgot entry".to_owned(),
            };
            text.push_str(&format!("- {what} {} -> revision {}\n", w.entry_id().short(), w.revision_number()));
        }
        for r in &self.sharing_requests {
            let revision = match (r.entry_id, r.revision_number) {
                (Some(entry), Some(number)) => format!("entry {} revision {number}", entry.short()),
                _ => format!("revision {}", r.revision_id),
            };
            text.push_str(&format!(
                "- created PENDING sharing request {} for {revision} (nothing has been shared; it awaits the source person's or an operator's approval)\n",
                r.request_id
            ));
        }
        text.push_str("Rules for your reply:\n");
        text.push_str("- Describe only the operations listed above. Do not claim any other durable change.\n");
        if !self.has(WriteOperation::Amend) && !self.has(WriteOperation::Forget) {
            text.push_str("- Nothing was superseded, replaced or marked as superseded: do not say so.\n");
        }
        if !self.has_reattribution() {
            text.push_str("- Nothing was re-attributed: no subject changed. Do not say so.\n");
        }
        if !self.has(WriteOperation::Forget) {
            text.push_str("- Nothing was deleted or forgotten: do not say so.\n");
        }
        if !self.has(WriteOperation::Create) && !self.has(WriteOperation::Amend) {
            text.push_str("- Nothing was stored, saved, remembered or updated: do not say so.\n");
        }
        text.push_str(
            "- Memories are never stored anonymously: the speaker is always recorded as the source. Never claim anonymous storage.\n",
        );
        text.push_str("- A tool result saying nothing changed means nothing changed.\n");
        text
    }
}

/// A ledger write as `agent_turns` recorded it, read back for display (`mesh-memory turn ID`):
/// the fields of a [`CommittedWrite`], public and deserialisable, because it is a record of what
/// a past turn's store returned and licenses nothing: no ledger is built and no claim is backed
/// from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedWrite {
    /// The operation.
    pub operation: WriteOperation,
    /// The entry written.
    pub entry_id: EntryId,
    /// The resulting (for forget: the final) revision.
    pub revision_id: RevisionId,
    /// Its number.
    pub revision_number: i32,
    /// Whether the subject changed.
    pub subject_changed: bool,
}

impl From<&CommittedWrite> for RecordedWrite {
    fn from(w: &CommittedWrite) -> Self {
        RecordedWrite {
            operation: w.operation(),
            entry_id: w.entry_id(),
            revision_id: w.revision_id(),
            revision_number: w.revision_number(),
            subject_changed: w.subject_changed(),
        }
    }
}

/// A turn's ledger as `agent_turns` recorded it (the JSON a [`Ledger`] serialises to).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedLedger {
    /// Memory writes, in commit order.
    pub writes: Vec<RecordedWrite>,
    /// Pending sharing requests created.
    pub sharing_requests: Vec<CommittedSharingRequest>,
}

impl RecordedLedger {
    /// Whether nothing committed.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.sharing_requests.is_empty()
    }
}

impl From<&Ledger> for RecordedLedger {
    fn from(ledger: &Ledger) -> Self {
        RecordedLedger {
            writes: ledger.writes.iter().map(RecordedWrite::from).collect(),
            sharing_requests: ledger.sharing_requests.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_ledger_reads_back_what_a_ledger_serialised() {
        let mut ledger = Ledger::default();
        ledger.record_write(CommittedWrite::for_test(WriteOperation::Amend, true));
        let stored = serde_json::to_value(&ledger).unwrap();
        let read: RecordedLedger = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(read, RecordedLedger::from(&ledger));
        assert_eq!(serde_json::to_value(&read).unwrap(), stored, "the same JSON both ways");
        assert!(read.writes[0].subject_changed && !read.is_empty());
    }
}
