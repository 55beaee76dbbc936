//! The n-gram engine against a plain HashMap reference, plus fuzzing of the table reader.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use dense_pt_core::pmi::{
    ami_passage, ami_ragged, build_table, count_arrays, merge_tables, no_progress, BuildOptions,
    Corpus, NgramTable,
};
use dense_pt_core::Error;
use proptest::prelude::*;

fn opts(vocab: u32, max_n: usize, min_count: u64, memory: u64, threads: usize) -> BuildOptions {
    BuildOptions {
        max_n,
        min_count,
        vocab_size: vocab,
        vocab_hash: [7u8; 32],
        memory_bytes: memory,
        threads,
        shard_index: 0,
        shard_count: 1,
        spill_dir: None,
        max_buffer_loads: dense_pt_core::pmi::count::MAX_BUFFER_LOADS,
    }
}

/// Options with the pass bound lifted: tiny budgets on corpora big enough to spill many runs.
fn unbounded(
    vocab: u32,
    max_n: usize,
    min_count: u64,
    memory: u64,
    threads: usize,
) -> BuildOptions {
    BuildOptions {
        max_buffer_loads: u64::MAX,
        ..opts(vocab, max_n, min_count, memory, threads)
    }
}

fn flatten(passages: &[Vec<u32>]) -> (Vec<u32>, Vec<i64>) {
    let mut toks = vec![];
    let mut offs = vec![0i64];
    for p in passages {
        toks.extend_from_slice(p);
        offs.push(toks.len() as i64);
    }
    (toks, offs)
}

fn reference(passages: &[Vec<u32>], max_n: usize) -> (Vec<HashMap<Vec<u32>, u64>>, Vec<u64>) {
    let mut counts = vec![HashMap::new(); max_n];
    let mut totals = vec![0u64; max_n];
    for p in passages {
        for n in 1..=max_n {
            if p.len() < n {
                continue;
            }
            for s in 0..=p.len() - n {
                *counts[n - 1].entry(p[s..s + n].to_vec()).or_insert(0) += 1;
                totals[n - 1] += 1;
            }
        }
    }
    (counts, totals)
}

fn build(dir: &Path, name: &str, passages: &[Vec<u32>], o: &BuildOptions) -> PathBuf {
    let (t, off) = flatten(passages);
    let out = dir.join(name);
    build_table(Corpus::new(&t, &off).unwrap(), o, &out, &no_progress).unwrap();
    out
}

