//! *Answer in context*: whether what a model is given can answer a question, not only whether
//! the evidence turn was retrieved. For a question with a gold answer, the packed prompt-mode
//! section (under the default allowance) holds the answer when one of its memory lines holds
//! every number of the answer (leading zeros ignored) and at least half of its other content
//! words (lower-cased runs of letters, a short stop list removed).
//!
//! A proxy, deliberately simple and the same for every variant: it cannot tell a line that
//! *states* "7 May 2023" from one that lets a model *work it out*, and it counts a line that holds
//! the words by chance. It measures what is in the prompt, which recall@k cannot: a retrieved
//! turn that says "yesterday" without saying when answers no "when" question.

/// Words too common to say anything about an answer.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "he", "her", "his", "i", "in", "is",
    "it", "its", "of", "on", "or", "she", "that", "the", "their", "them", "they", "this", "to", "was", "were", "with",
];

/// A gold answer as the check reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoldAnswer {
    numbers: Vec<String>,
    words: Vec<String>,
}

/// Runs of ASCII digits with leading zeros removed (`007` is `7`, `0` stays `0`).
fn numbers(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_ascii_digit()).filter(|n| !n.is_empty()).map(|n| {
        let trimmed = n.trim_start_matches('0');
        if trimmed.is_empty() {
            "0".to_owned()
        } else {
            trimmed.to_owned()
        }
    })
}

/// Lower-cased runs of letters that are not stop words.
fn content_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphabetic())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
}

impl GoldAnswer {
    /// Reads an answer; `None` when it has neither a number nor a content word (nothing to find).
    pub fn parse(answer: &str) -> Option<GoldAnswer> {
        let mut numbers: Vec<String> = numbers(answer).collect();
        numbers.sort();
        numbers.dedup();
        let mut words: Vec<String> = content_words(answer).collect();
        words.sort();
        words.dedup();
        (!numbers.is_empty() || !words.is_empty()).then_some(GoldAnswer { numbers, words })
    }

    /// Whether `line` holds every number and at least half of the content words.
    pub fn held_by(&self, line: &str) -> bool {
        let line_numbers: Vec<String> = numbers(line).collect();
        if !self.numbers.iter().all(|n| line_numbers.contains(n)) {
            return false;
        }
        let line_words: Vec<String> = content_words(line).collect();
        let found = self.words.iter().filter(|w| line_words.contains(w)).count();
        found * 2 >= self.words.len()
    }

    /// Whether one memory line of a prompt section (its list items; the header is not a memory)
    /// holds the answer.
    pub fn held_by_section(&self, section: &str) -> bool {
        section.lines().filter(|l| l.starts_with("- ")).any(|l| self.held_by(l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_and_half_the_words_must_be_on_one_line() {
        let gold = GoldAnswer::parse("The week before 9 June 2023").unwrap();
        assert!(gold.held_by("told on 9 June 2023 (\"last week\": the week before 9 June 2023): ..."));
        assert!(gold.held_by("on 09 June 2023: it was last week"), "leading zeros ignored, week + june of 3 words");
        assert!(!gold.held_by("on 9 June 2022: last week"), "a number is missing");
        assert!(!gold.held_by("on 9 May 2023"), "only one word of three");
        let words = GoldAnswer::parse("Adoption agencies").unwrap();
        assert!(words.held_by("I looked into adoption agencies today"));
        assert!(words.held_by("Adoption is my dream"), "half of two words");
        assert!(!words.held_by("agency work"));
    }

    #[test]
    fn words_and_numbers_split_where_the_data_glues_them() {
        let gold = GoldAnswer::parse("The Friday before 23January, 2022").unwrap();
        assert!(gold.held_by("on 23 January 2022 (\"last Friday\": the Friday before 23 January 2022)"));
    }

    #[test]
    fn only_memory_lines_count_not_the_header() {
        let gold = GoldAnswer::parse("yesterday").unwrap();
        assert!(!gold.held_by_section("Relative words (\"yesterday\") count...\n- [a rev 1] About X: tabs"));
        assert!(gold.held_by_section("header\n- [a rev 1] About X: I went yesterday"));
        assert!(GoldAnswer::parse("the, of").is_none());
    }
}
