//! Sign bits of an embedding, for ranking an eligible set by Hamming distance in Rust.
//!
//! The projection carries each revision's quantized embedding (`searchable_revisions.embedding_bits`,
//! pgvector's `binary_quantize` in the active generation; migration `20261202008200`) in the
//! audience-class index, so the statement that reads a destination's eligible set returns them
//! with no extra page reads. Ranking those rows here, instead of a second statement that reads the
//! same eligible set again to rank it in SQL, takes one index scan off every hybrid search; only
//! the shortlist goes back to PostgreSQL for exact cosine (`crate::semantic::vector_index`).

use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Postgres, Type, TypeInfo};

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

    /// How many bits differ (pgvector's `<~>`), or `None` when the lengths differ (embeddings of
    /// another dimension are not comparable).
    pub fn hamming(&self, other: &SignBits) -> Option<u32> {
        (self.len == other.len).then(|| self.bytes.iter().zip(&other.bytes).map(|(a, b)| (a ^ b).count_ones()).sum())
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
    fn hamming_counts_differing_bits_of_equal_lengths_only() {
        let a = SignBits::from_text("10110000").unwrap();
        let b = SignBits::from_text("10011001").unwrap();
        assert_eq!(a.hamming(&b), Some(3));
        assert_eq!(a.hamming(&a), Some(0));
        assert_eq!(a.hamming(&SignBits::from_text("1011").unwrap()), None);
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
