//! Sign bits of an embedding, for shortlisting an eligible set in Rust before the exact re-rank.
//!
//! The projection carries each revision's quantized embedding (`searchable_revisions.embedding_bits`,
//! pgvector's `binary_quantize` in the active generation; migration `20261202008200`) in the
//! audience-class index, so the statement that reads a destination's eligible set returns them
//! with no extra page reads. Ranking those rows here, instead of a second statement that reads the
//! same eligible set again to rank it in SQL, takes one index scan off every hybrid search; only
//! the shortlist goes back to PostgreSQL for exact cosine (`crate::semantic::vector_index`).
//!
//! Rows are ranked by [`SignedQuery`]: the query keeps its real components and each row only its
//! signs (asymmetric binary quantization), which orders dense embeddings much closer to their exact
//! cosine order than the Hamming distance between two sets of bits does. On all-MiniLM-L6-v2
//! vectors of LoCoMo's 3,435 turns, a shortlist of 400 re-ranked exactly finds every top 50 and
//! 0.977 of the top 200, where Hamming needed 800 for 0.987 (docs/benchmarks-history.md,
//! "2026-12-15").

use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Postgres, Type, TypeInfo};

/// A query vector that scores rows by their sign bits: the sum of the query's components, each
/// taken positive where the row's bit is set and negative where it is not, which is the query's dot
/// product with the row's embedding quantized to +1 / -1. Higher is closer. Scored a byte at a time
/// through one 256-entry table per byte of the bits (48 lookups a row at 384 dimensions). Sums are
/// in `f64`, where adding a few hundred `f32` components of an embedding is exact in practice, so
/// two rows with the same signs where it matters tie and fall back to the revision id.
#[derive(Clone, Debug)]
pub struct SignedQuery {
    len: usize,
    tables: Vec<[f64; 256]>,
}

impl SignedQuery {
    /// The scorer of `vector`.
    pub fn of(vector: &[f32]) -> Self {
        let tables = vector
            .chunks(8)
            .map(|byte| {
                let component = |k: usize| byte.get(k).copied().map_or(0.0, f64::from);
                let mut table = [0f64; 256];
                table[0] = -(0..8).map(component).sum::<f64>();
                for value in 1..256usize {
                    // The lowest set bit of `value` is bit `7 - k` of the byte's most significant
                    // first order, i.e. component `k` of this byte.
                    let k = 7 - value.trailing_zeros() as usize;
                    table[value] = table[value & (value - 1)] + 2.0 * component(k);
                }
                table
            })
            .collect();
        SignedQuery { len: vector.len(), tables }
    }

    /// The score of a row's bits, or `None` when their length is not the query's (embeddings of
    /// another dimension are not comparable).
    pub fn score(&self, bits: &SignBits) -> Option<f64> {
        (bits.len == self.len).then(|| self.tables.iter().zip(&bits.bytes).map(|(t, b)| t[usize::from(*b)]).sum())
    }
}

/// PostgreSQL's built-in `bit varying` type.
const VARBIT_OID: u32 = 1562;

/// An embedding's sign bits as pgvector's `binary_quantize` makes them (bit `i` set when component
/// `i` is positive), packed most significant bit first as PostgreSQL stores `bit varying`, so a
/// value read from the database and one computed here compare bit for bit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignBits {
    len: usize,
    bytes: Vec<u8>,
}

impl SignBits {
    /// The sign bits of `vector`, as `binary_quantize` computes them.
    pub fn of(vector: &[f32]) -> Self {
        let mut bytes = vec![0u8; vector.len().div_ceil(8)];
        for (i, _) in vector.iter().enumerate().filter(|(_, v)| **v > 0.0) {
            bytes[i / 8] |= 0x80 >> (i % 8);
        }
        SignBits { len: vector.len(), bytes }
    }

    /// The number of bits (the embedding's dimension).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn from_binary(mut bytes: &[u8]) -> Result<Self, BoxDynError> {
        let (len, rest) = bytes.split_at_checked(4).ok_or("bit varying value shorter than its length")?;
        let len = i32::from_be_bytes(len.try_into()?);
        let len = usize::try_from(len).map_err(|_| format!("invalid bit varying length {len}"))?;
        bytes = rest;
        if bytes.len() != len.div_ceil(8) {
            return Err(format!("bit varying of {len} bits carries {} bytes", bytes.len()).into());
        }
        Ok(SignBits { len, bytes: bytes.to_vec() })
    }

    fn from_text(text: &str) -> Result<Self, BoxDynError> {
        let mut bytes = vec![0u8; text.len().div_ceil(8)];
        for (i, c) in text.bytes().enumerate() {
            match c {
                b'1' => bytes[i / 8] |= 0x80 >> (i % 8),
                b'0' => {}
                _ => return Err("bit varying text holds a character other than 0 and 1".into()),
            }
        }
        Ok(SignBits { len: text.len(), bytes })
    }
}

impl Type<Postgres> for SignBits {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(VARBIT_OID))
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        matches!(ty.name(), "VARBIT" | "BIT")
    }
}

impl Decode<'_, Postgres> for SignBits {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => Self::from_binary(value.as_bytes()?),
            PgValueFormat::Text => Self::from_text(value.as_str()?),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_i_is_set_when_component_i_is_positive_most_significant_first() {
        let bits = SignBits::of(&[1.0, -1.0, 0.0, 0.5, 0.0, 0.0, 0.0, 2.0, 3.0]);
        assert_eq!(bits, SignBits::from_text("100100011").unwrap());
        assert_eq!(bits.len(), 9);
        assert_eq!(bits.bytes, vec![0b1001_0001, 0b1000_0000]);
    }

    #[test]
    fn a_signed_query_sums_its_components_signed_by_the_rows_bits() {
        let query = [0.5f32, -0.25, 0.125, 1.0, 0.0, -2.0, 0.75, 0.5, -1.5];
        let reference = |bits: &SignBits| -> f64 {
            query
                .iter()
                .enumerate()
                .map(|(i, q)| if bits.bytes[i / 8] & (0x80 >> (i % 8)) != 0 { f64::from(*q) } else { -f64::from(*q) })
                .sum()
        };
        let scorer = SignedQuery::of(&query);
        for text in ["000000000", "111111111", "100100011", "010101010", "110000001"] {
            let bits = SignBits::from_text(text).unwrap();
            assert_eq!(scorer.score(&bits), Some(reference(&bits)), "{text}");
        }
        assert_eq!(scorer.score(&SignBits::of(&query)), Some(query.iter().map(|q| f64::from(q.abs())).sum()));
        assert_eq!(scorer.score(&SignBits::from_text("1011").unwrap()), None, "another dimension");
    }

    #[test]
    fn the_binary_form_must_carry_as_many_bytes_as_its_length_says() {
        let ok = SignBits::from_binary(&[0, 0, 0, 9, 0xff, 0x80]).unwrap();
        assert_eq!(ok, SignBits::from_text("111111111").unwrap());
        assert!(SignBits::from_binary(&[0, 0, 0, 9, 0xff]).is_err());
        assert!(SignBits::from_binary(&[0, 0]).is_err());
        assert!(SignBits::from_text("10x").is_err());
    }
}
