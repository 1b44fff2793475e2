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
//!
//! JSON escaping would otherwise hide a copy: in `{"body": "key\nunder"}` held as text (an MCP
//! call's recorded message, a tool call's `arguments` string inside a JSON document) the `n` of
//! `\n` glues to the next word. So a text is read several ways ([`readings`]): as it is, and
//! with its JSON escape sequences decoded, once per level of nesting; a JSON document is also
//! read string by string, each string again in every reading. A `tsvector` keeps lexemes, not
//! words: [`FingerprintKey::of_lexemes`] fingerprints windows of lexemes in position order, under
//! a separate domain so a lexeme window never equals a word window.

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
pub struct FingerprintKey {
    /// HMAC keyed with the subkey, its key schedule done once: each fingerprint clones it (a
    /// person's erasure fingerprints hundreds of thousands of windows).
    keyed: Hmac<Sha256>,
}

impl FingerprintKey {
    /// Derives the subkey from the master key bytes (at least 16 bytes of secret material).
    pub fn from_master_key(master: &[u8]) -> Result<Self, WeakMasterKey> {
        let subkey = derive_subkey(master, FINGERPRINT_INFO)?;
        Ok(Self { keyed: <Hmac<Sha256> as Mac>::new_from_slice(&subkey).expect("HMAC accepts any key length") })
    }

    /// HMAC of `parts` joined by spaces, after `domain` (empty for words, so the fingerprints
    /// recorded before lexemes were added stay valid).
    fn mac(&self, domain: &[u8], parts: &[String]) -> Fingerprint {
        let mut mac = self.keyed.clone();
        mac.update(domain);
        for (i, part) in parts.iter().enumerate() {
            if i > 0 {
                mac.update(b" ");
            }
            mac.update(part.as_bytes());
        }
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; 16];
        out.copy_from_slice(&full[..16]);
        out
    }

    /// One fingerprint per window of [`WINDOW_WORDS`] parts, one of all parts when there are
    /// fewer, none below [`MIN_WORDS`].
    fn of_parts(&self, domain: &[u8], parts: &[String]) -> BTreeSet<Fingerprint> {
        if parts.len() < MIN_WORDS {
            return BTreeSet::new();
        }
        if parts.len() < WINDOW_WORDS {
            return BTreeSet::from([self.mac(domain, parts)]);
        }
        parts.windows(WINDOW_WORDS).map(|window| self.mac(domain, window)).collect()
    }

    /// The fingerprints of one text as it is (none for a text without words).
    pub fn of_text(&self, text: &str) -> BTreeSet<Fingerprint> {
        self.of_parts(b"", &words(text))
    }

    /// The fingerprints recorded for an erased text: of every one of its [`readings`], so a copy
    /// stored decoded (or escaped) is found either way.
    pub fn of_erased(&self, text: &str) -> BTreeSet<Fingerprint> {
        readings(text).iter().flat_map(|reading| self.of_text(reading)).collect()
    }

    /// The fingerprints of a sequence of `tsvector` lexemes in position order.
    pub fn of_lexemes(&self, lexemes: &[String]) -> BTreeSet<Fingerprint> {
        self.of_parts(LEXEME_DOMAIN, lexemes)
    }

    /// The fingerprints of a stored value, text or JSON: of every one of its [`readings`], and,
    /// when it is a JSON document (or a reading of it is), of each of its strings (keys too) the
    /// same way, so neither escaping nor JSON held inside a JSON string can hide a copy.
    pub fn of_stored(&self, value: &str) -> BTreeSet<Fingerprint> {
        self.of_stored_at(value, 0)
    }

    fn of_stored_at(&self, value: &str, depth: usize) -> BTreeSet<Fingerprint> {
        let mut found = BTreeSet::new();
        for reading in readings(value) {
            found.extend(self.of_text(&reading));
            if depth >= MAX_NESTING {
                continue;
            }
            let Some(doc) = json_document(&reading) else { continue };
            let mut strings = Vec::new();
            json_strings(&doc, &mut strings);
            for string in strings {
                found.extend(self.of_stored_at(string, depth + 1));
            }
        }
        found
    }
}

