//! Unit and property tests of the maskers (the numpy reference lives in tests/masking_reference.py).
use super::*;
use proptest::prelude::*;

/// A random padded batch: per row a length, a [CLS] at 0 and [SEP] at len-1 flagged special.
#[derive(Clone, Debug)]
struct Batch {
    batch: usize,
    len: usize,
    attention: Vec<u8>,
    special: Vec<u8>,
    words: Vec<i64>,
    importance: Vec<f32>,
}

fn batch_strategy() -> impl Strategy<Value = Batch> {
    (1usize..6, 0usize..24).prop_flat_map(|(batch, len)| {
        (
            proptest::collection::vec(0..=len, batch),
            proptest::collection::vec(0u8..3, batch * len),
            proptest::collection::vec(-4.0f32..4.0, batch * len),
        )
            .prop_map(move |(lens, word_steps, importance)| {
                let mut attention = vec![0u8; batch * len];
                let mut special = vec![0u8; batch * len];
                let mut words = vec![-1i64; batch * len];
                for r in 0..batch {
                    let mut w = 0i64;
                    for c in 0..lens[r] {
                        attention[r * len + c] = 1;
                        if c == 0 || c + 1 == lens[r] {
                            special[r * len + c] = 1;
                        } else {
                            // a step of 0 continues the word: multi-token words
                            w += (word_steps[r * len + c] != 0) as i64;
                            words[r * len + c] = w;
                        }
                    }
                }
                // coarse importance so that ties happen
                let importance = importance.iter().map(|v| (v * 2.0).round() / 2.0).collect();
                Batch {
                    batch,
                    len,
                    attention,
                    special,
                    words,
                    importance,
                }
            })
    })
}

impl Batch {
    fn rows(&self) -> MaskRows<'_> {
        let mut rows = MaskRows::new(self.batch, self.len, IntView::U8(&self.attention));
        rows.special_tokens_mask = Some(IntView::U8(&self.special));
        rows
    }
    fn maskable(&self, r: usize) -> Vec<usize> {
        (0..self.len)
            .filter(|&c| {
                self.attention[r * self.len + c] == 1 && self.special[r * self.len + c] == 0
            })
            .collect()
    }
    /// The whole-word units of row r as lists of positions.
    fn words_of(&self, r: usize) -> Vec<Vec<usize>> {
        let mut out: Vec<Vec<usize>> = Vec::new();
        for c in self.maskable(r) {
            let w = self.words[r * self.len + c];
            match out.last_mut() {
                Some(last)
                    if self.words[r * self.len + last[0]] == w
                        && *last.last().unwrap() + 1 == c =>
                {
                    last.push(c)
                }
                _ => out.push(vec![c]),
            }
        }
        out
    }
}

