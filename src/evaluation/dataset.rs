//! Reading LoCoMo-format data sets (a list of samples, each a two-speaker conversation in sessions,
//! with question/answer items that cite the dialogue turns holding their evidence).
//!
//! The data set is read from a path and never vendored: its licence (CC BY-NC 4.0) forbids it.

use std::collections::BTreeMap;
use std::path::Path;

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

fn session_turns(sample: &str, key: &str, value: &serde_json::Value) -> Result<Vec<Turn>, LocomoError> {
    let session: u32 = key["session_".len()..]
        .parse()
        .map_err(|_| LocomoError::Malformed { sample: sample.to_owned(), problem: format!("unexpected key {key}") })?;
    let raw: Vec<RawTurn> = serde_json::from_value(value.clone())
        .map_err(|e| LocomoError::Malformed { sample: sample.to_owned(), problem: format!("{key}: {e}") })?;
    Ok(raw
        .into_iter()
        .map(|t| Turn {
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
            let turns = session_turns(&id, key, value)?;
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
        })
        .filter(|q| !q.evidence.is_empty() && !q.question.trim().is_empty())
        .collect();
    Ok(Sample { id, speakers, turns, questions })
}
