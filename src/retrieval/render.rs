//! Rendering selections for the two consumers of the one retrieval service: the prompt section of
//! automatic context assembly, and the recall tool's JSON. Labels come from current identity rows
//! at assembly time (`Victor (id U123)`), never from memory bodies, so a rename changes rendering
//! without rewriting history, and two people named alike stay distinct by id.

use serde::Serialize;

use super::{Provenance, Selection};
use crate::ids::{EntryId, RevisionId};

/// The fixed header of the prompt section. Outside the entry allowance (see the spec).
pub const PROMPT_SECTION_HEADER: &str = "Memories relevant to this turn. \"About\" names who a memory concerns, \
\"told by\" who supplied it; labels are current identities (name and stable id). A memory about someone \
other than the current speaker is about that person, not the speaker.";

/// One prompt line: ids (for amend/forget), subject, source, where it was learned, then the body.
pub fn prompt_line(selection: &Selection) -> String {
    let about = selection.subject.as_ref().map_or_else(|| "an unresolved subject".to_owned(), |s| s.label.clone());
    let told_by = selection.source.as_ref().map_or_else(|| "the system".to_owned(), |s| s.label.clone());
    let place = match &selection.provenance {
        Provenance::ThisConversation => "this conversation".to_owned(),
        Provenance::SharedConversation { title, .. } if !title.is_empty() => title.clone(),
        Provenance::SharedConversation { .. } | Provenance::OtherConversation => "another conversation".to_owned(),
        Provenance::Unrecorded => "an unrecorded conversation".to_owned(),
    };
    let always_on = if selection.always_on { " (always-on)" } else { "" };
    format!(
        "- [entry {}, rev {}{}] About {}, told by {} in {}: {}",
        selection.entry_id, selection.revision_number, always_on, about, told_by, place, selection.body
    )
}

/// The whole prompt section: header and one line per selection, in rank order. Empty when
/// nothing was selected (no header for no memories).
pub fn prompt_section(selections: &[Selection]) -> String {
    if selections.is_empty() {
        return String::new();
    }
    let mut out = String::from(PROMPT_SECTION_HEADER);
    for selection in selections {
        out.push('\n');
        out.push_str(&prompt_line(selection));
    }
    out
}

/// The recall tool's view of one selection: stable ids (what amend and forget target), subject,
/// source, visibility-safe provenance, score, components and reason.
#[derive(Debug, Serialize)]
pub struct RecallItem<'a> {
    /// Stable entry id.
    pub entry_id: EntryId,
    /// The current revision id.
    pub revision_id: RevisionId,
    /// Its number.
    pub revision_number: i32,
    /// The memory text.
    pub body: &'a str,
    /// Who it is about.
    pub subject: Option<&'a super::ActorRef>,
    /// Who supplied it.
    pub source: Option<&'a super::ActorRef>,
    /// Where it was learned, as far as this audience may know.
    pub provenance: &'a Provenance,
    /// Always-on flag.
    pub always_on: bool,
    /// Final score.
    pub score: f64,
    /// Score components.
    pub components: &'a super::Components,
    /// Why it was chosen.
    pub reason: &'a str,
}

impl<'a> From<&'a Selection> for RecallItem<'a> {
    fn from(s: &'a Selection) -> Self {
        RecallItem {
            entry_id: s.entry_id,
            revision_id: s.revision_id,
            revision_number: s.revision_number,
            body: &s.body,
            subject: s.subject.as_ref(),
            source: s.source.as_ref(),
            provenance: &s.provenance,
            always_on: s.always_on,
            score: s.score,
            components: &s.components,
            reason: &s.reason,
        }
    }
}

/// One selection as compact recall JSON text (what packing measures).
pub fn recall_item_json(selection: &Selection) -> String {
    serde_json::to_string(&RecallItem::from(selection)).expect("recall items serialize")
}

/// The recall tool result: the selected memories only. Withheld counts and degradation details
/// stay in the audit and operator views; they are not for the model.
pub fn recall_json(selections: &[Selection]) -> serde_json::Value {
    serde_json::json!({
        "memories": selections.iter().map(RecallItem::from).collect::<Vec<_>>(),
    })
}