fn count_row(m: &[bool], r: usize, len: usize) -> usize {
    m[r * len..(r + 1) * len].iter().filter(|&&x| x).count()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn random_mask_exact_counts_never_special(b in batch_strategy(), p in 0.0f64..=1.0, seed in any::<u64>()) {
        let m = random_mask(&b.rows(), p, seed, 1).unwrap();
        for r in 0..b.batch {
            let ok = b.maskable(r);
            prop_assert_eq!(count_row(&m, r, b.len), quota(ok.len(), p));
            for c in 0..b.len {
                if m[r * b.len + c] { prop_assert!(ok.contains(&c)); }
            }
        }
    }

    #[test]
    fn importance_sigma0_is_exact_topk(b in batch_strategy(), p in 0.0f64..=1.0, seed in any::<u64>()) {
        let imp = FloatView::F32(&b.importance);
        let m = importance_mask(&b.rows(), imp, p, 0.0, seed, 1).unwrap();
        for r in 0..b.batch {
            let mut ok = b.maskable(r);
            // descending importance, ties to the earlier position
            ok.sort_by(|&x, &y| {
                b.importance[r * b.len + y].partial_cmp(&b.importance[r * b.len + x]).unwrap().then(x.cmp(&y))
            });
            let k = quota(ok.len(), p);
            let mut want = vec![false; b.len];
            for &c in &ok[..k] { want[c] = true; }
            prop_assert_eq!(&m[r * b.len..(r + 1) * b.len], &want[..]);
        }
    }

    #[test]
    fn nested_enc_within_dec(b in batch_strategy(), p1 in 0.0f64..=1.0, p2 in 0.0f64..=1.0,
                             seed in any::<u64>(), words in any::<bool>(), imp in any::<bool>()) {
        let (pe, pd) = if p1 <= p2 { (p1, p2) } else { (p2, p1) };
        let mut rows = b.rows();
        if words { rows.word_ids = Some(IntView::I64(&b.words)); }
        let importance = imp.then_some(FloatView::F32(&b.importance));
        let (enc, dec) = nested_masks(&rows, pe, pd, importance, 1.0, seed, 1).unwrap();
        for r in 0..b.batch {
            let n = b.maskable(r).len();
            for c in 0..b.len {
                let i = r * b.len + c;
                prop_assert!(!enc[i] || dec[i]);
            }
            let (ce, cd) = (count_row(&enc, r, b.len), count_row(&dec, r, b.len));
            prop_assert!(ce <= quota(n, pe) && cd <= quota(n, pd));
            if !words {
                prop_assert_eq!(ce, quota(n, pe));
                prop_assert_eq!(cd, quota(n, pd));
            }
        }
        // dec alone is what the single masker gives with the same seed
        let alone = match importance {
            Some(i) => importance_mask(&rows, i, pd, 1.0, seed, 1).unwrap(),
            None => random_mask(&rows, pd, seed, 1).unwrap(),
        };
        prop_assert_eq!(dec, alone);
    }

    #[test]
    fn whole_words_are_masked_whole(b in batch_strategy(), p in 0.0f64..=1.0, seed in any::<u64>(), imp in any::<bool>()) {
        let mut rows = b.rows();
        rows.word_ids = Some(IntView::I64(&b.words));
        let m = if imp {
            importance_mask(&rows, FloatView::F32(&b.importance), p, 0.5, seed, 1).unwrap()
        } else {
            random_mask(&rows, p, seed, 1).unwrap()
        };
        for r in 0..b.batch {
            let words = b.words_of(r);
            let k = quota(b.maskable(r).len(), p);
            let mut count = 0;
            let mut left_out_single = false;
            for w in &words {
                let masked = w.iter().filter(|&&c| m[r * b.len + c]).count();
                prop_assert!(masked == 0 || masked == w.len(), "partial word");
                count += masked;
                left_out_single |= masked == 0 && w.len() == 1;
            }
            prop_assert!(count <= k);
            // with a single-token word left over, the quota rule reaches exactly k
            if left_out_single { prop_assert_eq!(count, k); }
        }
    }

    #[test]
    fn same_bits_for_any_threads_and_split(b in batch_strategy(), p in 0.0f64..=1.0, seed in any::<u64>()) {
        let imp = FloatView::F32(&b.importance);
        let full = importance_mask(&b.rows(), imp, p, 1.0, seed, 1).unwrap();
        prop_assert_eq!(&full, &importance_mask(&b.rows(), imp, p, 1.0, seed, 3).unwrap());
        // rows [cut..] alone, keyed by their original index
        let cut = b.batch / 2;
        let keys: Vec<u64> = (cut as u64..b.batch as u64).collect();
        let lo = cut * b.len;
        let mut rows = MaskRows::new(b.batch - cut, b.len, IntView::U8(&b.attention[lo..]));
        rows.special_tokens_mask = Some(IntView::U8(&b.special[lo..]));
        rows.row_keys = Some(&keys);
        let part = importance_mask(&rows, FloatView::F32(&b.importance[lo..]), p, 1.0, seed, 1).unwrap();
        prop_assert_eq!(&full[lo..], &part[..]);
    }

    #[test]
    fn labels_exactly_where_masked(b in batch_strategy(), seed in any::<u64>(), vocab in 6i64..40) {
        let ids: Vec<i64> = (0..b.batch * b.len).map(|i| (i as i64 * 7 + 3) % vocab).collect();
        let mask = random_mask(&b.rows(), 0.4, seed, 1).unwrap();
        let rep = Replacer::new(4, vocab, 0.8, 0.1, &[0, 1, 2, 3, 4]).unwrap();
        let (new, labels) = replace(IntView::I64(&ids), IntView::Bool(&mask), b.batch, b.len, &rep, seed, None, 1).unwrap();
        for i in 0..ids.len() {
            if mask[i] {
                prop_assert_eq!(labels[i], ids[i]);
                prop_assert!(new[i] == 4 || new[i] == ids[i] || new[i] >= 5);
            } else {
                prop_assert_eq!(labels[i], IGNORE_INDEX);
                prop_assert_eq!(new[i], ids[i]);
            }
        }
    }
}

