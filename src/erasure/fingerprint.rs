//! Keyed fingerprints of erased text, so `erase verify` can find a surviving copy without the
//! database keeping the text or anything a guess could be checked against.
//!
//! A text is cut into words (runs of letters and digits, lower-cased); every window of
//! [`WINDOW_WORDS`] consecutive words is one fingerprint, and a text shorter than that is one
//! fingerprint of all its words. A text of fewer than [`MIN_WORDS`] words ("ok", "thanks Dana")
//! is not fingerprinted: it cannot be told apart from anyone else's same words, so a scan for it
//! would only report other people's messages. A fingerprint is the first 16 bytes of HMAC-SHA256 under a
//! subkey of `MESH_AGENT_MASTER_KEY`, which the database never holds: a dump of it cannot
//! confirm a guessed phrase. Any stored string sharing a window with an erased text (whatever its
//! punctuation, case or JSON escaping) matches, and a short erased text matches only a string
//! that is exactly its words.

use std::collections::BTreeSet;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::retrieval::config::derive_subkey;
use crate::retrieval::WeakMasterKey;

/// Words per fingerprint window: long enough that two people's texts rarely share one by
/// chance, short enough that a quotation inside a longer text is found.
pub const WINDOW_WORDS: usize = 6;

/// The fewest words a text needs to be fingerprinted.
pub const MIN_WORDS: usize = 3;

/// The HKDF info of the fingerprint subkey (distinct from the audit digest's, so one key's
/// outputs say nothing about the other's).
pub const FINGERPRINT_INFO: &[u8] = b"mesh-memory/erasure-fingerprint/v1";

/// One fingerprint: 16 bytes of a keyed HMAC.
pub type Fingerprint = [u8; 16];

/// The fingerprint key, an HKDF-SHA256 subkey of the master key.
#[derive(Clone)]
pub struct FingerprintKey([u8; 32]);

impl FingerprintKey {
    /// Derives the subkey from the master key bytes (at least 16 bytes of secret material).
    pub fn from_master_key(master: &[u8]) -> Result<Self, WeakMasterKey> {
        derive_subkey(master, FINGERPRINT_INFO).map(Self)
    }

    fn mac(&self, words: &[String]) -> Fingerprint {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).expect("HMAC accepts any key length");
        mac.update(words.join(" ").as_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// The fingerprints of one text (none for a text without words).
    pub fn of_text(&self, text: &str) -> BTreeSet<Fingerprint> {
        let words = words(text);
        if words.len() < MIN_WORDS {
            return BTreeSet::new();
        }
        if words.len() < WINDOW_WORDS {
            return BTreeSet::from([self.mac(&words)]);
        }
        words.windows(WINDOW_WORDS).map(|window| self.mac(window)).collect()
    }

    /// The fingerprints of a stored value: a text as it is; a JSON document string by string
    /// (keys too), so escaping cannot hide a copy.
    pub fn of_stored(&self, value: &str, is_json: bool) -> BTreeSet<Fingerprint> {
        if !is_json {
            return self.of_text(value);
        }
        match serde_json::from_str::<serde_json::Value>(value) {
            Ok(doc) => {
                let mut strings = Vec::new();
                json_strings(&doc, &mut strings);
                strings.iter().flat_map(|s| self.of_text(s)).collect()
            }
            Err(_) => self.of_text(value),
        }
    }
}

impl std::fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FingerprintKey(<redacted>)")
    }
}

/// The words of a text: maximal runs of letters and digits, lower-cased.
pub fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_lowercase).collect()
}

fn json_strings<'a>(doc: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match doc {
        serde_json::Value::String(s) => out.push(s),
        serde_json::Value::Array(items) => items.iter().for_each(|v| json_strings(v, out)),
        serde_json::Value::Object(map) => map.iter().for_each(|(k, v)| {
            out.push(k);
            json_strings(v, out);
        }),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> FingerprintKey {
        FingerprintKey::from_master_key(b"0123456789abcdef0123456789abcdef").unwrap()
    }

    #[test]
    fn a_copy_inside_other_text_shares_a_window_whatever_its_case_and_punctuation() {
        let erased = key().of_text("Dana's door code is 4711, remember it");
        let stored = key().of_text("The assistant said: DANA'S door code is 4711!");
        assert!(!erased.is_disjoint(&stored));
        assert!(erased.is_disjoint(&key().of_text("Dana likes green tea in the morning")));
    }

    #[test]
    fn json_escaping_does_not_hide_a_copy() {
        let erased = key().of_text("she said \"the vault code is 9931\" twice");
        let doc = serde_json::json!({"arguments": "{\"body\":\"she said \\\"the vault code is 9931\\\" twice\"}"});
        assert!(!erased.is_disjoint(&key().of_stored(&doc.to_string(), true)));
    }

    #[test]
    fn a_short_text_matches_only_itself_and_a_word_or_two_not_at_all() {
        let erased = key().of_text("see you tomorrow");
        assert!(!erased.is_disjoint(&key().of_text("See you, tomorrow!")));
        assert!(erased.is_disjoint(&key().of_text("oh see you tomorrow friend")));
        assert!(key().of_text("thanks Dana").is_empty());
    }

    #[test]
    fn another_key_gives_other_fingerprints() {
        let other = FingerprintKey::from_master_key(b"another secret of thirty-two byt").unwrap();
        assert!(key().of_text("one two three four").is_disjoint(&other.of_text("one two three four")));
        assert!(FingerprintKey::from_master_key(b"short").is_err());
    }
}
