//! Ranking metrics with binary relevance: recall@k, nDCG@k and reciprocal rank.

use std::collections::HashSet;

/// Fraction of the relevant items found in the first `k` results.
pub fn recall_at(ranked: &[String], relevant: &HashSet<String>, k: usize) -> f64 {
    if relevant.is_empty() {
        return 0.0;
    }
    let found = ranked.iter().take(k).filter(|r| relevant.contains(*r)).count();
    found as f64 / relevant.len() as f64
}

/// The LoCoMo paper's retrieval recall: the fraction of a question's evidence turns, as the data
/// set lists them (duplicates and ids of turns that do not exist included), that appear in the
/// first `k` results. It differs from [`recall_at`] only where an evidence list repeats an id or
/// cites a turn the corpus lacks; reported beside it so figures compare with the paper's.
pub fn paper_recall_at(ranked: &[String], evidence: &[String], k: usize) -> f64 {
    if evidence.is_empty() {
        return 0.0;
    }
    let top = &ranked[..k.min(ranked.len())];
    let found = evidence.iter().filter(|e| top.contains(e)).count();
    found as f64 / evidence.len() as f64
}

/// Normalised discounted cumulative gain of the first `k` results.
pub fn ndcg_at(ranked: &[String], relevant: &HashSet<String>, k: usize) -> f64 {
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .filter(|(_, r)| relevant.contains(*r))
        .map(|(i, _)| 1.0 / ((i + 2) as f64).log2())
        .sum();
    let ideal: f64 = (0..relevant.len().min(k)).map(|i| 1.0 / ((i + 2) as f64).log2()).sum();
    if ideal == 0.0 {
        0.0
    } else {
        dcg / ideal
    }
}

/// 1 / rank of the first relevant result, 0 when none is returned.
pub fn reciprocal_rank(ranked: &[String], relevant: &HashSet<String>) -> f64 {
    ranked.iter().position(|r| relevant.contains(r)).map_or(0.0, |i| 1.0 / (i + 1) as f64)
}

/// Running means of the four metrics.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct MetricTotals {
    /// Number of queries.
    pub queries: usize,
    /// Mean recall@5.
    pub recall_at_5: f64,
    /// Mean recall@10.
    pub recall_at_10: f64,
    /// Mean recall@5 as the LoCoMo paper computes it ([`paper_recall_at`]).
    pub paper_recall_at_5: f64,
    /// Mean recall@10 as the LoCoMo paper computes it.
    pub paper_recall_at_10: f64,
    /// Mean nDCG@10.
    pub ndcg_at_10: f64,
    /// Mean reciprocal rank.
    pub mrr: f64,
    /// Mean time per query in milliseconds (the recall-mode search alone, as before answer in
    /// context added a prompt-mode search per question).
    pub ms_per_query: f64,
    /// Questions with a gold answer whose prompt section was checked (categories 1-4).
    pub answerable: usize,
    /// Fraction of them whose packed prompt-mode section holds the answer on one memory line
    /// ([`super::answers::GoldAnswer::held_by_section`]); `None` when none was checked.
    pub answer_in_context: Option<f64>,
}

impl MetricTotals {
    /// Adds one query's result (running means); `evidence` is the question's evidence list as the
    /// data set gives it.
    pub fn add(&mut self, ranked: &[String], evidence: &[String], millis: f64) {
        let relevant: HashSet<String> = evidence.iter().cloned().collect();
        let relevant = &relevant;
        let n = self.queries as f64;
        let mean = |old: f64, new: f64| (old * n + new) / (n + 1.0);
        self.recall_at_5 = mean(self.recall_at_5, recall_at(ranked, relevant, 5));
        self.recall_at_10 = mean(self.recall_at_10, recall_at(ranked, relevant, 10));
        self.paper_recall_at_5 = mean(self.paper_recall_at_5, paper_recall_at(ranked, evidence, 5));
        self.paper_recall_at_10 = mean(self.paper_recall_at_10, paper_recall_at(ranked, evidence, 10));
        self.ndcg_at_10 = mean(self.ndcg_at_10, ndcg_at(ranked, relevant, 10));
        self.mrr = mean(self.mrr, reciprocal_rank(ranked, relevant));
        self.ms_per_query = mean(self.ms_per_query, millis);
        self.queries += 1;
    }

    /// Adds one answerable question's answer-in-context result.
    pub fn add_answer(&mut self, held: bool) {
        let n = self.answerable as f64;
        let old = self.answer_in_context.unwrap_or(0.0);
        self.answer_in_context = Some((old * n + if held { 1.0 } else { 0.0 }) / (n + 1.0));
        self.answerable += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> HashSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn list(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn metrics_match_hand_computed_values() {
        let ranked = list(&["a", "x", "b", "y"]);
        let relevant = set(&["a", "b", "c"]);
        assert!((recall_at(&ranked, &relevant, 2) - 1.0 / 3.0).abs() < 1e-12);
        assert!((recall_at(&ranked, &relevant, 10) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(reciprocal_rank(&list(&["x", "b"]), &relevant), 0.5);
        assert_eq!(reciprocal_rank(&list(&["x"]), &relevant), 0.0);
        let dcg = 1.0 + 1.0 / 4f64.log2();
        let ideal = 1.0 + 1.0 / 3f64.log2() + 1.0 / 4f64.log2();
        assert!((ndcg_at(&ranked, &relevant, 10) - dcg / ideal).abs() < 1e-12);
        assert_eq!(ndcg_at(&list(&["a", "b", "c"]), &relevant, 10), 1.0);
    }

    #[test]
    fn paper_recall_counts_the_evidence_list_as_given() {
        let ranked = list(&["a", "x", "b"]);
        // A repeated id counts twice, a missing turn counts against: 3 of 4 listed found.
        assert_eq!(paper_recall_at(&ranked, &list(&["a", "a", "b", "zz"]), 10), 0.75);
        assert_eq!(recall_at(&ranked, &set(&["a", "b", "zz"]), 10), 2.0 / 3.0);
        assert_eq!(paper_recall_at(&ranked, &list(&["b"]), 2), 0.0);
        assert_eq!(paper_recall_at(&ranked, &[], 10), 0.0);
    }
}