/// The HMAC domain of lexeme windows. Words are letters and digits only, so no word window's
/// input starts with these bytes.
const LEXEME_DOMAIN: &[u8] = b"tsvector\0";

/// How many levels of escaping (or JSON held in a JSON string) are read through.
const MAX_NESTING: usize = 4;

/// A text as it is, then decoded level after level (at most [`MAX_NESTING`] levels), each level
/// undoing the escapes text picks up on its way into a record: JSON escape sequences, then
/// URL percent-encoding (a tool call's URL), then HTML character references (a connector's
/// `&amp;`, `&#39;`). An undecodable sequence is left as it is. `key\\nunder` reads
/// `key\\nunder`, `key\nunder` and `key` + newline + `under`.
pub fn readings(text: &str) -> Vec<String> {
    let mut out = vec![text.to_owned()];
    while out.len() <= MAX_NESTING {
        let last = out.last().expect("never empty");
        let decoded = decode_once(last);
        if decoded == *last {
            break;
        }
        out.push(decoded);
    }
    out
}

/// One level of decoding: JSON escapes, percent-encoding, HTML character references.
fn decode_once(text: &str) -> String {
    let text = unescape_json(text).unwrap_or_else(|| text.to_owned());
    let text = percent_decode(&text).unwrap_or(text);
    html_unescape(&text).unwrap_or(text)
}

/// `%XX` sequences decoded (UTF-8, invalid sequences replaced); `None` when there is none.
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    if !bytes.windows(3).any(|w| w[0] == b'%' && hex(w[1]).is_some() && hex(w[2]).is_some()) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1).and_then(|&b| hex(b)), bytes.get(i + 2).and_then(|&b| hex(b))) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// HTML character references (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&apos;`, `&nbsp;`, `&#39;`,
/// `&#x27;`) decoded; `None` when there is no `&`.
fn html_unescape(text: &str) -> Option<String> {
    if !text.contains('&') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let reference = rest.find(';').filter(|&end| end <= 10).map(|end| (&rest[1..end], end));
        match reference.and_then(|(name, end)| html_reference(name).map(|c| (c, end))) {
            Some((c, end)) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

fn html_reference(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

/// `text` with every JSON escape sequence (`\n`, `\"`, `\\`, `\u00e9`, a surrogate pair...)
/// decoded; `None` when it has no backslash.
fn unescape_json(text: &str) -> Option<String> {
    if !text.contains('\\') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some(e @ ('"' | '\\' | '/')) => {
                chars.next();
                out.push(e);
            }
            Some(e @ ('n' | 't' | 'r' | 'b' | 'f')) => {
                chars.next();
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    'b' => '\u{8}',
                    _ => '\u{c}',
                });
            }
            Some('u') => {
                let mut ahead = chars.clone();
                ahead.next();
                match hex4(&mut ahead) {
                    Some(unit) => {
                        chars = ahead;
                        out.push(decode_unit(unit, &mut chars));
                    }
                    None => out.push('\\'),
                }
            }
            _ => out.push('\\'),
        }
    }
    Some(out)
}

