//! Packing whole entries into the count and token allowances. An entry is admitted whole or not
//! at all: cutting a memory could change its claim ("prefers tabs, except in Go" cut after
//! "tabs"), so an entry that does not fit is skipped and reported, never truncated.
//!
//! Cost is a conservative upper bound in tokens: the UTF-8 byte length of the larger of the
//! entry's prompt line and its recall JSON, plus a fixed attribution overhead. Bytes bound tokens
//! from above for the tokenizers in use: a byte-level BPE (GPT-2, cl100k, o200k) emits tokens that
//! each cover at least one byte, and a SentencePiece model with byte fallback emits at most one
//! token per byte for any character it does not know. So `tokens <= bytes` whatever the text —
//! ids, digits and non-Latin scripts included — at the price of over-counting plain English by
//! roughly 3-4x. Model-specific tokenization is future work.

use serde::{Deserialize, Serialize};

use super::render::{prompt_line, recall_item_json};
use super::Selection;
use crate::ids::{EntryId, RevisionId};

/// Upper bound on the tokens of `text` for byte-level tokenizers: its UTF-8 length.
pub fn token_upper_bound(text: &str) -> u32 {
    u32::try_from(text.len()).unwrap_or(u32::MAX)
}

/// The cost of admitting one entry: max(prompt line, recall JSON) + attribution overhead.
pub fn entry_cost(selection: &Selection, attribution_overhead: u32) -> u32 {
    let prompt = token_upper_bound(&prompt_line(selection));
    let recall = token_upper_bound(&recall_item_json(selection));
    prompt.max(recall).saturating_add(attribution_overhead)
}

/// Why an entry was left out by packing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// It alone costs more than the whole allowance.
    LargerThanAllowance,
    /// It costs more than what higher-ranked entries left.
    LargerThanRemaining,
}

/// An entry skipped by packing (reported in results and the audit; ids and cost only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedEntry {
    /// The entry.
    pub entry_id: EntryId,
    /// Its current revision.
    pub revision_id: RevisionId,
    /// Its cost in upper-bound tokens.
    pub cost_tokens: u32,
    /// Why it was skipped.
    pub reason: SkipReason,
}

/// The outcome of packing.
pub(crate) struct Packed {
    pub selected: Vec<Selection>,
    pub skipped: Vec<SkippedEntry>,
    pub cost_tokens: u32,
}

/// Greedy in rank order: admit each entry that fits the remaining tokens until the count budget
/// is full; skip (and report) the ones that do not fit and keep going with smaller ones.
pub(crate) fn pack(ranked: Vec<Selection>, max_count: u32, token_budget: u32) -> Packed {
    let mut packed = Packed { selected: Vec::new(), skipped: Vec::new(), cost_tokens: 0 };
    for selection in ranked {
        if packed.selected.len() >= max_count as usize {
            break;
        }
        let remaining = token_budget - packed.cost_tokens;
        if selection.cost_tokens > remaining {
            let reason = if selection.cost_tokens > token_budget {
                SkipReason::LargerThanAllowance
            } else {
                SkipReason::LargerThanRemaining
            };
            packed.skipped.push(SkippedEntry {
                entry_id: selection.entry_id,
                revision_id: selection.revision_id,
                cost_tokens: selection.cost_tokens,
                reason,
            });
            continue;
        }
        packed.cost_tokens += selection.cost_tokens;
        packed.selected.push(selection);
    }
    packed
}
