//! Invariants of the collator on random corpora (exactness against the standalone maskers is
//! tested from Python, where the reference lives).
use super::*;
use proptest::prelude::*;

const VOCAB: i64 = 50;
const SPECIALS: [i64; 5] = [0, 1, 2, 3, 4];

fn config(method: &str, max_length: usize) -> CollateConfig {
    let rnd = |p| MaskSpec {
        selector: Selector::Random,
        p,
        whole_word: false,
    };
    let bert = Fill::Bert {
        mask_prob: 0.8,
        random_prob: 0.1,
    };
    let mut cfg = CollateConfig {
        max_length,
        crop: Crop::Random,
        pad_to_max: false,
        pad_to_multiple_of: 1,
        cls_id: 2,
        sep_id: 3,
        pad_id: 0,
        mask_id: 4,
        vocab_size: VOCAB,
        special_ids: SPECIALS.to_vec(),
        seed: 11,
        enc_mask: Some(rnd(0.3)),
        enc_fill: bert,
        enc_labels: Labels::Masked,
        decoder: Decoder::None,
        spans: None,
        return_original: true,
    };
    match method {
        "cdmae" => {
            cfg.decoder = Decoder::Independent {
                mask: MaskSpec {
                    selector: Selector::Importance { sigma: 1.0 },
                    p: 0.5,
                    whole_word: true,
                },
                fill: bert,
                labels: Labels::Masked,
            }
        }
        "simlm" => {
            cfg.enc_fill = Fill::Keep;
            cfg.enc_labels = Labels::Content;
            cfg.decoder = Decoder::Nested {
                p_dec: 0.5,
                fill: Fill::Keep,
                labels: Labels::Content,
            };
        }
        "contrastive" => {
            cfg.spans = Some(SpanSpec {
                min_len: 1,
                max_len: max_length - 2,
                n: 2,
            })
        }
        _ => {}
    }
    cfg
}

#[derive(Debug, Clone)]
struct Data {
    values: Vec<u32>,
    offsets: Vec<i64>,
    words: Vec<u32>,
    importance: Vec<f32>,
}

fn corpus_strategy() -> impl Strategy<Value = Data> {
    proptest::collection::vec(
        proptest::collection::vec((5u32..VOCAB as u32, any::<bool>()), 0..40),
        1..8,
    )
    .prop_map(|rows| {
        let mut d = Data {
            values: vec![],
            offsets: vec![0],
            words: vec![],
            importance: vec![],
        };
        for row in rows {
            let mut w = 0u32;
            for (j, (id, new_word)) in row.iter().enumerate() {
                w += (*new_word && j > 0) as u32;
                d.values.push(*id);
                d.words.push(w);
                d.importance.push(d.values.len() as f32); // distinct, increasing
            }
            d.offsets.push(d.values.len() as i64);
        }
        d
    })
}

impl Data {
    fn corpus(&self) -> Corpus<'_> {
        Corpus {
            values: IntView::U32(&self.values),
            offsets: &self.offsets,
            importance: Some(FloatView::F32(&self.importance)),
            word_ids: Some(IntView::U32(&self.words)),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]

    #[test]
    fn views_agree_with_one_crop(d in corpus_strategy(), max_length in 3usize..20,
                                 method in prop::sample::select(vec!["mlm", "cdmae", "simlm", "contrastive"]),
                                 epoch in 0u64..3, pick in proptest::collection::vec(any::<prop::sample::Index>(), 1..6)) {
        let n_rows = d.offsets.len() - 1;
        let rows: Vec<i64> = pick.iter().map(|i| i.index(n_rows) as i64).collect();
        let c = Collator::new(config(method, max_length)).unwrap();
        let b = c.collate(&d.corpus(), &rows, epoch).unwrap();
        let l = b.len;
        let orig = b.original_ids.as_ref().unwrap();
        for (bi, &r) in rows.iter().enumerate() {
            let row = bi * l..(bi + 1) * l;
            let (s, e) = (d.offsets[r as usize] as usize, d.offsets[r as usize + 1] as usize);
            let n = (e - s).min(max_length - 2);
            let o = &orig[row.clone()];
            // the content is one contiguous window of the row
            let window: Vec<i64> = o[1..n + 1].to_vec();
            let found = (s..=e - n).any(|a| d.values[a..a + n].iter().map(|&v| v as i64).eq(window.iter().copied()));
            prop_assert!(found);
            prop_assert_eq!(o[0], 2);
            prop_assert_eq!(o[n + 1], 3);
            prop_assert!(o[n + 2..].iter().all(|&v| v == 0));
            let att = &b.attention_mask[row.clone()];
            prop_assert!(att[..n + 2].iter().all(|&v| v == 1) && att[n + 2..].iter().all(|&v| v == 0));
            let st = &b.special_tokens_mask[row.clone()];
            let em = &b.enc_mask.as_ref().unwrap()[row.clone()];
            let lab = &b.labels[row.clone()];
            for j in 0..l {
                // never masked: special or padding
                if st[j] || att[j] == 0 { prop_assert!(!em[j]); }
                match method {
                    "simlm" => prop_assert_eq!(lab[j] != IGNORE_INDEX, j >= 1 && j <= n),
                    _ => prop_assert_eq!(lab[j] != IGNORE_INDEX, em[j]),
                }
                if lab[j] != IGNORE_INDEX { prop_assert_eq!(lab[j], o[j]); }
                if !em[j] { prop_assert_eq!(b.input_ids[row.start + j], o[j]); }
            }
            prop_assert_eq!(em.iter().filter(|&&x| x).count(), quota(n, 0.3));
            if let Some(dm) = b.dec_mask.as_ref() {
                let dm = &dm[row.clone()];
                if method == "simlm" {
                    prop_assert!((0..l).all(|j| !em[j] || dm[j]));
                    prop_assert_eq!(dm.iter().filter(|&&x| x).count(), quota(n, 0.5));
                    prop_assert_eq!(&b.input_ids[row.clone()], o);
                } else {
                    // CDMAE: whole words chosen by importance (increasing along the row)
                    let start = (s..=e - n).find(|&a| d.values[a..a + n].iter().map(|&v| v as i64).eq(window.iter().copied())).unwrap();
                    let imp_of = |j: usize| d.importance[start + j - 1];
                    for j in 1..n + 1 {
                        if dm[j] && j < n { // a masked word's tokens are all masked
                            if d.words[start + j] == d.words[start + j - 1] { prop_assert!(dm[j + 1]); }
                        }
                        let _ = imp_of(j);
                    }
                    let dl = &b.dec_labels.as_ref().unwrap()[row.clone()];
                    for j in 0..l { prop_assert_eq!(dl[j] != IGNORE_INDEX, dm[j]); }
                }
            }
        }
        if method == "contrastive" {
            let sl = b.span_len;
            let ids = b.span_input_ids.as_ref().unwrap();
            prop_assert_eq!(ids.len(), rows.len() * 2 * sl);
            for i in 0..rows.len() * 2 {
                prop_assert_eq!(ids[i * sl], 2);
            }
        }
    }
}

