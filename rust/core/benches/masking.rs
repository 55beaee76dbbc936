//! Criterion benches of the maskers on a 128 x 150 batch (the benchmark shape).
use criterion::{criterion_group, criterion_main, Criterion};
use dense_pt_core::collate::{
    CollateConfig, Collator, Corpus, Crop, Decoder, Fill, Labels, MaskSpec,
};
use dense_pt_core::masking::Selector;
use dense_pt_core::masking::{
    importance_mask, nested_masks, random_mask, replace, standard_normal, FloatView, IntView,
    MaskRows, Replacer,
};
use dense_pt_core::rng::RowRng;
use std::hint::black_box;

const B: usize = 128;
const L: usize = 150;

fn batch() -> (Vec<i64>, Vec<i64>, Vec<bool>, Vec<f32>) {
    let mut rng = RowRng::new(0, 0);
    let ids: Vec<i64> = (0..B * L).map(|_| 5 + rng.below(30_000) as i64).collect();
    let att = vec![1i64; B * L];
    let special: Vec<bool> = (0..B * L).map(|i| i % L == 0 || i % L == L - 1).collect();
    let imp: Vec<f32> = (0..B * L).map(|_| rng.next_f64() as f32).collect();
    (ids, att, special, imp)
}

fn bench(c: &mut Criterion) {
    let (ids, att, special, imp) = batch();
    let mut rows = MaskRows::new(B, L, IntView::I64(&att));
    rows.special_tokens_mask = Some(IntView::Bool(&special));
    c.bench_function("standard_normal x 19200", |b| {
        b.iter(|| {
            let mut rng = RowRng::new(1, 2);
            let mut s = 0.0;
            for _ in 0..B * L {
                s += standard_normal(&mut rng);
            }
            black_box(s)
        })
    });
    c.bench_function("random_mask 128x150 p=0.3", |b| {
        b.iter(|| random_mask(black_box(&rows), 0.3, 7, 1).unwrap())
    });
    c.bench_function("importance_mask 128x150 p=0.5 sigma=1", |b| {
        b.iter(|| importance_mask(black_box(&rows), FloatView::F32(&imp), 0.5, 1.0, 7, 1).unwrap())
    });
    c.bench_function("importance_mask 128x150 p=0.5 sigma=0", |b| {
        b.iter(|| importance_mask(black_box(&rows), FloatView::F32(&imp), 0.5, 0.0, 7, 1).unwrap())
    });
    c.bench_function("nested_masks 128x150 0.3/0.5", |b| {
        b.iter(|| nested_masks(black_box(&rows), 0.3, 0.5, None, 1.0, 7, 1).unwrap())
    });
    let mask = random_mask(&rows, 0.3, 7, 1).unwrap();
    let rep = Replacer::new(4, 30_005, 0.8, 0.1, &[0, 1, 2, 3, 4]).unwrap();
    c.bench_function("replace 128x150 (30% masked)", |b| {
        b.iter(|| {
            replace(
                IntView::I64(&ids),
                IntView::Bool(&mask),
                B,
                L,
                &rep,
                7,
                None,
                1,
            )
            .unwrap()
        })
    });
}

/// A CDMAE batch of 128 rows of >= 142 tokens (every row full at max_length 144).
fn bench_collate(c: &mut Criterion) {
    let mut rng = RowRng::new(3, 3);
    let mut values = Vec::new();
    let mut offsets = vec![0i64];
    for _ in 0..2000 {
        let len = 142 + rng.below(300) as usize;
        values.extend((0..len).map(|_| 5 + rng.below(7995) as u32));
        offsets.push(values.len() as i64);
    }
    let importance: Vec<u16> = (0..values.len())
        .map(|_| 0x3c00 - rng.below(0x400) as u16)
        .collect();
    let words: Vec<u32> = (0..values.len() as u32).map(|i| i / 2).collect();
    let bert = Fill::Bert {
        mask_prob: 0.8,
        random_prob: 0.1,
    };
    let cfg = CollateConfig {
        max_length: 144,
        crop: Crop::Random,
        pad_to_max: true,
        pad_to_multiple_of: 1,
        cls_id: 2,
        sep_id: 3,
        pad_id: 0,
        mask_id: 4,
        vocab_size: 8000,
        special_ids: vec![0, 1, 2, 3, 4],
        seed: 0,
        enc_mask: Some(MaskSpec {
            selector: Selector::Random,
            p: 0.3,
            whole_word: false,
        }),
        enc_fill: bert,
        enc_labels: Labels::Masked,
        decoder: Decoder::Independent {
            mask: MaskSpec {
                selector: Selector::Importance { sigma: 1.0 },
                p: 0.5,
                whole_word: false,
            },
            fill: bert,
            labels: Labels::Masked,
        },
        spans: None,
        return_original: false,
    };
    let collator = Collator::new(cfg).unwrap();
    let corpus = Corpus {
        values: IntView::U32(&values),
        offsets: &offsets,
        importance: Some(FloatView::F16(&importance)),
        word_ids: Some(IntView::U32(&words)),
    };
    let rows: Vec<i64> = (0..128).map(|i| i * 15).collect();
    let mut epoch = 0;
    c.bench_function("collate cdmae 128 x 144", |b| {
        b.iter(|| {
            epoch += 1;
            collator.collate(black_box(&corpus), &rows, epoch).unwrap()
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = bench, bench_collate
}
criterion_main!(benches);
