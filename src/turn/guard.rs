//! The claim guard: fails a turn whose final reply asserts, in the first person past tense, a
//! durable mutation that did not commit.
//!
//! Deliberately narrow, as the spec asks: it matches a first-person marker ("I", "I've", "we"...)
//! followed within a short window of the same sentence by a past-tense mutation verb, plus a few
//! memory-specific phrasings in any voice ("marked as superseded", "stored anonymously"). It does
//! not parse negation, hypotheticals or reported speech ("I didn't delete it" fails when nothing
//! was deleted): prose is not a security boundary. It exists so that ignoring the ledger is loud.

use serde::{Deserialize, Serialize};

use super::ledger::Ledger;
use crate::store::WriteOperation;

/// The kind of durable mutation a reply claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// stored, remembered, saved, recorded: needs a create or an amend.
    Stored,
    /// updated, amended, corrected, edited, revised: needs an amend.
    Updated,
    /// superseded, replaced, marked as superseded: needs an amend or a forget.
    Superseded,
    /// re-attributed, reassigned: needs an amend that changed the subject.
    Reattributed,
    /// deleted, forgot, forgotten, removed, erased, purged: needs a forget.
    Deleted,
    /// stored anonymously: this runtime never does that, so it is always false.
    StoredAnonymously,
}

/// A claim in the reply that no committed write supports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnbackedClaim {
    /// What was claimed.
    pub kind: ClaimKind,
    /// The matched words (a short phrase from the reply, for the operator).
    pub phrase: String,
}

const FIRST_PERSON: &[&str] = &["i", "i've", "ive", "i'd", "we", "we've", "weve"];
const WINDOW: usize = 8;

fn verb_kind(word: &str) -> Option<ClaimKind> {
    Some(match word {
        "stored" | "remembered" | "saved" | "recorded" | "memorized" | "memorised" => ClaimKind::Stored,
        "updated" | "amended" | "corrected" | "edited" | "revised" => ClaimKind::Updated,
        "superseded" | "replaced" | "overwrote" | "overwritten" => ClaimKind::Superseded,
        "re-attributed" | "reattributed" | "reassigned" | "re-assigned" => ClaimKind::Reattributed,
        "deleted" | "forgot" | "forgotten" | "removed" | "erased" | "purged" => ClaimKind::Deleted,
        _ => return None,
    })
}

/// Whether the ledger licenses a claim of this kind.
pub fn is_backed(kind: ClaimKind, ledger: &Ledger) -> bool {
    match kind {
        ClaimKind::Stored => ledger.has(WriteOperation::Create) || ledger.has(WriteOperation::Amend),
        ClaimKind::Updated => ledger.has(WriteOperation::Amend),
        ClaimKind::Superseded => ledger.has(WriteOperation::Amend) || ledger.has(WriteOperation::Forget),
        ClaimKind::Reattributed => ledger.has_reattribution(),
        ClaimKind::Deleted => ledger.has(WriteOperation::Forget),
        ClaimKind::StoredAnonymously => false,
    }
}

fn normalise(reply: &str) -> String {
    reply
        .chars()
        .map(|c| match c {
            '\u{2019}' | '\u{2018}' | '`' => '\'',
            '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect()
}

/// Splits into sentences, then words (letters, digits, apostrophes and inner hyphens).
fn sentences(text: &str) -> Vec<Vec<String>> {
    text.split(['.', '!', '?', ';', ':', '\n'])
        .map(|s| {
            s.split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '-'))
                .map(|w| w.trim_matches(|c| c == '\'' || c == '-').to_owned())
                .filter(|w| !w.is_empty())
                .collect::<Vec<String>>()
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// Every mutation the reply asserts (backed or not), in order of appearance.
pub fn claims(reply: &str) -> Vec<UnbackedClaim> {
    let mut found = Vec::new();
    for words in sentences(&normalise(reply)) {
        for (i, word) in words.iter().enumerate() {
            let prev = i.checked_sub(1).and_then(|p| words.get(p)).map(String::as_str);
            if word == "anonymously" || (word == "anonymous" && matches!(prev, Some("as" | "an"))) {
                found.push(UnbackedClaim { kind: ClaimKind::StoredAnonymously, phrase: phrase(&words, i) });
                continue;
            }
            let Some(kind) = verb_kind(word) else { continue };
            let first_person = words[i.saturating_sub(WINDOW)..i].iter().any(|w| FIRST_PERSON.contains(&w.as_str()));
            // Memory-specific wording in any voice: "was marked as superseded", "has been superseded".
            let any_voice = word == "superseded" || kind == ClaimKind::Reattributed;
            if first_person || any_voice {
                found.push(UnbackedClaim { kind, phrase: phrase(&words, i) });
            }
        }
    }
    found
}

fn phrase(words: &[String], at: usize) -> String {
    let start = at.saturating_sub(4);
    let end = (at + 3).min(words.len());
    words[start..end].join(" ")
}

/// The claims in `reply` that the ledger does not back. Empty means the reply passes.
pub fn unbacked_claims(reply: &str, ledger: &Ledger) -> Vec<UnbackedClaim> {
    claims(reply).into_iter().filter(|c| !is_backed(c.kind, ledger)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::CommittedWrite;

    fn write(operation: WriteOperation, subject_changed: bool) -> CommittedWrite {
        CommittedWrite::for_test(operation, subject_changed)
    }

    fn ledger(writes: &[CommittedWrite]) -> Ledger {
        Ledger { writes: writes.to_vec(), sharing_requests: vec![] }
    }

    #[test]
    fn production_incident_fails() {
        let l = ledger(&[write(WriteOperation::Create, false), write(WriteOperation::Create, false)]);
        let reply =
            "Done! I've re-attributed the earlier memory to Victor, and the earlier entry was marked as superseded. \
                     The shared workspace forced me to store it anonymously.";
        let kinds: Vec<ClaimKind> = unbacked_claims(reply, &l).into_iter().map(|c| c.kind).collect();
        assert!(kinds.contains(&ClaimKind::Reattributed));
        assert!(kinds.contains(&ClaimKind::Superseded));
        assert!(kinds.contains(&ClaimKind::StoredAnonymously));
    }

    #[test]
    fn backed_claims_pass() {
        let l = ledger(&[write(WriteOperation::Amend, false)]);
        assert!(unbacked_claims("I've updated that memory: it now says platform team.", &l).is_empty());
        assert!(!unbacked_claims("I re-attributed it to Dana.", &l).is_empty());
        let l = ledger(&[write(WriteOperation::Amend, true)]);
        assert!(unbacked_claims("I re-attributed it to Dana.", &l).is_empty());
        let l = ledger(&[write(WriteOperation::Create, false)]);
        assert!(unbacked_claims("Got it \u{2014} I\u{2019}ve stored that.", &l).is_empty());
        assert!(!unbacked_claims("I forgot it.", &l).is_empty());
    }

    #[test]
    fn unrelated_or_future_text_passes() {
        let l = Ledger::default();
        assert!(unbacked_claims("Victor prefers tabs. I will remember that if you want.", &l).is_empty());
        assert!(unbacked_claims("You could update the wiki.", &l).is_empty());
        assert!(!unbacked_claims("We saved your preference.", &l).is_empty());
    }
}
