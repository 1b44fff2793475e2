//! An exact Okapi BM25 baseline, computed in the same run as the evaluated retrieval so that the
//! comparison shares data, tokenisation of the corpus and machine.

use std::collections::HashMap;

/// BM25 parameters (the usual defaults).
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words too common to carry meaning (a short English list; BM25's idf handles the rest).
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for", "from", "had", "has", "have",
    "he", "her", "his", "how", "i", "in", "is", "it", "its", "me", "my", "of", "on", "or", "she", "so", "that", "the",
    "their", "them", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why", "with",
    "you", "your",
];

/// Lower-cased alphanumeric tokens without stop words.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(str::to_lowercase)
        .filter(|t| !STOP_WORDS.contains(&t.as_str()))
        .collect()
}

/// A BM25 index over a fixed set of documents.
pub struct Bm25Index {
    ids: Vec<String>,
    term_frequencies: Vec<HashMap<String, u32>>,
    lengths: Vec<f64>,
    document_frequency: HashMap<String, u32>,
    average_length: f64,
}

impl Bm25Index {
    /// Indexes `(id, text)` pairs, tokenized by [`tokenize`].
    pub fn new<'a>(documents: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self::from_tokens(documents.into_iter().map(|(id, text)| (id.to_owned(), tokenize(text))))
    }

    /// Indexes documents already split into terms (for example PostgreSQL's lexemes, to check the
    /// in-database ranking against this one on the same terms).
    pub fn from_tokens(documents: impl IntoIterator<Item = (String, Vec<String>)>) -> Self {
        let mut index = Bm25Index {
            ids: Vec::new(),
            term_frequencies: Vec::new(),
            lengths: Vec::new(),
            document_frequency: HashMap::new(),
            average_length: 0.0,
        };
        for (id, tokens) in documents {
            let mut tf: HashMap<String, u32> = HashMap::new();
            for token in &tokens {
                *tf.entry(token.clone()).or_default() += 1;
            }
            for term in tf.keys() {
                *index.document_frequency.entry(term.clone()).or_default() += 1;
            }
            index.ids.push(id);
            index.lengths.push(tokens.len() as f64);
            index.term_frequencies.push(tf);
        }
        let n = index.ids.len().max(1) as f64;
        index.average_length = index.lengths.iter().sum::<f64>() / n;
        index
    }

    /// The ids of the best `k` documents for `query`, best first (documents scoring 0 omitted).
    pub fn search(&self, query: &str, k: usize) -> Vec<String> {
        self.search_terms(&tokenize(query), k).into_iter().map(|(id, _)| id).collect()
    }

    /// The best `k` documents for a query already split into terms, with their scores, best first
    /// (ties by indexing order; documents scoring 0 omitted).
    pub fn search_terms(&self, terms: &[String], k: usize) -> Vec<(String, f64)> {
        let mut scored: Vec<(f64, usize)> = (0..self.ids.len())
            .map(|doc| (self.document_score(doc, terms), doc))
            .filter(|(score, _)| *score > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(k).map(|(score, doc)| (self.ids[doc].clone(), score)).collect()
    }

    /// The score of document `id` for the query terms (0 when it matches none or is unknown).
    pub fn score(&self, id: &str, terms: &[String]) -> f64 {
        self.ids.iter().position(|d| d == id).map_or(0.0, |doc| self.document_score(doc, terms))
    }

    /// Okapi BM25 of the document at `doc` for `terms` (repeated terms count again).
    fn document_score(&self, doc: usize, terms: &[String]) -> f64 {
        let n = self.ids.len() as f64;
        let tf = &self.term_frequencies[doc];
        terms
            .iter()
            .filter_map(|t| {
                let f = *tf.get(t)? as f64;
                let df = *self.document_frequency.get(t)? as f64;
                let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                let norm = K1 * (1.0 - B + B * self.lengths[doc] / self.average_length.max(1e-9));
                Some(idf * f * (K1 + 1.0) / (f + norm))
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_terms_and_repeated_matches_rank_higher() {
        let index = Bm25Index::new([
            ("common", "the team went to lunch and lunch was good"),
            ("rare", "Caroline went to the pride parade"),
            ("both", "lunch after the pride parade"),
        ]);
        assert_eq!(index.search("pride parade", 3)[..2], ["rare".to_string(), "both".to_string()]);
        assert_eq!(index.search("lunch", 1), vec!["common".to_string()]);
        assert!(index.search("nothing matches", 3).is_empty());
    }
}
