//! Rendering selections for the two consumers of the one retrieval service: the prompt section of
//! automatic context assembly, and the recall tool's JSON. Labels come from current identity rows
//! at assembly time (`Victor (id U123)`), never from memory bodies, so a rename changes rendering
//! without rewriting history, and two people named alike stay distinct by id.

use super::{when, Provenance, Selection};
use crate::ids::EntryId;

/// The fixed header of the prompt section. Outside the entry allowance (see the spec).
pub const PROMPT_SECTION_HEADER: &str = "Memories relevant to this turn, one per line: [entry id rev N] then \
who the memory is about, who told it, on which day (UTC) it was told, where it was learned, and the memory. \
amend, forget and request_memory_sharing take that entry id and revision number. \"About\" names who a \
memory concerns, \"told by\" who supplied it; labels are current identities (name and stable id). A memory \
about someone other than the current speaker is about that person, not the speaker. Relative words in a \
memory (\"yesterday\", \"last week\") count from the day it was told, not from today; a parenthesis before \
the memory resolves them.";

/// One memory as the model reads it, in the prompt section and in recall results alike:
/// `[5c06e1f2a9b3 rev 2] About Victor (id U123), told by Victor (id U123) on 8 May 2023 in this
/// conversation: Insists on tabs over spaces.` The bracket holds what amend, forget and sharing
/// need (the short entry id and the revision number), then subject, source, the day it was
/// learned (absolute, month in words: [`when::told_on`]) and place (visibility-safe), then the
/// relative words of the body resolved against that day, if any (`("yesterday": 7 May 2023)`,
/// [`when::resolved_phrases_note`]), then the body. Scores, components and reasons are audit
/// data: they stay in `memory_retrieval_events`, `explain`, `--json` of a search and the
/// console, and cost the prompt allowance nothing.
///
/// Why a line and not a JSON object per memory: the object's keys and quotes cost a model's
/// tokenizer more than the memory itself (about 75 tokens against 45 for the line with
/// MiniLM's), and the line says the same things.
pub fn memory_line(selection: &Selection) -> String {
    let about = selection.subject.as_ref().map_or_else(|| "an unresolved subject".to_owned(), |s| s.label.clone());
    let told_by = selection.source.as_ref().map_or_else(|| "the system".to_owned(), |s| s.label.clone());
    let place = learned_in(&selection.provenance);
    let always_on = if selection.always_on { ", always-on" } else { "" };
    format!(
        "[{} rev {}{}] About {}, told by {} on {} in {}{}: {}",
        selection.entry_id.short(),
        selection.revision_number,
        always_on,
        about,
        told_by,
        when::told_on(selection.learned_at),
        place,
        when::resolved_phrases_note(&selection.body, selection.learned_at),
        selection.body
    )
}

/// The least any [`memory_line`] of `entry` can be: the line with every label, place and body
/// empty and a one-digit revision number. Packing uses it as a floor before reading the entry.
pub fn memory_line_skeleton(entry: EntryId) -> String {
    format!("[{} rev 0] About , told by  on  in : ", entry.short())
}

/// One prompt line: the [`memory_line`] as a list item.
pub fn prompt_line(selection: &Selection) -> String {
    format!("- {}", memory_line(selection))
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

/// Reads the entry reference and revision number back out of a [`memory_line`] (or a prompt
/// line): what a scripted model, a test or a host program does with a recall result.
pub fn line_reference(line: &str) -> Option<(&str, u32)> {
    let inner = line.trim_start_matches("- ").strip_prefix('[')?.split(']').next()?;
    let (entry, rest) = inner.split_once(" rev ")?;
    let number = rest.split(',').next()?.trim().parse().ok()?;
    Some((entry, number))
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

/// One selection as recall JSON text (what packing measures): the [`memory_line`] as a JSON
/// string.
pub fn recall_item_json(selection: &Selection) -> String {
    serde_json::to_string(&memory_line(selection)).expect("strings serialize")
}

/// The recall tool result: the selected memories, one [`memory_line`] each, in rank order.
/// Withheld counts and degradation details stay in the audit and operator views; they are not
/// for the model.
pub fn recall_json(selections: &[Selection]) -> serde_json::Value {
    serde_json::json!({
        "memories": selections.iter().map(memory_line).collect::<Vec<_>>(),
    })
}
