//! The one check of every text an operator sends (reasons, notes, labels, role names, passwords,
//! speaker ids), made by every action of the operator layer before anything reaches the database.
//! A NUL character used to reach PostgreSQL and come back as a generic "database error"; an
//! over-long role name is silently truncated by the server to 63 bytes (and may then name another
//! role); a control character in a label or a reason is printed as is by `token list` and the
//! audit views. Each is refused here with a typed error naming the field, and nothing is written.

use chrono::{DateTime, Utc};

/// Why an operator's text was refused. Nothing was sent to the database.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field} {problem}")]
pub struct InputRefused {
    /// The field, as the shells name it (`reason`, `label`, `role`, `password`...).
    pub field: &'static str,
    /// What is wrong with it.
    pub problem: InputProblem,
}

/// What is wrong with a text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputProblem {
    /// Empty, or only white space, where a value is required.
    #[error("is required (it is empty or only spaces)")]
    Empty,
    /// Holds a NUL character, which PostgreSQL text cannot store.
    #[error("must not contain NUL characters")]
    Nul,
    /// Holds another control character (an escape sequence, a line break in a one-line field).
    #[error("must not contain control characters{0}")]
    Control(&'static str),
    /// Not in the field's format; the text says which.
    #[error("is not {0}")]
    Malformed(&'static str),
    /// A time that has passed where a future one is required.
    #[error("is not in the future")]
    Past,
    /// Longer than the field's limit.
    #[error("is {length} {unit}; at most {limit} are accepted")]
    TooLong {
        /// Its length.
        length: usize,
        /// The limit.
        limit: usize,
        /// `characters`, or `bytes` where the server counts bytes (role names).
        unit: &'static str,
    },
}

/// The rule of one field.
#[derive(Clone, Copy, Debug)]
pub struct TextRule {
    /// The field's name in errors.
    pub field: &'static str,
    /// Whether an empty (or all-space) value is refused.
    pub required: bool,
    /// The longest accepted value, in characters (bytes for role names).
    pub max: usize,
    /// Whether line breaks and tabs are allowed (multi-line reasons and notes).
    pub multi_line: bool,
    /// Whether `max` counts bytes rather than characters.
    pub bytes: bool,
}

/// The reason every operator action records (`operator_actions.reason`: 1 to 2000 characters).
pub const REASON: TextRule = TextRule { field: "reason", required: true, max: 2000, multi_line: true, bytes: false };
/// An evidence review's note (recorded as the action's reason).
pub const NOTE: TextRule = TextRule { field: "note", ..REASON };
/// An access token's label (`mcp_access_tokens.label`: at most 200 characters, may be empty).
pub const LABEL: TextRule = TextRule { field: "label", required: false, max: 200, multi_line: false, bytes: false };
/// A login role name: PostgreSQL keeps 63 bytes of an identifier and drops the rest.
pub const ROLE: TextRule = TextRule { field: "role", required: true, max: 63, multi_line: false, bytes: true };
/// A password (never trimmed: spaces inside or around it are part of it).
pub const PASSWORD: TextRule =
    TextRule { field: "password", required: true, max: 1000, multi_line: false, bytes: false };
/// A speaker's connector id (`connector_identities.external_id`: at most 200 characters).
pub const SPEAKER: TextRule = TextRule { field: "speaker", required: true, max: 200, multi_line: false, bytes: false };

/// Checks `text` against `rule`.
pub fn check(rule: TextRule, text: &str) -> Result<(), InputRefused> {
    let refuse = |problem| Err(InputRefused { field: rule.field, problem });
    if text.contains('\0') {
        return refuse(InputProblem::Nul);
    }
    let allowed = |c: char| rule.multi_line && matches!(c, '\n' | '\r' | '\t');
    if text.chars().any(|c| c.is_control() && !allowed(c)) {
        let hint = if rule.multi_line { "" } else { " (it is one line)" };
        return refuse(InputProblem::Control(hint));
    }
    if rule.required && text.trim().is_empty() {
        return refuse(InputProblem::Empty);
    }
    let (length, unit) = if rule.bytes { (text.len(), "bytes") } else { (text.chars().count(), "characters") };
    if length > rule.max {
        return refuse(InputProblem::TooLong { length, limit: rule.max, unit });
    }
    Ok(())
}

/// The expiry of a token an operator asks for: `expires_in` (a number and a unit, `m`, `h`, `d`
/// or `w`: `30d`) from `now`, or `expires_at` (RFC 3339, or a date meaning midnight UTC), or none.
/// Refused when unreadable, not in the future, or more than ten years away.
pub fn token_expiry(
    expires_in: Option<&str>,
    expires_at: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Option<DateTime<Utc>>, InputRefused> {
    let at = match (expires_in, expires_at) {
        (Some(_), Some(_)) => {
            return Err(InputRefused { field: "expires_at", problem: InputProblem::Malformed("given with expires_in") })
        }
        (Some(span), None) => now + duration(span)?,
        (None, Some(at)) => instant(at)?,
        (None, None) => return Ok(None),
    };
    if at <= now {
        return Err(InputRefused { field: "expires_at", problem: InputProblem::Past });
    }
    Ok(Some(at))
}

/// `30d`, `12h`, `90m`, `2w`: at least one minute, at most ten years.
fn duration(span: &str) -> Result<chrono::TimeDelta, InputRefused> {
    let malformed = InputRefused {
        field: "expires_in",
        problem: InputProblem::Malformed("a number and a unit, m, h, d or w, from 1 minute to 10 years (e.g. 30d)"),
    };
    let span = span.trim();
    let split = span.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| malformed.clone())?;
    let count: i64 = span[..split].parse().map_err(|_| malformed.clone())?;
    let minutes = match &span[split..] {
        "m" => Some(count),
        "h" => count.checked_mul(60),
        "d" => count.checked_mul(60 * 24),
        "w" => count.checked_mul(60 * 24 * 7),
        _ => None,
    };
    match minutes {
        Some(minutes @ 1..=MAX_EXPIRY_MINUTES) => Ok(chrono::TimeDelta::minutes(minutes)),
        _ => Err(malformed),
    }
}

/// Ten years, in minutes: the furthest expiry accepted (a typo such as `3000w` is refused).
const MAX_EXPIRY_MINUTES: i64 = 10 * 366 * 24 * 60;

/// RFC 3339, or a calendar date (midnight UTC).
fn instant(at: &str) -> Result<DateTime<Utc>, InputRefused> {
    let at = at.trim();
    if let Ok(at) = DateTime::parse_from_rfc3339(at) {
        return Ok(at.with_timezone(&Utc));
    }
    chrono::NaiveDate::parse_from_str(at, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|midnight| midnight.and_utc())
        .ok_or(InputRefused {
            field: "expires_at",
            problem: InputProblem::Malformed("an RFC 3339 time (2027-01-31T18:00:00Z) or a date (2027-01-31)"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_bad_text_is_refused_naming_the_field() {
        let problem = |rule, text: &str| check(rule, text).map_err(|e| (e.field, e.problem));
        assert_eq!(problem(REASON, "ticket 42\nsee thread"), Ok(()));
        assert_eq!(problem(REASON, "a\0b"), Err(("reason", InputProblem::Nul)));
        assert_eq!(problem(REASON, " \t "), Err(("reason", InputProblem::Empty)));
        assert_eq!(problem(NOTE, "\u{1b}[2J"), Err(("note", InputProblem::Control(""))));
        let long = "é".repeat(2001);
        let too_long = InputProblem::TooLong { length: 2001, limit: 2000, unit: "characters" };
        assert_eq!(problem(REASON, &long), Err(("reason", too_long)));
        assert_eq!(problem(REASON, &"é".repeat(2000)), Ok(()));
        assert_eq!(problem(LABEL, ""), Ok(()), "a label may be empty");
        assert_eq!(problem(LABEL, "a\nb"), Err(("label", InputProblem::Control(" (it is one line)"))));
        let role = InputProblem::TooLong { length: 64, limit: 63, unit: "bytes" };
        assert_eq!(problem(ROLE, &"r".repeat(64)), Err(("role", role)));
        assert_eq!(problem(PASSWORD, "  spaced out  "), Ok(()));
        assert_eq!(problem(PASSWORD, "pass\0word"), Err(("password", InputProblem::Nul)));
        let shown = check(REASON, "x\0").unwrap_err().to_string();
        assert_eq!(shown, "reason must not contain NUL characters");
    }

    #[test]
    fn token_expiries_are_read_in_the_future_or_refused() {
        let now = DateTime::parse_from_rfc3339("2026-12-19T12:00:00Z").unwrap().with_timezone(&Utc);
        let at = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
        assert_eq!(token_expiry(None, None, now), Ok(None));
        assert_eq!(token_expiry(Some("30d"), None, now), Ok(Some(at("2027-01-18T12:00:00Z"))));
        assert_eq!(token_expiry(Some("90m"), None, now), Ok(Some(at("2026-12-19T13:30:00Z"))));
        assert_eq!(token_expiry(Some("2w"), None, now), Ok(Some(at("2027-01-02T12:00:00Z"))));
        assert_eq!(token_expiry(None, Some("2027-01-31"), now), Ok(Some(at("2027-01-31T00:00:00Z"))));
        assert_eq!(token_expiry(None, Some("2027-01-31T18:00:00+01:00"), now), Ok(Some(at("2027-01-31T17:00:00Z"))));
        for bad in ["", "30", "d", "0d", "-1d", "30 days", "1y", "99999999999999999999d", "600w"] {
            let refused = token_expiry(Some(bad), None, now).unwrap_err();
            assert_eq!(refused.field, "expires_in", "{bad:?}");
        }
        let past = token_expiry(None, Some("2026-12-19"), now).unwrap_err();
        assert_eq!(past.problem, InputProblem::Past);
        assert!(token_expiry(None, Some("next week"), now).is_err());
        assert!(token_expiry(Some("1d"), Some("2027-01-01"), now).is_err());
    }
}
