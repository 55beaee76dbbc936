"""Plain Python/numpy reference of dense_pt.masking, written from the documented algorithms.

It ports the counter-based row streams (SplitMix64, Lemire's bounded draw, the 256-layer
ziggurat with 64-bit draws and the indexed 32-bit noise) so the native maskers can be checked bit for bit, not only
statistically. Selection is the plain definition (sort by score, ties to the earlier unit), not
the native code's bucket selection.
"""

from __future__ import annotations

import math

import numpy as np

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15

SELECT, NOISE, SUBSET, REPLACE, SPAN, CROP = 1, 2, 3, 4, 5, 6


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


class RowRng:
    def __init__(self, seed: int, key: int):
        self.state = mix64(seed ^ mix64((key + GOLDEN) & M64))

    @classmethod
    def for_purpose(cls, seed: int, key: int, purpose: int) -> RowRng:
        return cls(mix64(seed ^ ((purpose * 0xD1B54A32D192ED03) & M64)), key)

    def next_u64(self) -> int:
        self.state = (self.state + GOLDEN) & M64
        return mix64(self.state)

    def next_f64(self) -> float:
        return (self.next_u64() >> 11) * (1.0 / (1 << 53))

    def below(self, n: int) -> int:
        m = self.next_u64() * n
        low = m & M64
        if low < n:
            threshold = ((1 << 64) - n) % n
            while low < threshold:
                m = self.next_u64() * n
                low = m & M64
        return m >> 64


ZIG_R = 3.654152885361009
ZIG_V = 0.00492867323399


def _density(x: float) -> float:
    return math.exp(-0.5 * x * x)


def _tables():
    x = [0.0] * 257
    x[0] = ZIG_V / _density(ZIG_R)
    x[1] = ZIG_R
    for i in range(1, 255):
        x[i + 1] = math.sqrt(-2.0 * math.log(ZIG_V / x[i] + _density(x[i])))
    x[256] = 0.0
    return x, [_density(v) for v in x]


ZIG_X, ZIG_F = _tables()


def _ziggurat_from(rng: RowRng, layer: int, negative: bool, x: float) -> float:
    """Finish a ziggurat attempt whose abscissa ``x`` in ``layer`` is known: accept inside the
    rectangle, else the tail (layer 0) or the wedge test, else start over with 64-bit draws."""
    while True:
        if x < ZIG_X[layer + 1]:
            return -x if negative else x
        if layer == 0:
            while True:
                a = -math.log(1.0 - rng.next_f64()) / ZIG_R
                b = -math.log(1.0 - rng.next_f64())
                if 2.0 * b > a * a:
                    return -(ZIG_R + a) if negative else ZIG_R + a
        y = ZIG_F[layer] + rng.next_f64() * (ZIG_F[layer + 1] - ZIG_F[layer])
        if y < _density(x):
            return -x if negative else x
        bits = rng.next_u64()
        layer, negative = bits & 0xFF, bool(bits & 0x100)
        x = ((bits >> 11) * (1.0 / (1 << 53))) * ZIG_X[layer]


def standard_normal(rng: RowRng) -> float:
    """One deviate from 64-bit draws: bits 0..8 layer, bit 8 sign, bits 11..64 the abscissa."""
    bits = rng.next_u64()
    layer = bits & 0xFF
    return _ziggurat_from(rng, layer, bool(bits & 0x100), ((bits >> 11) * (1.0 / (1 << 53))) * ZIG_X[layer])


ZIG_W = [x * (1.0 / (1 << 23)) for x in ZIG_X[:256]]