#[test]
fn same_row_same_entry_whatever_the_batch() {
    let d = Data {
        values: (0..300).map(|i| 5 + (i % 40)).collect(),
        offsets: vec![0, 100, 130, 300],
        words: (0..300).map(|i| i / 2).collect(),
        importance: (0..300).map(|i| (i % 17) as f32).collect(),
    };
    let c = Collator::new(config("cdmae", 64)).unwrap();
    let a = c.collate(&d.corpus(), &[0, 2, 1], 5).unwrap();
    let b = c.collate(&d.corpus(), &[2], 5).unwrap();
    let l = a.len;
    assert_eq!(l, 64);
    assert_eq!(&a.input_ids[l..2 * l], &b.input_ids[..]);
    assert_eq!(
        &a.dec_input_ids.as_ref().unwrap()[l..2 * l],
        &b.dec_input_ids.unwrap()[..]
    );
    // another epoch draws another crop / masks
    let e = c.collate(&d.corpus(), &[0, 2, 1], 6).unwrap();
    assert_ne!(a.input_ids, e.input_ids);
}

#[test]
fn bad_batches_are_errors() {
    let d = Data {
        values: vec![5, 6, 7, 99],
        offsets: vec![0, 3, 4],
        words: vec![0, 1, 2, 0],
        importance: vec![0.0, f32::NAN, 1.0, 0.0],
    };
    let c = Collator::new(config("mlm", 16)).unwrap();
    assert!(c
        .collate(&d.corpus(), &[], 0)
        .unwrap_err()
        .to_string()
        .contains("empty batch"));
    assert!(c
        .collate(&d.corpus(), &[2], 0)
        .unwrap_err()
        .to_string()
        .contains("out of range"));
    assert!(c
        .collate(&d.corpus(), &[1], 0)
        .unwrap_err()
        .to_string()
        .contains("token id 99"));
    let cd = Collator::new(config("cdmae", 16)).unwrap();
    let err = cd.collate(&d.corpus(), &[0], 0).unwrap_err().to_string();
    assert!(err.contains("NaN"), "{err}");
    let mut no_imp = d.corpus();
    no_imp.importance = None;
    assert!(cd
        .collate(&no_imp, &[0], 0)
        .unwrap_err()
        .to_string()
        .contains("importance column"));
    let mut cfg = config("mlm", 2);
    assert!(Collator::new(cfg.clone()).is_err());
    cfg.max_length = 10;
    cfg.mask_id = VOCAB;
    assert!(Collator::new(cfg).is_err());
}

#[test]
fn option_names_parse_and_bad_names_list_the_valid_ones() {
    assert_eq!("head".parse::<Crop>().unwrap(), Crop::Head);
    assert_eq!("random".parse::<Crop>().unwrap(), Crop::Random);
    let err = "tail".parse::<Crop>().unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown crop \"tail\" (expected one of 'head', 'random')"
    );

    for (name, want) in [
        ("none", Labels::None),
        ("masked", Labels::Masked),
        ("content", Labels::Content),
    ] {
        assert_eq!(name.parse::<Labels>().unwrap(), want);
    }
    let err = "Masked".parse::<Labels>().unwrap_err().to_string();
    assert!(err.contains("'none', 'masked', 'content'"), "{err}");

    for (name, want) in [
        ("none", DecoderKind::None),
        ("independent", DecoderKind::Independent),
        ("nested", DecoderKind::Nested),
        ("clean", DecoderKind::Clean),
        ("all_mask", DecoderKind::AllMask),
    ] {
        assert_eq!(name.parse::<DecoderKind>().unwrap(), want);
    }
    let err = "all-mask".parse::<DecoderKind>().unwrap_err().to_string();
    assert!(
        err.starts_with("unknown decoder view \"all-mask\""),
        "{err}"
    );
    assert!(err.contains("'all_mask'"), "{err}");
    assert!(matches!(
        "".parse::<DecoderKind>(),
        Err(Error::InvalidArgument(_))
    ));
}
