//! Packing of n-grams into integers: token `k` of an n-gram occupies `bits` bits, the first token
//! in the highest bits, so integer order equals lexicographic order of the token tuples.

/// Largest order a table can hold (header size is bounded by it).
pub const MAX_ORDER: usize = 16;

/// Bits needed to store any id below `vocab_size` (at least 1).
pub fn token_bits(vocab_size: u32) -> u32 {
    if vocab_size <= 1 {
        1
    } else {
        32 - (vocab_size - 1).leading_zeros()
    }
}

/// Bytes of a packed key of order `n`: 4, 8 or 16; `None` when it does not fit 128 bits.
pub fn key_width(n: usize, bits: u32) -> Option<usize> {
    let total = n as u64 * bits as u64;
    match total {
        0..=32 => Some(4),
        33..=64 => Some(8),
        65..=128 => Some(16),
        _ => None,
    }
}

/// Bytes of a key as stored in the table: order 1 stores the token, order n >= 2 stores only the
/// last n-1 tokens (the first token is implied by the per-first-token index of the section).
pub fn stored_key_width(n: usize, bits: u32) -> usize {
    let b = if n <= 1 { bits } else { (n as u32 - 1) * bits };
    (b as usize).div_ceil(8).max(1)
}

#[inline]
pub fn pack(ids: &[u32], bits: u32) -> u128 {
    ids.iter().fold(0u128, |k, &t| (k << bits) | t as u128)
}

/// Inverse of [`pack`] for an n-gram of order `n`.
pub fn unpack(key: u128, n: usize, bits: u32) -> Vec<u32> {
    let mask = (1u128 << bits) - 1;
    (0..n)
        .map(|k| ((key >> ((n - 1 - k) as u32 * bits)) & mask) as u32)
        .collect()
}

/// Integer key types used while counting (u64 when the order fits, else u128).
pub trait Key: Copy + Ord + Send + Sync + Default + std::fmt::Debug + 'static {
    const BYTES: usize;
    fn from_u128(v: u128) -> Self;
    fn to_u128(self) -> u128;
    fn digit(self, shift: u32, mask: u64) -> usize;
}

impl Key for u64 {
    const BYTES: usize = 8;
    #[inline]
    fn from_u128(v: u128) -> Self {
        v as u64
    }
    #[inline]
    fn to_u128(self) -> u128 {
        self as u128
    }
    #[inline]
    fn digit(self, shift: u32, mask: u64) -> usize {
        ((self >> shift) & mask) as usize
    }
}

impl Key for u128 {
    const BYTES: usize = 16;
    #[inline]
    fn from_u128(v: u128) -> Self {
        v
    }
    #[inline]
    fn to_u128(self) -> u128 {
        self
    }
    #[inline]
    fn digit(self, shift: u32, mask: u64) -> usize {
        ((self >> shift) as u64 & mask) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn widths() {
        assert_eq!(token_bits(1), 1);
        assert_eq!(token_bits(2), 1);
        assert_eq!(token_bits(3), 2);
        assert_eq!(token_bits(30522), 15);
        assert_eq!(token_bits(u32::MAX), 32);
        assert_eq!(key_width(2, 15), Some(4));
        assert_eq!(key_width(4, 15), Some(8));
        assert_eq!(key_width(4, 32), Some(16));
        assert_eq!(key_width(5, 32), None);
        assert_eq!(stored_key_width(1, 15), 2);
        assert_eq!(stored_key_width(2, 15), 2);
        assert_eq!(stored_key_width(3, 15), 4);
        assert_eq!(stored_key_width(4, 15), 6);
        assert_eq!(stored_key_width(5, 32), 16);
    }

    proptest! {
        #[test]
        fn pack_preserves_lexicographic_order(
            a in proptest::collection::vec(0u32..1000, 3),
            b in proptest::collection::vec(0u32..1000, 3),
        ) {
            let bits = token_bits(1000);
            prop_assert_eq!(a.cmp(&b), pack(&a, bits).cmp(&pack(&b, bits)));
            prop_assert_eq!(unpack(pack(&a, bits), 3, bits), a);
        }
    }
}
