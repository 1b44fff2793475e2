//! Reading LoCoMo-format data sets (a list of samples, each a two-speaker conversation in sessions,
//! with question/answer items that cite the dialogue turns holding their evidence).
//!
//! The data set is read from a path and never vendored: its licence (CC BY-NC 4.0) forbids it.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Duration, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde::Deserialize;

/// Why a LoCoMo file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LocomoError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The path given.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not LoCoMo JSON.
    #[error("{path} is not LoCoMo-format JSON: {source}")]
    Parse {
        /// The path given.
        path: String,
        /// What serde said.
        source: serde_json::Error,
    },
    /// A sample lacks something the evaluation needs.
    #[error("sample {sample}: {problem}")]
    Malformed {
        /// The sample id.
        sample: String,
        /// What is wrong.
        problem: String,
    },
}

#[derive(Deserialize)]
struct RawSample {
    sample_id: String,
    conversation: BTreeMap<String, serde_json::Value>,
    qa: Vec<RawQa>,
}

#[derive(Deserialize)]
struct RawTurn {
    speaker: String,
    dia_id: String,
    text: String,
    #[serde(default)]
    blip_caption: Option<String>,
}

#[derive(Deserialize)]
struct RawQa {
    question: String,
    #[serde(default)]
    evidence: Vec<String>,
    #[serde(default)]
    category: Option<i64>,
    /// A string, or a bare number for some questions (`2020`); absent in category 5.
    #[serde(default)]
    answer: Option<serde_json::Value>,
}

/// One dialogue turn: it becomes one memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// The turn id cited by evidence, e.g. `D1:3`.
    pub dia_id: String,
    /// Who said it (becomes the memory's subject and source).
    pub speaker: String,
    /// The text, with an image caption appended when the turn shared one.
    pub text: String,
    /// The session number it belongs to (its source conversation).
    pub session: u32,
    /// When it was said: its session's `session_N_date_time` (`1:56 pm on 8 May, 2023`, read as
    /// UTC) plus one second per earlier turn of the session, so turns keep their order. `None`
    /// when the session has no readable date.
    pub said_at: Option<DateTime<Utc>>,
}

/// One question with the turns that hold its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The question text.
    pub question: String,
    /// Cited dialogue turn ids.
    pub evidence: Vec<String>,
    /// LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial).
    pub category: i64,
    /// The gold answer as text (empty when the item has none, as in category 5).
    pub answer: String,
}

/// One two-speaker conversation with its questions.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Sample id.
    pub id: String,
    /// The two speakers.
    pub speakers: [String; 2],
    /// Every turn in session order.
    pub turns: Vec<Turn>,
    /// Questions that cite evidence.
    pub questions: Vec<Question>,
}

impl Sample {
    /// The speaker of a turn, if the id exists.
    pub fn speaker_of(&self, dia_id: &str) -> Option<&str> {
        self.turns.iter().find(|t| t.dia_id == dia_id).map(|t| t.speaker.as_str())
    }

    /// The speaker who asks a question: the other speaker of the first evidence turn.
    pub fn asker(&self, question: &Question) -> &str {
        let evidence_speaker = question.evidence.iter().find_map(|e| self.speaker_of(e));
        match evidence_speaker {
            Some(s) if s == self.speakers[0] => &self.speakers[1],
            _ => &self.speakers[0],
        }
    }
}

/// Evidence ids are sometimes written as "D1:3; D2:4" inside one string: split them.
fn split_evidence(raw: &[String]) -> Vec<String> {
    raw.iter()
        .flat_map(|e| e.split([';', ',', ' ']))
        .map(str::trim)
        .filter(|e| e.starts_with('D') && e.contains(':'))
        .map(str::to_owned)
        .collect()
}

/// A session time as LoCoMo writes it, `1:56 pm on 8 May, 2023` (the comma optional, any case),
/// read as UTC; `None` when it is not of that form.
pub fn parse_session_time(text: &str) -> Option<DateTime<Utc>> {
    let cleaned = text.replace(',', " ");
    let parts: Vec<&str> = cleaned.split_whitespace().collect();
    let [clock, meridiem, "on", day, month, year] = parts.as_slice() else { return None };
    let (hour, minute) = clock.split_once(':')?;
    let (mut hour, minute): (u32, u32) = (hour.parse().ok()?, minute.parse().ok()?);
    match meridiem.to_ascii_lowercase().as_str() {
        "am" if hour == 12 => hour = 0,
        "am" => {}
        "pm" if hour < 12 => hour += 12,
        "pm" => {}
        _ => return None,
    }
    let month = crate::retrieval::when::MONTHS.iter().position(|m| m.eq_ignore_ascii_case(month))? as u32 + 1;
    let date = NaiveDate::from_ymd_opt(year.parse().ok()?, month, day.parse().ok()?)?;
    let time = NaiveTime::from_hms_opt(hour, minute, 0)?;
    Some(NaiveDateTime::new(date, time).and_utc())
}