#[test]
fn replacement_proportions_are_binomial() {
    let (batch, len) = (400, 100);
    let ids: Vec<i64> = (0..batch * len).map(|i| 5 + (i as i64 % 50)).collect();
    let mask = vec![true; batch * len];
    let rep = Replacer::new(4, 60, 0.8, 0.1, &[0, 1, 2, 3, 4]).unwrap();
    let (new, _) = replace(
        IntView::I64(&ids),
        IntView::Bool(&mask),
        batch,
        len,
        &rep,
        9,
        None,
        1,
    )
    .unwrap();
    let n = (batch * len) as f64;
    let masked = new.iter().filter(|&&v| v == 4).count() as f64;
    let kept = new.iter().zip(&ids).filter(|(a, b)| a == b).count() as f64;
    // random draws equal to the original count as "kept": expected 0.1 * 1/55 extra
    let p_keep = 0.1 + 0.1 / 55.0;
    for (got, p) in [(masked, 0.8), (kept, p_keep)] {
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!((got - n * p).abs() < 5.0 * sd, "{got} vs {}", n * p);
    }
    assert!(new.iter().all(|&v| v == 4 || v >= 5));
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let att = vec![1u8; 6];
    let rows = MaskRows::new(2, 3, IntView::U8(&att));
    assert!(random_mask(&rows, 1.5, 0, 1).is_err());
    assert!(random_mask(&rows, f64::NAN, 0, 1).is_err());
    assert!(random_mask(&MaskRows::new(0, 3, IntView::U8(&[])), 0.5, 0, 1).is_err());
    assert!(random_mask(&MaskRows::new(2, 4, IntView::U8(&att)), 0.5, 0, 1).is_err());
    let imp = [0.0f32, f32::NAN, 1.0, 0.0, 0.0, 0.0];
    let err = importance_mask(&rows, FloatView::F32(&imp), 0.5, 1.0, 0, 1).unwrap_err();
    assert!(
        err.to_string().contains("NaN at row 0, position 1"),
        "{err}"
    );
    assert!(importance_mask(&rows, FloatView::F32(&imp[..5]), 0.5, 1.0, 0, 1).is_err());
    assert!(importance_mask(&rows, FloatView::F32(&[0.0; 6]), 0.5, -1.0, 0, 1).is_err());
    assert!(nested_masks(&rows, 0.6, 0.5, None, 1.0, 0, 1).is_err());
    let rep = Replacer::new(4, 10, 0.8, 0.1, &[]).unwrap();
    let ids = [1i64, 2, 10, 3, 4, 5];
    let err = replace(
        IntView::I64(&ids),
        IntView::U8(&att),
        2,
        3,
        &rep,
        0,
        None,
        1,
    )
    .unwrap_err();
    assert!(err.to_string().contains("input_ids holds id 10"), "{err}");
    assert!(span_crop(IntView::I64(&[5, -1]), 1, 3, 0, 1, None).is_err());
    assert!(span_crop(IntView::I64(&[5]), 3, 2, 0, 1, None).is_err());
}

