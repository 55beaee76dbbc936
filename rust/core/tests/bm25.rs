//! The BM25 engine against a plain exhaustive reference: every passage scored with the formula
//! written out again here, all of them sorted (score down, passage index up), the first k kept.
//! MaxScore must give exactly that list, whatever the corpus, query, k, memory budget or threads.
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use dense_pt_core::bm25::{
    search_batch, Analyzer, Index, IndexBuilder, Scoring, Tokens, WordChars,
};
use dense_pt_core::Error;
use proptest::prelude::*;

fn chars() -> WordChars {
    static CHARS: OnceLock<WordChars> = OnceLock::new();
    CHARS
        .get_or_init(|| WordChars::from_fn(|c| c.is_alphanumeric() || c == '_'))
        .clone()
}

/// Stems of the tests: a word ending in "s" loses it (so two words share a term).
fn stem(w: &str) -> String {
    w.strip_suffix('s')
        .filter(|s| s.len() >= 2)
        .unwrap_or(w)
        .to_string()
}

fn analyze(a: &mut Analyzer, texts: &[String]) -> Tokens {
    let t = a.tokenize(texts);
    let stems: Vec<String> = a.pending().iter().map(|w| stem(w)).collect();
    a.resolve(&stems).unwrap();
    a.terms(&t).unwrap()
}

const STOP: [&str; 2] = ["the", "of"];

fn build(dir: &Path, passages: &[String], scoring: Scoring, memory: u64, batch: usize) -> Index {
    let mut a = Analyzer::new(chars(), &STOP);
    let mut b = IndexBuilder::create(dir).unwrap();
    for (i, chunk) in passages.chunks(batch).enumerate() {
        let pids: Vec<String> = (0..chunk.len())
            .map(|j| format!("p{}", i * batch + j))
            .collect();
        b.add(&pids, &analyze(&mut a, chunk)).unwrap();
    }
    b.finish(a.term_names(), scoring, memory).unwrap();
    Index::open(dir).unwrap()
}

/// The exhaustive reference, computed from the texts without the engine.
fn reference(passages: &[String], query: &str, scoring: Scoring, k: usize) -> Vec<(String, f64)> {
    let chars = chars();
    let terms = |text: &str| -> Vec<String> {
        let mut out = Vec::new();
        chars.for_each_token(text, |t| {
            if !STOP.contains(&t) {
                out.push(stem(t))
            }
        });
        out
    };
    let docs: Vec<Vec<String>> = passages.iter().map(|p| terms(p)).collect();
    let n = docs.len() as u64;
    let avgdl = docs.iter().map(|d| d.len() as u64).sum::<u64>() as f64 / n as f64;
    let mut df: HashMap<&str, u64> = HashMap::new();
    for d in &docs {
        let mut seen: Vec<&str> = d.iter().map(|s| s.as_str()).collect();
        seen.sort();
        seen.dedup();
        for t in seen {
            *df.entry(t).or_default() += 1;
        }
    }
    let mut scored: Vec<(usize, f64)> = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let norm = scoring.k1 * ((1.0 - scoring.b) + scoring.b * d.len() as f64 / avgdl);
        let mut score = 0.0f64;
        let mut matched = false;
        for q in terms(query) {
            let tf = d.iter().filter(|t| **t == q).count() as f64;
            if tf == 0.0 {
                continue;
            }
            let f = df[q.as_str()];
            let idf = (1.0 + ((n - f) as f64 + 0.5) / (f as f64 + 0.5)).ln() as f32;
            score += (idf as f64 * (tf / (norm + tf))) as f32 as f64;
            matched = true;
        }
        if matched {
            scored.push((i, score));
        }
    }
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(k);
    scored
        .into_iter()
        .map(|(i, s)| (format!("p{i}"), s))
        .collect()
}

fn ours(index: &Arc<Index>, query: &str, k: usize, threads: usize) -> Vec<(String, f64)> {
    let mut a = Analyzer::for_index(chars(), &STOP, index.clone());
    let q = analyze(&mut a, &[query.to_string()]);
    let hits = search_batch(index, &q, k, threads).unwrap();
    hits.docs
        .iter()
        .zip(&hits.scores)
        .map(|(&d, &s)| (index.pid(d).unwrap().to_string(), s))
        .collect()
}

/// Passages of words from a small Zipf-ish vocabulary (so terms repeat, tie and share stems).
fn corpus() -> impl Strategy<Value = Vec<String>> {
    let word = prop_oneof![
        6 => Just("the".to_string()),
        4 => Just("cat".to_string()),
        3 => Just("cats".to_string()),
        3 => Just("dog".to_string()),
        1 => "[a-e]{2}",
        1 => "[a-z]{2,4}",
        1 => Just("x".to_string()),
    ];
    prop::collection::vec(
        prop::collection::vec(word, 0..12).prop_map(|w| w.join(" ")),
        1..120,
    )
}