class Noise:
    """The importance noise, indexed: deviate ``i`` starts from a 32-bit half of draw ``i // 2``
    of the stream (the low half for even ``i``; draw ``j`` is the stream's ``j``-th ``next_u64``):
    bits 0..8 layer, bit 8 sign, bits 9..32 the abscissa. A half outside its layer's rectangle is
    finished like ``standard_normal`` on a stream of its own, ``RowRng(stream state, i)``."""

    def __init__(self, rng: RowRng):
        self.state = rng.state

    def deviate(self, i: int) -> float:
        d = mix64((self.state + (i // 2 + 1) * GOLDEN) & M64)
        w = d & 0xFFFFFFFF if i % 2 == 0 else d >> 32
        layer = w & 0xFF
        x = (w >> 9) * ZIG_W[layer]
        return _ziggurat_from(RowRng(self.state, i), layer, bool(w & 0x100), x)


def quota(n: int, p: float) -> int:
    return min(math.floor(n * p), n)


def maskable(att_row, special_row=None, ids_row=None, special_ids=()) -> list[int]:
    out = []
    for c in range(len(att_row)):
        if not att_row[c]:
            continue
        if special_row is not None and special_row[c]:
            continue
        if ids_row is not None and int(ids_row[c]) in special_ids:
            continue
        out.append(c)
    return out


def units(positions: list[int], word_row=None) -> list[list[int]]:
    """Whole-word units: runs of adjacent maskable positions sharing a non-negative word id."""
    out: list[list[int]] = []
    for c in positions:
        if (
            word_row is not None
            and out
            and word_row[c] >= 0
            and out[-1][-1] + 1 == c
            and word_row[out[-1][-1]] == word_row[c]
        ):
            out[-1].append(c)
        else:
            out.append([c])
    return out


def _greedy(order: list[list[int]], k: int) -> list[list[int]]:
    taken, count = [], 0
    for u in order:
        if count == k:
            break
        if count + len(u) <= k:
            taken.append(u)
            count += len(u)
    return taken


def _random_order(us: list, k: int, rng: RowRng) -> list[list[int]]:
    """Lazy Fisher-Yates visit with the greedy quota rule (draws stop once k is reached)."""
    order = list(us)
    taken, count, i = [], 0, 0
    while count < k and i < len(order):
        j = i + rng.below(len(order) - i)
        order[i], order[j] = order[j], order[i]
        if count + len(order[i]) <= k:
            taken.append(order[i])
            count += len(order[i])
        i += 1
    return taken


def select_row(positions, word_row, k, seed, key, importance_row=None, sigma=1.0):
    us = units(positions, word_row)
    if importance_row is None:
        return _random_order(us, k, RowRng.for_purpose(seed, key, SELECT)), us
    noise = Noise(RowRng.for_purpose(seed, key, NOISE))
    scored = []
    for ui, u in enumerate(us):
        vals = [float(importance_row[c]) for c in u]
        if any(math.isnan(v) for v in vals):
            raise ValueError("NaN")
        s = vals[0] if len(u) == 1 else sum(vals) / len(u)
        if sigma > 0:
            s = s + sigma * noise.deviate(ui)
        scored.append((-s, ui))
    scored.sort()
    return _greedy([us[ui] for _, ui in scored], k), us


def _rows(input_ids, attention_mask, special_tokens_mask, special_ids):
    B = input_ids.shape[0]
    for r in range(B):
        yield (
            r,
            maskable(
                attention_mask[r],
                None if special_tokens_mask is None else special_tokens_mask[r],
                input_ids[r] if special_ids else None,
                set(special_ids),
            ),
        )


def random_mask(
    input_ids, attention_mask, p, seed, special_tokens_mask=None, word_ids=None, special_ids=(), row_keys=None
):
    out = np.zeros(input_ids.shape, dtype=bool)
    for r, pos in _rows(input_ids, attention_mask, special_tokens_mask, special_ids):
        key = r if row_keys is None else int(row_keys[r])
        taken, _ = select_row(pos, None if word_ids is None else word_ids[r], quota(len(pos), p), seed, key)
        for u in taken:
            out[r, u] = True
    return out


def importance_mask(
    input_ids,
    attention_mask,
    importance,
    p,
    seed,
    sigma=1.0,
    special_tokens_mask=None,
    word_ids=None,
    special_ids=(),
    row_keys=None,
):
    out = np.zeros(input_ids.shape, dtype=bool)
    imp = np.asarray(importance, dtype=np.float64)
    for r, pos in _rows(input_ids, attention_mask, special_tokens_mask, special_ids):
        key = r if row_keys is None else int(row_keys[r])
        w = None if word_ids is None else word_ids[r]
        taken, _ = select_row(pos, w, quota(len(pos), p), seed, key, imp[r], sigma)
        for u in taken:
            out[r, u] = True
    return out


def nested_masks(
    input_ids,
    attention_mask,
    p_enc,
    p_dec,
    seed,
    importance=None,
    special_tokens_mask=None,
    sigma=1.0,
    word_ids=None,
    row_keys=None,
):
    enc = np.zeros(input_ids.shape, dtype=bool)
    dec = np.zeros(input_ids.shape, dtype=bool)
    imp = None if importance is None else np.asarray(importance, dtype=np.float64)
    for r, pos in _rows(input_ids, attention_mask, special_tokens_mask, ()):
        w = None if word_ids is None else word_ids[r]
        n = len(pos)
        key = r if row_keys is None else int(row_keys[r])
        taken, _ = select_row(pos, w, quota(n, p_dec), seed, key, None if imp is None else imp[r], sigma)
        for u in taken:
            dec[r, u] = True
        taken.sort(key=lambda u: u[0])  # units in sequence order before the subset draw
        for u in _random_order(taken, quota(n, p_enc), RowRng.for_purpose(seed, key, SUBSET)):
            enc[r, u] = True
    return enc, dec


def nth_regular(r: int, specials: list[int]) -> int:
    for s in sorted(set(specials)):
        if s <= r:
            r += 1
        else:
            break
    return r


def replace(
    input_ids,
    mask,
    mask_token_id,
    vocab_size,
    seed,
    mask_prob=0.8,
    random_prob=0.1,
    special_ids=(),
    row_keys=None,
):
    new = np.array(input_ids, dtype=np.int64)
    labels = np.full(new.shape, -100, dtype=np.int64)
    specials = sorted(set(special_ids))
    regular = vocab_size - len(specials)
    for r in range(new.shape[0]):
        rng = RowRng.for_purpose(seed, r if row_keys is None else int(row_keys[r]), REPLACE)
        for c in range(new.shape[1]):
            if not mask[r, c]:
                continue
            labels[r, c] = new[r, c]
            u = rng.next_f64()
            if u < mask_prob:
                new[r, c] = mask_token_id
            elif u < mask_prob + random_prob:
                new[r, c] = nth_regular(rng.below(regular), specials)
    return new, labels


def draw_span(rng: RowRng, length: int, min_len: int, max_len: int) -> tuple[int, int]:
    lo, hi = min(min_len, length), min(max_len, length)
    span = lo + rng.below(hi - lo + 1)
    start = rng.below(length - span + 1)
    return start, start + span


def span_crop(lengths, min_len, max_len, seed, n=1, row_keys=None):
    starts = np.zeros((len(lengths), n), dtype=np.int64)
    ends = np.zeros((len(lengths), n), dtype=np.int64)
    for r, length in enumerate(lengths):
        rng = RowRng.for_purpose(seed, r if row_keys is None else int(row_keys[r]), SPAN)
        for j in range(n):
            starts[r, j], ends[r, j] = draw_span(rng, int(length), min_len, max_len)
    return starts, ends