/// Four hex digits as a UTF-16 code unit.
fn hex4(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<u16> {
    let mut unit = 0u16;
    for _ in 0..4 {
        unit = unit * 16 + chars.next()?.to_digit(16)? as u16;
    }
    Some(unit)
}

/// A `\uXXXX` code unit as a char, taking the low half of a surrogate pair from `chars` when
/// it follows; a lone surrogate reads U+FFFD.
fn decode_unit(unit: u16, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> char {
    if (0xD800..0xDC00).contains(&unit) {
        let mut ahead = chars.clone();
        if ahead.next() == Some('\\') && ahead.next() == Some('u') {
            if let Some(low @ 0xDC00..=0xDFFF) = hex4(&mut ahead) {
                *chars = ahead;
                let code = 0x10000 + ((u32::from(unit) - 0xD800) << 10) + (u32::from(low) - 0xDC00);
                return char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER);
            }
        }
    }
    char::from_u32(u32::from(unit)).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// `text` parsed as a JSON object, array or string (a bare number or word is not a document).
fn json_document(text: &str) -> Option<serde_json::Value> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with(['{', '[', '"']) {
        return None;
    }
    serde_json::from_str(trimmed).ok()
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
        assert!(!erased.is_disjoint(&key().of_stored(&doc.to_string())));
    }

    #[test]
    fn an_escaped_line_break_does_not_glue_words_at_any_level_of_nesting() {
        let erased = key().of_erased("Dana keeps the spare key\nunder the canary zebra\nquartz fennel planter");
        let body =
            serde_json::json!({"body": "Dana keeps the spare key\nunder the canary zebra\nquartz fennel planter"});
        let recorded = format!("[remember via MCP] {body}");
        assert!(key().of_text(&recorded).is_disjoint(&erased), "raw, `\\n` glues: key nunder");
        assert!(!erased.is_disjoint(&key().of_stored(&recorded)));
        let call = serde_json::json!({"arguments": body.to_string()}).to_string();
        assert!(!erased.is_disjoint(&key().of_stored(&call)));
        let twice = serde_json::json!({"wrapped": call}).to_string();
        assert!(!erased.is_disjoint(&key().of_stored(&twice)));
    }

    #[test]
    fn readings_decode_unicode_escapes_and_keep_the_raw_text() {
        assert_eq!(readings("no escapes"), vec!["no escapes"]);
        let read = readings(r"Zo\u00eb \ud83d\ude00 \u12 \q");
        assert_eq!(read[0], r"Zo\u00eb \ud83d\ude00 \u12 \q");
        assert_eq!(read[1], "Zo\u{eb} \u{1f600} \\u12 \\q");
        assert_eq!(readings(r"a\\\\nb").len(), 4, "raw, then one level decoded at a time");
        let erased = key().of_text("Zoë keeps the spare key here");
        assert!(!erased.is_disjoint(&key().of_stored(r#"{"note":"Zo\u00eb keeps the spare key here"}"#)));
    }

    #[test]
    fn percent_encoding_and_html_references_are_read_through() {
        let erased = key().of_text("Dana's spare key is under the planter");
        let url = "https://search.example/?q=Dana%27s%20spare%20key%20is%20under%20the%20planter";
        assert!(key().of_text(url).is_disjoint(&erased), "raw, %20 glues: 20spare");
        assert!(!erased.is_disjoint(&key().of_stored(url)));
        let html = "Dana&#39;s&nbsp;spare key is under&#x20;the planter &amp; more";
        assert!(!erased.is_disjoint(&key().of_stored(html)));
        assert_eq!(readings("100% & 50%zz &unknown; &#xZZ;"), vec!["100% & 50%zz &unknown; &#xZZ;"]);
    }

    #[test]
    fn lexeme_windows_never_equal_word_windows() {
        let parts: Vec<String> = ["dana", "keep", "spare", "key"].map(String::from).to_vec();
        assert!(key().of_lexemes(&parts).is_disjoint(&key().of_text("dana keep spare key")));
        assert_eq!(key().of_lexemes(&parts[..2]).len(), 0);
    }

    #[test]
    fn a_short_text_matches_only_itself_and_a_word_or_two_not_at_all() {
        let erased = key().of_text("see you tomorrow");
        assert!(!erased.is_disjoint(&key().of_text("See you, tomorrow!")));
        assert!(erased.is_disjoint(&key().of_text("oh see you tomorrow friend")));
        assert!(key().of_text("thanks Dana").is_empty());
    }

    #[test]
    fn a_word_window_is_the_keyed_hmac_of_its_words_joined_by_spaces() {
        // Fingerprints recorded by earlier erasures must still match: the input is unchanged.
        let subkey = derive_subkey(b"0123456789abcdef0123456789abcdef", FINGERPRINT_INFO).unwrap();
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&subkey).unwrap();
        mac.update(b"see you tomorrow");
        let expected: Fingerprint = mac.finalize().into_bytes()[..16].try_into().unwrap();
        assert_eq!(key().of_text("See you, tomorrow!"), BTreeSet::from([expected]));
    }

    #[test]
    fn another_key_gives_other_fingerprints() {
        let other = FingerprintKey::from_master_key(b"another secret of thirty-two byt").unwrap();
        assert!(key().of_text("one two three four").is_disjoint(&other.of_text("one two three four")));
        assert!(FingerprintKey::from_master_key(b"short").is_err());
    }
}