fn corpus_strategy() -> impl Strategy<Value = (u32, Vec<Vec<u32>>)> {
    (2u32..40).prop_flat_map(|v| {
        (
            Just(v),
            proptest::collection::vec(proptest::collection::vec(0..v, 0..30), 0..25),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn counts_match_reference_any_budget(
        (v, passages) in corpus_strategy(),
        min_count in 1u64..4,
        tiny in any::<bool>(),
        threads in 1usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let memory = if tiny { 0 } else { 1 << 30 };
        let path = build(dir.path(), "t.ngram", &passages, &opts(v, 4, min_count, memory, threads));
        let t = NgramTable::open(&path, true).unwrap();
        let (counts, totals) = reference(&passages, 4);
        prop_assert_eq!(t.totals(), totals);
        for n in 1..=4 {
            let want: usize = counts[n - 1].values().filter(|&&c| n == 1 || c >= min_count).count();
            prop_assert_eq!(t.entries()[n - 1] as usize, want);
            for (g, &c) in &counts[n - 1] {
                let expect = if n >= 2 && c < min_count { 0 } else { c };
                prop_assert_eq!(t.count(g).unwrap(), expect);
            }
        }
        // Same bytes whatever the budget or thread count.
        let other = build(dir.path(), "u.ngram", &passages, &opts(v, 4, min_count, if tiny { 1 << 30 } else { 0 }, 3 - threads));
        prop_assert_eq!(std::fs::read(&path).unwrap(), std::fs::read(&other).unwrap());
    }

    #[test]
    fn in_memory_counts_equal_the_table(
        (v, passages) in corpus_strategy(),
        min_count in 1u64..4,
        tiny in any::<bool>(),
        threads in 1usize..3,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(v, 4, min_count, if tiny { 0 } else { 1 << 30 }, threads);
        o.spill_dir = Some(dir.path().to_path_buf());
        let path = build(dir.path(), "t.ngram", &passages, &opts(v, 4, min_count, 1 << 30, 1));
        let t = NgramTable::open(&path, true).unwrap();
        let (tok, off) = flatten(&passages);
        let (orders, stats) = count_arrays(Corpus::new(&tok, &off).unwrap(), &o, &no_progress).unwrap();
        prop_assert_eq!(stats.totals, t.totals());
        for n in 1..=4 {
            let want: Vec<(u128, u64)> = t.records(n).unwrap().collect();
            let got: Vec<(u128, u64)> = orders[n - 1].keys.iter().zip(&orders[n - 1].counts).map(|(&k, &c)| (k as u128, c)).collect();
            prop_assert_eq!(orders[n - 1].total, t.totals()[n - 1]);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn shards_merge_to_the_unsharded_bytes((v, passages) in corpus_strategy(), shards in 1u32..5, tiny in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let whole = build(dir.path(), "whole.ngram", &passages, &opts(v, 3, 2, 1 << 30, 1));
        let mut parts = vec![];
        for i in (0..shards).rev() {
            let mut o = opts(v, 3, 1, if tiny { 0 } else { 1 << 30 }, 2);
            o.shard_index = i;
            o.shard_count = shards;
            parts.push(build(dir.path(), &format!("part{i}.ngram"), &passages, &o));
        }
        let merged = dir.path().join("merged.ngram");
        merge_tables(&parts, &merged, 2, &no_progress).unwrap();
        prop_assert_eq!(std::fs::read(&whole).unwrap(), std::fs::read(&merged).unwrap());
    }

    #[test]
    fn ami_matches_reference((v, passages) in corpus_strategy(), min_count in 1u64..3, window in 2usize..5) {
        let dir = tempfile::tempdir().unwrap();
        let path = build(dir.path(), "t.ngram", &passages, &opts(v, 4, min_count, 1 << 30, 1));
        let t = NgramTable::open(&path, true).unwrap();
        let (counts, totals) = reference(&passages, 4);
        let c = |g: &[u32]| -> u64 {
            let c = counts[g.len() - 1].get(g).copied().unwrap_or(0);
            if g.len() >= 2 && c < min_count { 0 } else { c }
        };
        let pmi = |g: &[u32]| -> f64 {
            let n = g.len();
            (c(g) as f64 / totals[n - 1] as f64).ln()
                - g.iter().map(|&w| (c(&[w]) as f64 / totals[0] as f64).ln()).sum::<f64>()
        };
        let (toks, offs) = flatten(&passages);
        let all = ami_ragged(&t, Corpus::new(&toks, &offs).unwrap(), window, 2).unwrap();
        for (pi, p) in passages.iter().enumerate() {
            let mut out = vec![0f32; p.len()];
            ami_passage(&t, p, window, &mut out).unwrap();
            for i in 0..p.len() {
                let mut want = 0.0;
                for j in 1..window {
                    if i >= j && c(&p[i - j..=i]) > 0 { want += pmi(&p[i - j..=i]); }
                    if i + j < p.len() && c(&p[i..=i + j]) > 0 { want += pmi(&p[i..=i + j]); }
                }
                want /= (window - 1) as f64;
                prop_assert!((out[i] as f64 - want).abs() <= 1e-5 * want.abs().max(1.0), "{} vs {}", out[i], want);
                prop_assert_eq!(all[offs[pi] as usize + i], out[i]);
            }
        }
    }

    #[test]
    fn reader_never_panics_on_arbitrary_bytes(data in proptest::collection::vec(any::<u8>(), 0..400), verify in any::<bool>()) {
        let _ = NgramTable::from_bytes(data, verify);
    }

    #[test]
    fn reader_without_verify_never_panics_on_mutated_tables(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        // A valid table with overflow counts, then arbitrary byte edits anywhere (header checksum
        // included); opened without hashing, every lookup must still return or fail cleanly.
        let dir = tempfile::tempdir().unwrap();
        let passages: Vec<Vec<u32>> = (0..12).map(|p| (0..90).map(|i| ((i * 5 + p) % 4) as u32).collect()).collect();
        let path = build(dir.path(), "t.ngram", &passages, &opts(4, 3, 1, 1 << 30, 1));
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, v) in &edits {
            let i = at.index(bytes.len());
            bytes[i] = *v;
        }
        if let Ok(t) = NgramTable::from_bytes(bytes, false) {
            for n in 1..=3 {
                let _ = t.records(n).unwrap().count();
                let _ = t.count(&vec![1u32; n]);
            }
            let _ = t.top_pmi(2, 3, 1);
            let mut out = vec![0f32; 20];
            let _ = ami_passage(&t, &passages[0][..20], 3, &mut out);
        }
    }

    #[test]
    fn reader_refuses_corrupted_or_truncated_tables(flip in any::<prop::sample::Index>(), bit in 0u8..8, cut in any::<prop::sample::Index>()) {
        let dir = tempfile::tempdir().unwrap();
        let passages = vec![vec![1, 2, 3, 1, 2, 4], vec![3, 3, 1, 2]];
        let path = build(dir.path(), "t.ngram", &passages, &opts(5, 3, 1, 1 << 30, 1));
        let good = std::fs::read(&path).unwrap();
        let mut bad = good.clone();
        let i = flip.index(bad.len());
        bad[i] ^= 1 << bit;
        let r = NgramTable::from_bytes(bad, true);
        prop_assert!(matches!(r, Err(Error::Format { .. })), "flip accepted");
        let short = good[..cut.index(good.len())].to_vec();
        let r = NgramTable::from_bytes(short, false);
        prop_assert!(matches!(r, Err(Error::Format { .. })), "truncation accepted");
    }
}

#[test]
fn spill_path_is_taken_with_a_tiny_budget() {
    let dir = tempfile::tempdir().unwrap();
    // 4000 tokens over a 3-token vocabulary: every first token far exceeds a 64-key buffer.
    let passages: Vec<Vec<u32>> = (0..40)
        .map(|p| (0..100).map(|i| ((i * 7 + p) % 3) as u32).collect())
        .collect();
    let (t, off) = flatten(&passages);
    let out = dir.path().join("t.ngram");
    let stats = build_table(
        Corpus::new(&t, &off).unwrap(),
        &opts(3, 4, 1, 0, 2),
        &out,
        &no_progress,
    )
    .unwrap();
    assert!(stats.spilled_runs > 0, "{stats:?}");
    let whole = dir.path().join("w.ngram");
    let s2 = build_table(
        Corpus::new(&t, &off).unwrap(),
        &opts(3, 4, 1, 1 << 30, 2),
        &whole,
        &no_progress,
    )
    .unwrap();
    assert_eq!(s2.spilled_runs, 0);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&whole).unwrap());
    // No run files are left behind.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 2);
    // Counts >= 255 go through the overflow list, in builds and in merges.
    let table = NgramTable::open(&out, true).unwrap();
    let (counts, _) = reference(&passages, 4);
    for n in 1..=4 {
        for (g, &c) in &counts[n - 1] {
            assert_eq!(table.count(g).unwrap(), c);
        }
    }
    assert!(table.count(&[0, 1]).unwrap() >= 255);
    let mut parts = vec![];
    for i in 0..3 {
        let mut o = opts(3, 4, 1, 0, 2);
        o.shard_index = i;
        o.shard_count = 3;
        let p = dir.path().join(format!("part{i}"));
        build_table(Corpus::new(&t, &off).unwrap(), &o, &p, &no_progress).unwrap();
        parts.push(p);
    }
    let merged = dir.path().join("merged");
    merge_tables(&parts, &merged, 1, &no_progress).unwrap();
    assert_eq!(
        std::fs::read(merged).unwrap(),
        std::fs::read(&whole).unwrap()
    );
}

#[test]
fn bad_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = vec![0u32, 1, 9];
    let off = vec![0i64, 3];
    let out = dir.path().join("t.ngram");
    let err = build_table(
        Corpus::new(&t, &off).unwrap(),
        &opts(5, 2, 1, 1 << 30, 1),
        &out,
        &no_progress,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("token id 9 at position 2"),
        "{err}"
    );
    assert!(!out.exists());
    assert!(Corpus::new(&t, &[0, 2, 1]).is_err());
    assert!(Corpus::new(&t, &[0, 4]).is_err());
    let mut o = opts(5, 2, 2, 1 << 30, 1);
    o.shard_count = 2;
    assert!(build_table(Corpus::new(&t, &off).unwrap(), &o, &out, &no_progress).is_err());
    let o = opts(u32::MAX, 5, 1, 1 << 30, 1);
    assert!(build_table(Corpus::new(&t, &off).unwrap(), &o, &out, &no_progress).is_err());
}

#[test]
fn merge_refuses_incomplete_or_mixed_shards() {
    let dir = tempfile::tempdir().unwrap();
    let passages = vec![vec![1, 2, 3], vec![2, 3, 4], vec![4, 4]];
    let mut paths = vec![];
    for i in 0..3 {
        let mut o = opts(5, 2, 1, 1 << 30, 1);
        o.shard_index = i;
        o.shard_count = 3;
        paths.push(build(dir.path(), &format!("p{i}"), &passages, &o));
    }
    let out = dir.path().join("m");
    assert!(matches!(
        merge_tables(&paths[..2], &out, 1, &no_progress),
        Err(Error::InvalidArgument(_))
    ));
    let dup = vec![paths[0].clone(), paths[0].clone(), paths[1].clone()];
    assert!(matches!(
        merge_tables(&dup, &out, 1, &no_progress),
        Err(Error::Mismatch { .. })
    ));
    let mut o = opts(5, 2, 1, 1 << 30, 1);
    o.vocab_hash = [1; 32];
    o.shard_index = 2;
    o.shard_count = 3;
    let other = build(dir.path(), "other", &passages, &o);
    let mixed = vec![paths[0].clone(), paths[1].clone(), other];
    assert!(matches!(
        merge_tables(&mixed, &out, 1, &no_progress),
        Err(Error::Mismatch { .. })
    ));
    assert!(!out.exists());
    merge_tables(&paths, &out, 1, &no_progress).unwrap();
    let t = NgramTable::open(&out, true).unwrap();
    assert_eq!(t.count(&[2, 3]).unwrap(), 2);
    assert_eq!(t.meta().num_passages, 3);
}

fn random_passages(seed: u64, vocab: u32, rows: usize, hot: u32) -> Vec<Vec<u32>> {
    let mut rng = dense_pt_core::rng::RowRng::new(seed, 0);
    (0..rows)
        .map(|_| {
            let len = rng.below(300) as usize;
            (0..len)
                .map(|_| {
                    // Skewed: half the tokens from a few hot ids, so n-grams repeat.
                    if rng.below(2) == 0 {
                        rng.below(hot as u64) as u32
                    } else {
                        rng.below(vocab as u64) as u32
                    }
                })
                .collect()
        })
        .collect()
}

#[test]
fn radix_sorted_counts_match_reference_in_memory_and_spilled() {
    let dir = tempfile::tempdir().unwrap();
    for (vocab, max_n) in [(1000u32, 4usize), (1 << 20, 4)] {
        // vocab 2^20: 4-grams take 80 bits, exercising the 128-bit keys.
        let passages = random_passages(vocab as u64, vocab, 700, 1);
        let (counts, totals) = reference(&passages, max_n);
        let budgets = [
            1u64 << 30,
            (32 << 20) + (vocab as u64 * 8 * 4) + 600_000 + 20_000 * 40,
        ];
        let mut bytes = vec![];
        for memory in budgets {
            let (t, off) = flatten(&passages);
            let out = dir.path().join(format!("t{vocab}-{memory}"));
            let stats = build_table(
                Corpus::new(&t, &off).unwrap(),
                &unbounded(vocab, max_n, 1, memory, 2),
                &out,
                &no_progress,
            )
            .unwrap();
            if memory < 1 << 30 {
                assert!(stats.spilled_runs > 0 && stats.passes > 3, "{stats:?}");
            }
            let table = NgramTable::open(&out, true).unwrap();
            assert_eq!(table.totals(), totals);
            for n in 1..=max_n {
                assert_eq!(table.entries()[n - 1] as usize, counts[n - 1].len());
                for (g, &c) in &counts[n - 1] {
                    assert_eq!(table.count(g).unwrap(), c, "{g:?}");
                }
            }
            bytes.push(std::fs::read(&out).unwrap());
        }
        assert_eq!(bytes[0], bytes[1]);
    }
}

#[test]
fn in_memory_counts_match_reference_with_large_buckets() {
    // Half the tokens are id 0: its first-token bucket (~50K keys) takes the MSD split path of
    // the bucket sort; vocab 2^16 packs 4-grams into exactly 64 bits.
    let dir = tempfile::tempdir().unwrap();
    let vocab = 1u32 << 16;
    let passages = random_passages(11, vocab, 700, 1);
    let (counts, totals) = reference(&passages, 4);
    let (t, off) = flatten(&passages);
    for (memory, threads) in [(1u64 << 30, 1usize), (1 << 30, 2), (0, 2)] {
        let mut o = unbounded(vocab, 4, 1, memory, threads);
        o.spill_dir = Some(dir.path().to_path_buf());
        let (orders, stats) =
            count_arrays(Corpus::new(&t, &off).unwrap(), &o, &no_progress).unwrap();
        assert_eq!(stats.totals, totals);
        if memory == 0 {
            assert!(stats.spilled_runs > 0, "{stats:?}");
        }
        for n in 1..=4 {
            let oc = &orders[n - 1];
            assert_eq!(oc.keys.len(), counts[n - 1].len());
            assert!(oc.keys.windows(2).all(|w| w[0] < w[1]));
            for (&k, &c) in oc.keys.iter().zip(&oc.counts) {
                let g = dense_pt_core::pmi::keys::unpack(k as u128, n, 16);
                assert_eq!(counts[n - 1][&g], c, "{g:?}");
            }
        }
    }
    // Keys wider than 64 bits are refused with a clear error.
    let err = count_arrays(
        Corpus::new(&t, &off).unwrap(),
        &opts(1 << 17, 4, 1, 1 << 30, 1),
        &no_progress,
    )
    .unwrap_err();
    assert!(err.to_string().contains("64 bits"), "{err}");
}

#[test]
fn many_spilled_runs_are_merged_with_bounded_fan_in() {
    let dir = tempfile::tempdir().unwrap();
    let passages = random_passages(9, 3, 200, 1);
    let (t, off) = flatten(&passages);
    let tiny = dir.path().join("tiny");
    let stats = build_table(
        Corpus::new(&t, &off).unwrap(),
        &unbounded(3, 3, 1, 0, 2),
        &tiny,
        &no_progress,
    )
    .unwrap();
    // Far more runs per pass than the fan-in of 64: merged in several levels.
    assert!(stats.spilled_runs > 3 * 200, "{stats:?}");
    let whole = dir.path().join("whole");
    build_table(
        Corpus::new(&t, &off).unwrap(),
        &opts(3, 3, 1, 1 << 30, 1),
        &whole,
        &no_progress,
    )
    .unwrap();
    assert_eq!(
        std::fs::read(&tiny).unwrap(),
        std::fs::read(&whole).unwrap()
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn a_budget_that_would_need_too_many_passes_is_refused_naming_the_minimum() {
    // ~225,000 tokens over a 5,000-token vocabulary: a 64-key buffer would mean thousands of
    // passes (the 22,104-pass, 12-minute case on SciFact). The error names the least budget,
    // and that budget works, within the bound on passes.
    let dir = tempfile::tempdir().unwrap();
    let passages = random_passages(5, 5000, 1500, 50);
    let (t, off) = flatten(&passages);
    let corpus = Corpus::new(&t, &off).unwrap();
    let out = dir.path().join("t.ngram");
    let err = build_table(corpus, &opts(5000, 4, 1, 1 << 20, 1), &out, &no_progress).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("too small for this corpus"), "{msg}");
    assert!(!out.exists());
    let least: f64 = msg
        .split("needs at least ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|x| x.parse().ok())
        .unwrap_or_else(|| panic!("no minimum in {msg}"));
    let bytes = (least * (1u64 << 30) as f64) as u64;
    let stats = build_table(corpus, &opts(5000, 4, 1, bytes, 1), &out, &no_progress).unwrap();
    assert!(
        !stats.fused && stats.passes <= 3 * (2 * 64 + 1),
        "{stats:?}"
    );
    let whole = dir.path().join("w.ngram");
    build_table(corpus, &opts(5000, 4, 1, 1 << 30, 1), &whole, &no_progress).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&whole).unwrap());
    // The same refusal from the in-memory counter.
    assert!(count_arrays(corpus, &opts(5000, 4, 1, 1 << 20, 1), &no_progress).is_err());
}
