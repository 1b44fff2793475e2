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
//! roughly 3-4x. With a model tokenizer configured, the same representations are counted in its
//! tokens instead ([`super::tokens`]).

use serde::{Deserialize, Serialize};

use super::render::{memory_line_skeleton, prompt_line, recall_item_json};
use super::tokens::{CostBound, TokenCounter};
use super::Selection;
use crate::ids::{EntryId, RevisionId};

/// Upper bound on the tokens of `text` for byte-level tokenizers: its UTF-8 length
/// ([`super::tokens::ByteBound`], the one definition).
pub fn token_upper_bound(text: &str) -> u32 {
    super::tokens::ByteBound.count(text)
}

/// The cost of admitting one entry: max(prompt line, recall JSON) + attribution overhead, each
/// representation counted by `counter` (the byte bound unless a model tokenizer is configured).
pub fn entry_cost(selection: &Selection, attribution_overhead: u32, counter: &dyn TokenCounter) -> u32 {
    let prompt = counter.count(&prompt_line(selection));
    let recall = counter.count(&recall_item_json(selection));
    prompt.max(recall).saturating_add(attribution_overhead)
}

/// A lower bound on [`entry_cost`] known before the entry is read: the recall JSON of the entry's
/// line with its id and the shortest rendering of everything else (empty body, labels and place,
/// a one-digit revision, not always-on), plus the overhead. Every real rendering only adds characters,
/// so an entry whose floor exceeds what is left of the allowance cannot fit, and packing need not
/// read it. Only the byte bound grows with every added character; under a model tokenizer the
/// floor is the overhead alone.
pub fn entry_cost_floor(entry: EntryId, attribution_overhead: u32, counter: &dyn TokenCounter) -> u32 {
    if counter.bound() != CostBound::Bytes {
        return attribution_overhead;
    }
    let skeleton = memory_line_skeleton(entry);
    let json = serde_json::to_string(&skeleton).expect("strings serialize");
    token_upper_bound(&json).saturating_add(attribution_overhead)
}

/// Why an entry was left out by packing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// It alone costs more than the whole allowance.
    LargerThanAllowance,
    /// It costs more than what higher-ranked entries left.
    LargerThanRemaining,
}

/// An entry skipped by packing (reported in results and the audit; ids and cost only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "specta", derive(specta::Type))]
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

/// Greedy packing in rank order, fed one entry at a time so that the caller renders (and resolves
/// provenance for) only the entries packing actually looks at: admit each entry that fits the
/// remaining tokens until the count budget is full; skip (and report) the ones that do not fit and
/// keep going with smaller ones.
pub(crate) struct Packer {
    max_count: usize,
    token_budget: u32,
    packed: Packed,
}

impl Packer {
    pub fn new(max_count: u32, token_budget: u32) -> Self {
        Packer {
            max_count: max_count as usize,
            token_budget,
            packed: Packed { selected: Vec::new(), skipped: Vec::new(), cost_tokens: 0 },
        }
    }

    /// Whether the count budget is exhausted (nothing more will be admitted or skipped).
    pub fn is_full(&self) -> bool {
        self.packed.selected.len() >= self.max_count
    }

    /// Whether packing should read an entry whose cost is at least `floor`
    /// ([`entry_cost_floor`]): it may fit what is left, or it is larger than the whole allowance
    /// (read so that it is reported as oversized). An entry that fits the allowance but provably
    /// not what is left is passed over unread and unreported: only [`Packer::offer`]ed entries
    /// are listed as skipped.
    pub fn worth_reading(&self, floor: u32) -> bool {
        floor <= self.token_budget - self.packed.cost_tokens || floor > self.token_budget
    }

    /// Admits the entry whole if it fits, else records it as skipped. Never truncates.
    pub fn offer(&mut self, selection: Selection) {
        if self.is_full() {
            return;
        }
        let remaining = self.token_budget - self.packed.cost_tokens;
        if selection.cost_tokens > remaining {
            let reason = if selection.cost_tokens > self.token_budget {
                SkipReason::LargerThanAllowance
            } else {
                SkipReason::LargerThanRemaining
            };
            self.packed.skipped.push(SkippedEntry {
                entry_id: selection.entry_id,
                revision_id: selection.revision_id,
                cost_tokens: selection.cost_tokens,
                reason,
            });
            return;
        }
        self.packed.cost_tokens += selection.cost_tokens;
        self.packed.selected.push(selection);
    }

    pub fn finish(self) -> Packed {
        self.packed
    }
}