fn session_turns(
    sample: &str,
    key: &str,
    value: &serde_json::Value,
    started: Option<DateTime<Utc>>,
) -> Result<Vec<Turn>, LocomoError> {
    let session: u32 = key["session_".len()..]
        .parse()
        .map_err(|_| LocomoError::Malformed { sample: sample.to_owned(), problem: format!("unexpected key {key}") })?;
    let raw: Vec<RawTurn> = serde_json::from_value(value.clone())
        .map_err(|e| LocomoError::Malformed { sample: sample.to_owned(), problem: format!("{key}: {e}") })?;
    Ok(raw
        .into_iter()
        .enumerate()
        .map(|(i, t)| Turn {
            said_at: started.map(|at| at + Duration::seconds(i as i64)),
            text: match t.blip_caption {
                Some(caption) if !caption.trim().is_empty() => {
                    format!("{} [shared an image: {}]", t.text, caption.trim())
                }
                _ => t.text,
            },
            dia_id: t.dia_id,
            speaker: t.speaker,
            session,
        })
        .filter(|t| !t.text.trim().is_empty())
        .collect())
}

fn speaker(sample: &str, conversation: &BTreeMap<String, serde_json::Value>, key: &str) -> Result<String, LocomoError> {
    conversation
        .get(key)
        .and_then(|v| v.as_str())
        .map(str::to_owned)
        .ok_or_else(|| LocomoError::Malformed { sample: sample.to_owned(), problem: format!("missing {key}") })
}

/// Reads a LoCoMo JSON file.
pub fn read(path: &Path) -> Result<Vec<Sample>, LocomoError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| LocomoError::Read { path: shown.clone(), source })?;
    let raw: Vec<RawSample> =
        serde_json::from_str(&text).map_err(|source| LocomoError::Parse { path: shown, source })?;
    raw.into_iter().map(convert).collect()
}

fn convert(raw: RawSample) -> Result<Sample, LocomoError> {
    let id = raw.sample_id;
    let speakers = [speaker(&id, &raw.conversation, "speaker_a")?, speaker(&id, &raw.conversation, "speaker_b")?];
    let mut sessions: Vec<(u32, Vec<Turn>)> = Vec::new();
    for (key, value) in &raw.conversation {
        if key.starts_with("session_") && !key.ends_with("date_time") && value.is_array() {
            let started =
                raw.conversation.get(&format!("{key}_date_time")).and_then(|v| v.as_str()).and_then(parse_session_time);
            let turns = session_turns(&id, key, value, started)?;
            sessions.push((turns.first().map_or(0, |t| t.session), turns));
        }
    }
    sessions.sort_by_key(|(n, _)| *n);
    let turns: Vec<Turn> = sessions.into_iter().flat_map(|(_, t)| t).collect();
    let questions = raw
        .qa
        .into_iter()
        .map(|q| Question {
            evidence: split_evidence(&q.evidence),
            question: q.question,
            category: q.category.unwrap_or(0),
            answer: match q.answer {
                Some(serde_json::Value::String(text)) => text,
                Some(serde_json::Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            },
        })
        .filter(|q| !q.evidence.is_empty() && !q.question.trim().is_empty())
        .collect();
    Ok(Sample { id, speakers, turns, questions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_times_read_as_locomo_writes_them() {
        let at = |t: &str| parse_session_time(t).map(|d| d.to_rfc3339());
        assert_eq!(at("1:56 pm on 8 May, 2023").as_deref(), Some("2023-05-08T13:56:00+00:00"));
        assert_eq!(at("12:09 am on 13 September, 2023").as_deref(), Some("2023-09-13T00:09:00+00:00"));
        assert_eq!(at("10:31 AM on 2 february 2022").as_deref(), Some("2022-02-02T10:31:00+00:00"));
        assert_eq!(at("12:30 pm on 1 June, 2023").as_deref(), Some("2023-06-01T12:30:00+00:00"));
        assert_eq!(at("yesterday"), None);
        assert_eq!(at("1:56 pm on 31 February, 2023"), None);
    }
}
