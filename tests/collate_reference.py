"""The collator composed from the plain reference maskers (tests/masking_reference.py)."""

from __future__ import annotations

import numpy as np

from masking_reference import (
    CROP,
    GOLDEN,
    M64,
    RowRng,
    importance_mask,
    mix64,
    nested_masks,
    random_mask,
    replace,
    span_crop,
)

VIEW_ENC, VIEW_DEC, VIEW_NESTED, VIEW_CROP, VIEW_SPAN = 1, 2, 3, 4, 5


def view_seed(seed: int, epoch: int, view: int) -> int:
    return mix64(mix64(seed ^ mix64(epoch ^ 0x5851F42D4C957F2D)) ^ ((view * GOLDEN) & M64))


def _labels(clean, lens, rule, mask=None):
    out = np.full(clean.shape, -100, dtype=np.int64)
    for b, n in enumerate(lens):
        for j in range(1, n + 1):
            if rule == "content" or (rule == "masked" and mask is not None and mask[b, j]):
                out[b, j] = clean[b, j]
    return out


def collate(values, offsets, rows, epoch, cfg, importance=None, word_ids=None):
    """``cfg`` keys mirror the native constructor: max_length, crop, pad_to_max, multiple, cls,
    sep, pad, mask, vocab, specials, seed, enc (kind, p, sigma, whole_word) or None, enc_fill
    (mask_prob, random_prob) or None, enc_labels, decoder, dec, p_dec, dec_fill, dec_labels,
    spans (min_len, max_len, n) or None, original (bool: return the clean ids)."""
    seed = cfg["seed"]
    cap = cfg["max_length"] - 2
    starts, lens = [], []
    for r in rows:
        s, e = int(offsets[r]), int(offsets[r + 1])
        n = min(e - s, cap)
        start = 0
        if e - s > cap and cfg["crop"] == "random":
            start = RowRng.for_purpose(view_seed(seed, epoch, VIEW_CROP), r, CROP).below(e - s - cap + 1)
        starts.append(s + start)
        lens.append(n)

    def padded(longest):
        length = cfg["max_length"] if cfg["pad_to_max"] else longest + 2
        m = cfg["multiple"]
        return -(-length // m) * m

    L = padded(max(lens))
    B = len(rows)
    ids = np.full((B, L), cfg["pad"], dtype=np.int64)
    att = np.zeros((B, L), dtype=np.int64)
    special = np.zeros((B, L), dtype=bool)
    words = np.full((B, L), -1, dtype=np.int64)
    imp = np.zeros((B, L), dtype=np.float64)
    for b, (a, n) in enumerate(zip(starts, lens, strict=True)):
        ids[b, 0], ids[b, n + 1] = cfg["cls"], cfg["sep"]
        ids[b, 1 : n + 1] = values[a : a + n]
        att[b, : n + 2] = 1
        special[b, 0] = special[b, n + 1] = True
        if word_ids is not None:
            words[b, 1 : n + 1] = word_ids[a : a + n]
        if importance is not None:
            imp[b, 1 : n + 1] = np.asarray(importance[a : a + n], dtype=np.float64)
    out = {"input_ids": ids.copy(), "attention_mask": att, "special_tokens_mask": special}
    clean = ids
    keys = list(rows)

    def select(spec, p, sd):
        kind, _, sigma, ww = spec
        w = words if ww else None
        if kind == "importance":
            return importance_mask(clean, att, imp, p, sd, sigma, special, word_ids=w, row_keys=keys)
        return random_mask(clean, att, p, sd, special, word_ids=w, row_keys=keys)

    def fill(mask, fill_cfg, rule, sd):
        if fill_cfg is None:
            return clean.copy(), _labels(clean, lens, rule, mask)
        mask_prob, random_prob = fill_cfg
        new, lab = replace(
            clean, mask, cfg["mask"], cfg["vocab"], sd, mask_prob, random_prob, cfg["specials"], row_keys=keys
        )
        if rule != "masked":
            lab = _labels(clean, lens, rule, mask)
        return new, lab

    enc_seed = view_seed(seed, epoch, VIEW_ENC)
    dec_seed = view_seed(seed, epoch, VIEW_DEC)
    dec_mask = None
    if cfg["enc"] is not None:
        spec = cfg["enc"]
        if cfg["decoder"] == "nested":
            kind, p_enc, sigma, ww = spec
            enc_mask, dec_mask = nested_masks(
                clean,
                att,
                p_enc,
                cfg["p_dec"],
                view_seed(seed, epoch, VIEW_NESTED),
                imp if kind == "importance" else None,
                special,
                sigma,
                words if ww else None,
                row_keys=keys,
            )
        else:
            enc_mask = select(spec, spec[1], enc_seed)
        out["input_ids"], out["labels"] = fill(enc_mask, cfg["enc_fill"], cfg["enc_labels"], enc_seed)
        out["enc_mask"] = enc_mask
    else:
        out["labels"] = _labels(clean, lens, cfg["enc_labels"])
    dec = cfg["decoder"]
    if dec in ("independent", "nested"):
        if dec == "independent":
            dec_mask = select(cfg["dec"], cfg["dec"][1], dec_seed)
        assert dec_mask is not None, "a nested decoder's mask comes with the encoder's"
        out["dec_input_ids"], out["dec_labels"] = fill(dec_mask, cfg["dec_fill"], cfg["dec_labels"], dec_seed)
        out["dec_mask"] = dec_mask
    elif dec == "clean":
        out["dec_input_ids"], out["dec_labels"] = clean.copy(), _labels(clean, lens, cfg["dec_labels"])
    elif dec == "all_mask":
        d = clean.copy()
        for b, n in enumerate(lens):
            d[b, 1 : n + 1] = cfg["mask"]
        out["dec_input_ids"], out["dec_labels"] = d, _labels(clean, lens, cfg["dec_labels"])
    if cfg.get("original"):
        out["original_ids"] = clean.copy()
    if cfg.get("spans"):
        lo, hi, n_sp = cfg["spans"]
        full = [int(offsets[r + 1] - offsets[r]) for r in rows]
        s, e = span_crop(full, lo, hi, view_seed(seed, epoch, VIEW_SPAN), n_sp, row_keys=keys)
        Ls = padded(int((e - s).max()))
        sp = np.full((B * n_sp, Ls), cfg["pad"], dtype=np.int64)
        sa = np.zeros((B * n_sp, Ls), dtype=np.int64)
        for b, r in enumerate(rows):
            for j in range(n_sp):
                a, z = int(offsets[r]) + int(s[b, j]), int(offsets[r]) + int(e[b, j])
                i = b * n_sp + j
                sp[i, 0], sp[i, z - a + 1] = cfg["cls"], cfg["sep"]
                sp[i, 1 : z - a + 1] = values[a:z]
                sa[i, : z - a + 2] = 1
        out["span_input_ids"], out["span_attention_mask"] = sp, sa
    return out