/// Packs a ranked list at once (see [`Packer`]).
#[cfg(test)]
pub(crate) fn pack(ranked: Vec<Selection>, max_count: u32, token_budget: u32) -> Packed {
    let mut packer = Packer::new(max_count, token_budget);
    for selection in ranked {
        packer.offer(selection);
    }
    packer.finish()
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::retrieval::{Components, Provenance};

    fn selection(body: &str) -> Selection {
        let components = Components {
            sources: vec![],
            lexical: None,
            semantic: None,
            subject_boost: 0.0,
            subject_match: None,
            conversation_boost: 0.0,
            recency: 0.0,
            period_boost: 0.0,
            period: None,
            always_on: 0.0,
        };
        let mut s = Selection {
            entry_id: EntryId::generate(),
            revision_id: RevisionId::generate(),
            revision_number: 1,
            body: body.to_owned(),
            subject: None,
            source: None,
            provenance: Provenance::Unrecorded,
            learned_at: Utc::now(),
            always_on: false,
            score: 0.0,
            reason: components.reason(),
            components,
            cost_tokens: 0,
        };
        s.cost_tokens = entry_cost(&s, 16, &crate::retrieval::tokens::ByteBound);
        s
    }

    /// A one-line memory as the demo's prompts hold them.
    fn typical() -> Selection {
        let victor =
            crate::retrieval::ActorRef { id: crate::ids::ActorId::generate(), label: "Victor (id U123)".into() };
        let mut s = selection("Insists on tabs over spaces.");
        s.subject = Some(victor.clone());
        s.source = Some(victor);
        s.provenance = Provenance::ThisConversation;
        // The longest day a line can say ("30 September 2023").
        s.learned_at = chrono::TimeZone::with_ymd_and_hms(&Utc, 2023, 9, 30, 13, 56, 0).unwrap();
        s.components.lexical = Some(crate::retrieval::RankContribution { rank: 1, rrf: 1.0 / 61.0 });
        s.score = s.components.total();
        s.reason = s.components.reason();
        s.cost_tokens = entry_cost(&s, 16, &crate::retrieval::tokens::ByteBound);
        s
    }

    #[test]
    fn a_typical_one_line_memory_costs_its_text_not_its_ranking() {
        let s = typical();
        let json = recall_item_json(&s);
        for audit_only in ["score", "components", "reason", "rank", "rrf"] {
            assert!(!json.contains(audit_only), "{audit_only} reached the model's JSON: {json}");
        }
        // One line with the short entry id and the day it was told: 159 under the byte bound
        // (138 before the day, where two full UUIDs made it 247 and the ranking data 745-830).
        assert!(s.cost_tokens <= 160, "a one-line memory costs {} of the allowance: {json}", s.cost_tokens);
        assert!(json.contains(" on 30 September 2023 in this conversation: "), "{json}");
        assert!(4096 / s.cost_tokens >= 20, "at least 20 such memories fit the default allowance");
        assert!(!json.contains(&s.entry_id.to_string()), "the full id is not what the model pays for");
        assert!(json.contains(&format!("[{} rev 1]", s.entry_id.short())), "{json}");
    }

    #[test]
    fn the_upper_bound_counts_bytes_so_multibyte_text_is_never_undercounted() {
        assert_eq!(token_upper_bound("tabs"), 4);
        assert_eq!(token_upper_bound("日本語"), 9, "three 3-byte characters");
        let s = selection("日本語のメモ");
        assert!(s.cost_tokens >= token_upper_bound(&recall_item_json(&s)) + 16);
    }

    #[test]
    fn the_cost_floor_never_exceeds_the_cost_of_any_rendering_of_the_entry() {
        let components = Components {
            sources: vec![crate::retrieval::CandidateSource::Lexical],
            lexical: Some(crate::retrieval::RankContribution { rank: 3, rrf: 0.015873015873015872 }),
            semantic: None,
            subject_boost: 0.05,
            subject_match: Some(crate::retrieval::SubjectMatch::CurrentSpeaker),
            conversation_boost: 0.0,
            recency: 0.012345678901234,
            period_boost: 0.0,
            period: None,
            always_on: 0.0,
        };
        let mut s = selection("");
        s.components = components.clone();
        s.score = components.total();
        s.reason = components.reason();
        let floor = entry_cost_floor(s.entry_id, 16, &crate::retrieval::tokens::ByteBound);
        let actor =
            |label: &str| crate::retrieval::ActorRef { id: crate::ids::ActorId::generate(), label: label.into() };
        let conversation = crate::ids::ConversationId::generate();
        for provenance in [
            Provenance::Unrecorded,
            Provenance::ThisConversation,
            Provenance::OtherConversation,
            Provenance::SharedConversation { conversation_id: conversation, title: String::new() },
        ] {
            for (subject, source) in [(None, None), (Some(actor("")), Some(actor("V"))), (None, Some(actor("")))] {
                for (always_on, number, body) in [(false, 1, ""), (true, 12, "x"), (false, 1, "\"tabs\"")] {
                    let mut variant = s.clone();
                    variant.provenance = provenance.clone();
                    variant.subject = subject.clone();
                    variant.source = source.clone();
                    variant.always_on = always_on;
                    variant.revision_number = number;
                    variant.body = body.into();
                    let cost = entry_cost(&variant, 16, &crate::retrieval::tokens::ByteBound);
                    assert!(floor <= cost, "floor {floor} > cost {cost} of {variant:?}");
                }
            }
        }
        assert!(floor >= 16 + 12, "the floor counts at least the short id");
    }

    #[test]
    fn an_entry_is_worth_reading_if_it_may_fit_what_is_left_or_is_oversized() {
        let mut packer = Packer::new(8, 1000);
        let small = selection("short");
        packer.offer(small.clone());
        let left = 1000 - small.cost_tokens;
        assert!(packer.worth_reading(left));
        assert!(!packer.worth_reading(left + 1), "fits the allowance, provably not what is left");
        assert!(packer.worth_reading(1001), "oversized entries are read so that they are reported");
    }

    #[test]
    fn packing_skips_what_does_not_fit_keeps_going_and_never_cuts() {
        let small = selection("short");
        let big = selection(&"x".repeat(3000));
        let budget = small.cost_tokens * 2 + 10;
        let packed = pack(vec![small.clone(), big.clone(), small.clone()], 8, budget);
        assert_eq!(packed.selected.len(), 2);
        assert!(packed.selected.iter().all(|s| s.body == "short"));
        assert_eq!(packed.skipped.len(), 1);
        assert_eq!(packed.skipped[0].entry_id, big.entry_id);
        assert_eq!(packed.skipped[0].reason, SkipReason::LargerThanAllowance);
        assert_eq!(packed.cost_tokens, small.cost_tokens * 2);
        let packed = pack(vec![small.clone(), small.clone(), small], 2, 100_000);
        assert_eq!(packed.selected.len(), 2, "the count budget stops packing");
    }
}
