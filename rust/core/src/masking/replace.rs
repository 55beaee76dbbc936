//! BERT's 80/10/10 replacement of masked positions, per row.
use super::view::IntView;
use crate::rng::RowRng;
use crate::{Error, Result};

/// Label value of positions that are not predicted (PyTorch's `ignore_index`).
pub const IGNORE_INDEX: i64 = -100;

/// A validated replacement policy.
#[derive(Clone, Debug)]
pub struct Replacer {
    pub mask_token_id: i64,
    pub vocab_size: i64,
    pub mask_prob: f64,
    pub random_prob: f64,
    /// Sorted, unique special ids below `vocab_size`: never drawn as random replacements.
    specials: Vec<i64>,
}

impl Replacer {
    pub fn new(
        mask_token_id: i64,
        vocab_size: i64,
        mask_prob: f64,
        random_prob: f64,
        special_ids: &[i64],
    ) -> Result<Self> {
        if vocab_size <= 0 {
            return Err(Error::invalid(format!(
                "vocab_size must be positive, got {vocab_size}"
            )));
        }
        if !(0..vocab_size).contains(&mask_token_id) {
            return Err(Error::invalid(format!(
                "mask_token_id {mask_token_id} is outside [0, vocab_size={vocab_size})"
            )));
        }
        super::check_probability("mask_prob", mask_prob)?;
        super::check_probability("random_prob", random_prob)?;
        if mask_prob + random_prob > 1.0 + 1e-12 {
            return Err(Error::invalid(format!(
                "mask_prob + random_prob must be <= 1, got {mask_prob} + {random_prob}"
            )));
        }
        let mut specials = Vec::with_capacity(special_ids.len());
        for &s in special_ids {
            if !(0..vocab_size).contains(&s) {
                return Err(Error::invalid(format!(
                    "special_ids holds {s}, outside [0, vocab_size={vocab_size})"
                )));
            }
            specials.push(s);
        }
        specials.sort_unstable();
        specials.dedup();
        if random_prob > 0.0 && specials.len() as i64 >= vocab_size {
            return Err(Error::invalid(
                "random_prob > 0 but every id of the vocabulary is in special_ids",
            ));
        }
        Ok(Replacer {
            mask_token_id,
            vocab_size,
            mask_prob,
            random_prob,
            specials,
        })
    }

    /// The r-th non-special id, r in [0, vocab_size - |specials|).
    #[inline]
    fn nth_regular(&self, r: i64) -> i64 {
        let mut id = r;
        for &s in &self.specials {
            if s <= id {
                id += 1;
            } else {
                break;
            }
        }
        id
    }

    /// Replace the masked positions of one row in place and write their labels.
    /// `ids` holds the original ids on entry; `labels` must hold -100 on entry.
    /// One uniform draw per masked position (ascending), plus one id draw for a random token.
    /// `positions` is scratch space.
    #[inline(always)]
    pub fn apply_row(
        &self,
        ids: &mut [i64],
        mask: IntView<'_>,
        labels: &mut [i64],
        rng: &mut RowRng,
        positions: &mut Vec<u32>,
    ) {
        positions.clear();
        mask.push_nonzero(positions);
        self.apply_positions(ids, positions, labels, rng);
    }

    /// Replace at the given ascending positions; labels are written there only.
    #[inline(always)]
    pub fn apply_positions(
        &self,
        ids: &mut [i64],
        positions: &[u32],
        labels: &mut [i64],
        rng: &mut RowRng,
    ) {
        let regular = (self.vocab_size - self.specials.len() as i64) as u64;
        let keep_above = self.mask_prob + self.random_prob;
        for &pos in positions {
            let pos = pos as usize;
            labels[pos] = ids[pos];
            let u = rng.next_f64();
            // The rare random case branches (it draws again), on one combined condition (`&`,
            // not `&&`: a short-circuit would add a 80/20 branch, which mispredicts too often);
            // the common [MASK]/keep choice is a conditional move.
            if (u >= self.mask_prob) & (u < keep_above) {
                ids[pos] = self.nth_regular(rng.below(regular) as i64);
            }
            ids[pos] = if u < self.mask_prob {
                self.mask_token_id
            } else {
                ids[pos]
            };
        }
    }

    /// Error when an id is negative or >= vocab_size.
    pub fn check_ids(&self, name: &str, ids: IntView<'_>) -> Result<()> {
        if ids.all_below(self.vocab_size) {
            return Ok(());
        }
        let (lo, hi) = ids
            .min_max()
            .expect("a bad id was found, so the view is not empty");
        let bad = if lo < 0 { lo } else { hi };
        Err(Error::invalid(format!(
            "{name} holds id {bad}, outside [0, vocab_size={})",
            self.vocab_size
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_regular_skips_specials() {
        let r = Replacer::new(4, 10, 0.8, 0.1, &[0, 1, 4, 9]).unwrap();
        let got: Vec<i64> = (0..6).map(|i| r.nth_regular(i)).collect();
        assert_eq!(got, vec![2, 3, 5, 6, 7, 8]);
    }

    #[test]
    fn bad_policies_are_rejected() {
        assert!(Replacer::new(4, 0, 0.8, 0.1, &[]).is_err());
        assert!(Replacer::new(10, 10, 0.8, 0.1, &[]).is_err());
        assert!(Replacer::new(4, 10, 0.95, 0.1, &[]).is_err());
        assert!(Replacer::new(4, 10, f64::NAN, 0.1, &[]).is_err());
        assert!(Replacer::new(4, 10, 0.8, 0.1, &[12]).is_err());
        assert!(Replacer::new(0, 2, 0.8, 0.1, &[0, 1]).is_err());
    }
}