#[test]
fn spans_fit_their_rows() {
    let lengths = [0i64, 1, 5, 50, 200];
    let (s, e) = span_crop(IntView::I64(&lengths), 4, 16, 3, 3, None).unwrap();
    for r in 0..lengths.len() {
        for j in 0..3 {
            let (a, b) = (s[r * 3 + j], e[r * 3 + j]);
            let len = lengths[r];
            assert!(0 <= a && a <= b && b <= len);
            assert!(b - a >= 4.min(len) && b - a <= 16.min(len));
        }
    }
}

/// The SIMD levels give the same bits as the portable code: every masker on random batches
/// (holes in the attention mask, runs, ties, f16/f32 importance, long rows), and the noise.
#[test]
fn simd_levels_agree() {
    use super::simd::{force_level, level, Level};
    let detected = level();
    let mut rng = RowRng::new(99, 0);
    let mut cases = Vec::new();
    for case in 0..60u64 {
        let batch = 1 + rng.below(9) as usize;
        let len = rng.below(320) as usize;
        let mut att = vec![0i64; batch * len];
        let mut special = vec![false; batch * len];
        for r in 0..batch {
            let n = rng.below(len as u64 + 1) as usize;
            for c in 0..n {
                // every third case punches holes: rows that are not one run
                att[r * len + c] = (case % 3 != 0 || rng.below(5) != 0) as i64;
            }
            if n > 0 {
                special[r * len] = true;
                special[r * len + n - 1] = true;
            }
        }
        let coarse = case % 2 == 0;
        let imp: Vec<f32> = (0..batch * len)
            .map(|_| {
                let v = rng.next_f64() as f32 * 4.0 - 2.0;
                if coarse {
                    (v * 2.0).round() / 2.0
                } else {
                    v
                }
            })
            .collect();
        let imp16: Vec<u16> = imp.iter().map(|&v| f32_to_f16_bits(v)).collect();
        let sigma = [0.0, 1.0, 1e-3, 50.0][case as usize % 4];
        let p = rng.next_f64();
        cases.push((batch, len, att, special, imp, imp16, sigma, p, case));
    }
    type Outputs = (Vec<bool>, Vec<bool>, Vec<bool>, Vec<bool>, Vec<u64>);
    let run = || -> Vec<Outputs> {
        cases
            .iter()
            .map(|(batch, len, att, special, imp, imp16, sigma, p, case)| {
                let mut rows = MaskRows::new(*batch, *len, IntView::I64(att));
                rows.special_tokens_mask = Some(IntView::Bool(special));
                let a = importance_mask(&rows, FloatView::F32(imp), *p, *sigma, *case, 1).unwrap();
                let b =
                    importance_mask(&rows, FloatView::F16(imp16), *p, *sigma, *case, 1).unwrap();
                let c = random_mask(&rows, *p, *case, 1).unwrap();
                let (e, _) = nested_masks(
                    &rows,
                    p * 0.5,
                    *p,
                    Some(FloatView::F32(imp)),
                    *sigma,
                    *case,
                    1,
                )
                .unwrap();
                let mut z = vec![0.0; (*len * 3) + 1];
                Noise::new(RowRng::new(*case, 5)).fill(&mut z, &mut Vec::new(), &mut Vec::new());
                (a, b, c, e, z.iter().map(|v| v.to_bits()).collect())
            })
            .collect()
    };
    let fast = run();
    for cap in [Level::Baseline, Level::Avx2] {
        if cap >= detected {
            continue;
        }
        force_level(Some(cap));
        let slow = run();
        force_level(None);
        for (i, (f, s)) in fast.iter().zip(&slow).enumerate() {
            assert_eq!(f, s, "case {i}: {detected:?} and {cap:?} differ");
        }
    }
}

/// f32 -> f16 bits, round to nearest even (test data only; values are small and normal).
fn f32_to_f16_bits(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let a = v.abs();
    if a < 6.1e-5 {
        return sign;
    }
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    let man = b & 0x7f_ffff;
    let mut h = ((exp as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}
