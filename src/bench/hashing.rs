//! A deterministic feature-hashing embedder for the speed benchmark: it exercises the real vector
//! path (exact pgvector search over the eligible set, hydration, fusion) at a
//! million revisions without spending hours running a neural model over synthetic text. Its
//! vectors carry lexical overlap only; quality is measured by `mesh-memory eval`, not here.

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
}