/// A larger corpus from a seed: `n` passages of 1..2*len words, word i drawn with probability
/// ~ 1/(i+1) among `vocab` (long lists next to short ones, so most postings can be skipped).
fn zipf_corpus(seed: u64, n: usize, vocab: usize, len: usize) -> Vec<String> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let h: Vec<f64> = (1..=vocab)
        .scan(0.0, |a, i| {
            *a += 1.0 / i as f64;
            Some(*a)
        })
        .collect();
    let draw = move |r: u64| {
        let u = (r % 1_000_000) as f64 / 1e6 * h[vocab - 1];
        format!("w{}", h.partition_point(|&c| c < u))
    };
    (0..n)
        .map(|_| {
            let words = 1 + next() as usize % (2 * len);
            (0..words)
                .map(|_| draw(next()))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn max_score_is_the_exhaustive_top_k(
        passages in corpus(),
        queries in prop::collection::vec("(cat|cats|dog|the|[a-e]{2}|[a-z]{3}| ){1,8}", 1..6),
        k in 1usize..30,
        memory in prop_oneof![Just(8u64), Just(1u64 << 30)],
        batch in 1usize..40,
        k1 in prop_oneof![Just(0.9), Just(1.5), Just(0.0)],
        b in prop_oneof![Just(0.4), Just(1.0), Just(0.0)],
    ) {
        let dir = tempfile::tempdir().unwrap();
        let scoring = Scoring::new(k1, b).unwrap();
        let index = Arc::new(build(dir.path(), &passages, scoring, memory, batch));
        for q in &queries {
            let want = reference(&passages, q, scoring, k);
            prop_assert_eq!(ours(&index, q, k, 1), want.clone(), "query {:?}", q);
            prop_assert_eq!(ours(&index, q, k, 2), want);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn max_score_is_exact_where_it_skips_most(
        seed in any::<u64>(),
        n in 200usize..14000,
        vocab in 4usize..80,
        len in 2usize..30,
        queries in prop::collection::vec(prop::collection::vec(0usize..80, 1..7), 10..20),
        k in prop_oneof![1usize..5, 5usize..60, Just(500)],
    ) {
        let passages = zipf_corpus(seed, n, vocab, len);
        let dir = tempfile::tempdir().unwrap();
        let scoring = Scoring::new(0.9, 0.4).unwrap();
        let index = Arc::new(build(dir.path(), &passages, scoring, 1 << 30, 512));
        for q in &queries {
            let q: Vec<String> = q.iter().map(|i| format!("w{}", i % vocab)).collect();
            let q = q.join(" ");
            prop_assert_eq!(ours(&index, &q, k, 1), reference(&passages, &q, scoring, k), "query {:?}", q);
        }
    }
}

#[test]
fn a_pass_per_term_gives_the_same_files_as_one_pass() {
    let passages: Vec<String> = (0..500)
        .map(|i| format!("w{} w{} cat dog{} the", i % 7, i % 13, i % 3))
        .collect();
    let (one, many) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = Scoring::new(0.9, 0.4).unwrap();
    build(one.path(), &passages, s, 1 << 30, 64);
    build(many.path(), &passages, s, 8, 64);
    for name in dense_pt_core::bm25::FILES {
        let (a, b) = (one.path().join(name), many.path().join(name));
        assert_eq!(
            std::fs::read(a).unwrap(),
            std::fs::read(b).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn long_lists_skip_by_block_and_stay_exact() {
    // 5,000 passages: "common" in all, "mid" in every 7th, "rare" in every 997th; k 10 and 1,000.
    let passages: Vec<String> = (0..5000)
        .map(|i| {
            let mut p = "common ".repeat(1 + i % 4);
            if i % 7 == 0 {
                p += &"mid ".repeat(1 + i % 3);
            }
            if i % 997 == 0 {
                p += "rare";
            }
            p + &format!(" filler{}", i % 50)
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let s = Scoring::new(0.9, 0.4).unwrap();
    let index = Arc::new(build(dir.path(), &passages, s, 1 << 30, 1000));
    for q in [
        "rare mid common",
        "common common mid",
        "mid filler3 rare",
        "common",
    ] {
        for k in [1, 10, 1000] {
            assert_eq!(
                ours(&index, q, k, 1),
                reference(&passages, q, s, k),
                "{q} k={k}"
            );
        }
    }
}

#[test]
fn unknown_and_stopword_queries_find_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let passages = vec!["cat dog".to_string(), "the end".to_string()];
    let index = Arc::new(build(
        dir.path(),
        &passages,
        Scoring::new(0.9, 0.4).unwrap(),
        1 << 20,
        10,
    ));
    assert!(ours(&index, "the of", 5, 1).is_empty());
    assert!(ours(&index, "zebra", 5, 1).is_empty());
    assert_eq!(ours(&index, "zebra cat", 5, 1).len(), 1);
    assert_eq!(index.header().num_docs, 2);
    assert_eq!(index.term_id("cat"), Some(0));
    assert_eq!(index.term_id("zebra"), None);
}

#[test]
fn a_corpus_of_stopwords_only_builds_and_finds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let passages = vec!["the of".to_string(), "x".to_string()];
    let index = Arc::new(build(
        dir.path(),
        &passages,
        Scoring::new(0.9, 0.4).unwrap(),
        1 << 20,
        10,
    ));
    assert_eq!(index.header().num_terms, 0);
    assert!(ours(&index, "the cat", 5, 1).is_empty());
}

#[test]
fn an_empty_corpus_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = IndexBuilder::create(dir.path()).unwrap();
    let err = b
        .finish(&[], Scoring::new(0.9, 0.4).unwrap(), 1 << 20)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

#[test]
fn a_truncated_file_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let passages: Vec<String> = (0..300)
        .map(|i| format!("a{} b{}", i % 5, i % 11))
        .collect();
    build(
        dir.path(),
        &passages,
        Scoring::new(0.9, 0.4).unwrap(),
        1 << 20,
        50,
    );
    for name in [
        "docs.bin",
        "doc_blocks.u64",
        "postings.u64",
        "pid_offsets.u64",
        "block_max.f32",
    ] {
        let path = dir.path().join(name);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 4]).unwrap();
        let err = Index::open(dir.path()).err().expect("refused");
        assert!(matches!(err, Error::Format { .. }), "{name}: {err}");
        std::fs::write(&path, &bytes).unwrap();
    }
    let head = dir.path().join("header.bin");
    let mut bytes = std::fs::read(&head).unwrap();
    bytes[0] = b'X';
    std::fs::write(&head, &bytes).unwrap();
    assert!(matches!(Index::open(dir.path()), Err(Error::Format { .. })));
}

#[test]
fn an_index_of_format_version_1_is_refused_in_one_line_saying_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let passages = vec!["cat dog".to_string(), "dog".to_string()];
    build(
        dir.path(),
        &passages,
        Scoring::new(0.9, 0.4).unwrap(),
        1 << 20,
        10,
    );
    let head = dir.path().join("header.bin");
    let mut bytes = std::fs::read(&head).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    std::fs::write(&head, &bytes).unwrap();
    let err = Index::open(dir.path()).err().expect("refused").to_string();
    assert_eq!(
        err,
        format!(
            "{}: BM25 index format version 1 is not supported (this dense-pt reads version 2); \
             rebuild it (dense-pt bm25 CORPUS --index DIR)",
            head.display()
        )
    );
}

/// Terms whose lists end exactly at a block's end, one past it and one short of it (the last
/// block bit-packed or written as varints), searched to every depth against the reference.
#[test]
fn lists_at_the_edges_of_a_block_stay_exact() {
    let passages: Vec<String> = (0..700)
        .map(|i| {
            let mut p = format!("filler{}", i % 3);
            // (word, every n-th passage, in how many passages): 128, 129, 127 and 256 postings.
            for (word, every, count) in [
                ("full", 5, 128),
                ("over", 4, 129),
                ("under", 3, 127),
                ("two", 2, 256),
            ] {
                if i % every == 0 && i / every < count {
                    p += &format!(" {word}").repeat(1 + i % 3);
                }
            }
            p
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let s = Scoring::new(0.9, 0.4).unwrap();
    let index = Arc::new(build(dir.path(), &passages, s, 1 << 30, 100));
    for q in [
        "full",
        "over",
        "under",
        "two",
        "full over under two",
        "two two under filler1",
    ] {
        for k in [1, 127, 128, 129, 700] {
            assert_eq!(
                ours(&index, q, k, 1),
                reference(&passages, q, s, k),
                "{q} k={k}"
            );
        }
    }
}

#[test]
fn bad_arguments_are_refused() {
    assert!(Scoring::new(-1.0, 0.4).is_err());
    assert!(Scoring::new(0.9, 1.5).is_err());
    assert!(Scoring::new(f64::NAN, 0.4).is_err());
    let dir = tempfile::tempdir().unwrap();
    let passages = vec!["cat dog".to_string()];
    let index = Arc::new(build(
        dir.path(),
        &passages,
        Scoring::new(0.9, 0.4).unwrap(),
        1 << 20,
        10,
    ));
    let q = Tokens {
        ids: vec![99],
        offsets: vec![0, 1],
    };
    assert!(search_batch(&index, &q, 5, 1).is_err());
    let q = Tokens {
        ids: vec![0],
        offsets: vec![0, 1],
    };
    assert!(search_batch(&index, &q, 0, 1).is_err());
    let other = tempfile::tempdir().unwrap();
    let mut b = IndexBuilder::create(other.path()).unwrap();
    assert!(b
        .add(
            &["a"],
            &Tokens {
                ids: vec![],
                offsets: vec![0]
            }
        )
        .is_err());
}
