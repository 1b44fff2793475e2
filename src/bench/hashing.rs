//! A deterministic feature-hashing embedder for the speed benchmark: it exercises the real vector
//! path (exact pgvector search over the eligible set, hydration, fusion) at a
//! million revisions without spending hours running a neural model over synthetic text. Its
//! vectors carry lexical overlap only; quality is measured by `mesh-memory eval`, not here.

use std::sync::Arc;

use crate::semantic::{EmbedFuture, Embedder, EmbedderInfo};

/// Vector length, the same as all-MiniLM-L6-v2 so the index does equal work per comparison.
pub const HASHING_DIMENSION: usize = 384;

/// Signed feature hashing of lower-cased words, L2-normalised.
#[derive(Clone, Debug)]
pub struct HashingEmbedder {
    info: EmbedderInfo,
}

impl Default for HashingEmbedder {
    fn default() -> Self {
        HashingEmbedder {
            info: EmbedderInfo {
                provider: "bench".into(),
                model: "feature-hashing-384".into(),
                dimension: HASHING_DIMENSION,
            },
        }
    }
}

/// FNV-1a: stable across runs and platforms.
fn fnv1a(word: &str) -> u64 {
    word.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// The vector of one text.
pub fn hash_vector(text: &str) -> Vec<f32> {
    let mut v = vec![0f32; HASHING_DIMENSION];
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let h = fnv1a(&word.to_lowercase());
        let sign = if h & 1 == 0 { 1.0 } else { -1.0 };
        v[((h >> 1) % HASHING_DIMENSION as u64) as usize] += sign;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    } else {
        v[0] = 1.0;
    }
    v
}

impl Embedder for HashingEmbedder {
    fn info(&self) -> &EmbedderInfo {
        &self.info
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        let vectors = texts.iter().map(|t| hash_vector(t)).collect();
        Box::pin(async move { Ok(vectors) })
    }
}

/// The query side of `bench --query-model`: every query is embedded by a real model first, for
/// its time and for the CPU it takes from the searches it shares cores with, and then by the
/// hashing embedder, whose vector is the one searched. A bench store's documents carry hashing
/// vectors (embedding a million synthetic documents with MiniLM on two cores takes hours), so the
/// model's own vector would match nothing; its cost is what a production search pays, and that is
/// what this measures.
pub struct ModelTimedEmbedder {
    model: Arc<dyn Embedder>,
    hashing: HashingEmbedder,
}

impl ModelTimedEmbedder {
    /// Times `model` in front of the hashing embedder.
    pub fn new(model: Arc<dyn Embedder>) -> Self {
        ModelTimedEmbedder { model, hashing: HashingEmbedder::default() }
    }

    /// What the report calls it: the model that is timed.
    pub fn label(&self) -> String {
        let info = self.model.info();
        format!("{} {} (timed), hashing vectors", info.provider, info.model)
    }
}

impl Embedder for ModelTimedEmbedder {
    fn info(&self) -> &EmbedderInfo {
        self.hashing.info()
    }

    fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
        Box::pin(async move {
            self.model.embed(texts).await?;
            self.hashing.embed(texts).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_are_unit_length_deterministic_and_overlap_driven() {
        let a = hash_vector("deploy friday review");
        assert_eq!(a, hash_vector("Deploy FRIDAY review"));
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-5);
        let dot = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f32>();
        assert!(dot(&a, &hash_vector("deploy friday")) > dot(&a, &hash_vector("lunch ramen")));
    }

    /// A model that counts the texts it was asked to embed and fails when told to.
    struct CountingModel {
        info: EmbedderInfo,
        texts: std::sync::atomic::AtomicUsize,
        fail: bool,
    }

    impl Embedder for CountingModel {
        fn info(&self) -> &EmbedderInfo {
            &self.info
        }

        fn embed<'a>(&'a self, texts: &'a [String]) -> EmbedFuture<'a> {
            self.texts.fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            let result = match self.fail {
                true => Err(crate::semantic::EmbedError::Malformed("told to fail")),
                false => Ok(texts.iter().map(|_| vec![0.5; 8]).collect()),
            };
            Box::pin(async move { result })
        }
    }

    fn counting(fail: bool) -> Arc<CountingModel> {
        let info = EmbedderInfo { provider: "test".into(), model: "counting".into(), dimension: 8 };
        Arc::new(CountingModel { info, texts: Default::default(), fail })
    }

    #[tokio::test]
    async fn a_timed_query_pays_the_model_and_searches_the_hashing_vector() {
        let model = counting(false);
        let timed = ModelTimedEmbedder::new(model.clone());
        let texts = vec!["deploy friday".to_owned(), "lunch ramen".to_owned()];
        let vectors = timed.embed(&texts).await.expect("embeds");
        assert_eq!(model.texts.load(std::sync::atomic::Ordering::SeqCst), 2, "the model ran on every query");
        assert_eq!(vectors, vec![hash_vector("deploy friday"), hash_vector("lunch ramen")]);
        assert_eq!(timed.info(), HashingEmbedder::default().info(), "it matches the store's generation");
        assert_eq!(timed.label(), "test counting (timed), hashing vectors");
        // A model that fails fails the query, as it would in production (the search degrades).
        assert!(ModelTimedEmbedder::new(counting(true)).embed(&texts).await.is_err());
    }
}
