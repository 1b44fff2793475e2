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
    let place = learned_in(&selection.provenance);
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

/// The recall tool's view of one selection, as the model receives it: what it needs to use,
/// amend, forget or share the memory, and nothing of how it was ranked. Scores, components and
/// reasons are audit data: they stay in `memory_retrieval_events`, `explain`, `--json` of a
/// search and the console, and cost the prompt allowance nothing. Subject and source are current
/// identity labels, which carry a stable id (`Victor (id U123)`), as in the prompt line.
#[derive(Debug, Serialize)]
pub struct RecallItem<'a> {
    /// Stable entry id (what amend and forget target).
    pub entry_id: EntryId,
    /// The current revision id (amend's `expected_revision_id`, request_memory_sharing's
    /// `revision_id`).
    pub revision_id: RevisionId,
    /// The memory text.
    pub body: &'a str,
    /// Who it is about (absent: not resolved).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub about: Option<&'a str>,
    /// Who supplied it (absent: the system).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub told_by: Option<&'a str>,
    /// Where it was learned, as far as this audience may know.
    pub learned_in: &'a str,
    /// Present (and true) only for always-on memories.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub always_on: bool,
}

/// Where a memory was learned, in words this audience may be told (the prompt line's wording).
pub fn learned_in(provenance: &Provenance) -> &str {
    match provenance {
        Provenance::ThisConversation => "this conversation",
        Provenance::SharedConversation { title, .. } if !title.is_empty() => title,
        Provenance::SharedConversation { .. } | Provenance::OtherConversation => "another conversation",
        Provenance::Unrecorded => "an unrecorded conversation",
    }
}

impl<'a> From<&'a Selection> for RecallItem<'a> {
    fn from(s: &'a Selection) -> Self {
        RecallItem {
            entry_id: s.entry_id,
            revision_id: s.revision_id,
            body: &s.body,
            about: s.subject.as_ref().map(|a| a.label.as_str()),
            told_by: s.source.as_ref().map(|a| a.label.as_str()),
            learned_in: learned_in(&s.provenance),
            always_on: s.always_on,
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
