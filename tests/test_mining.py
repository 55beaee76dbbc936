"""Hard-negative mining: its pools and filters against a reference written the way
sentence-transformers computes them (masking with -inf, then top-k), against
sentence-transformers' ``mine_hard_negatives`` itself on a real (tiny) model with margins that bite,
and the positive that a run does not contain, whose score is computed instead of skipping the filter."""

from __future__ import annotations

import json
import math
from typing import TypedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.config.retrieval import EncodeSettings, MineCommand, SearchSettings
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.retrieval.negatives import POOLS, mine_negatives
from dense_pt.retrieval.search import PairScorer, run_from_arrays, search_arrays


def reference_mine(run, qrels, depth, skip_top, num, pool, absolute_margin=None, relative_margin=None,
                   relative_form="magnitude", max_score=None, min_score=None, score_of=None):  # fmt: skip
    """Mining written as sentence-transformers does it: rank, cut the pool, mask positives and
    filtered candidates with -inf, take the top ``depth`` by score, drop ``range_min``, take ``num``
    (sampling "top"). ``score_of(q, d)`` scores positives the run lacks."""
    out = {}
    mined = [q for q in qrels if run.get(q)]
    positives = {q: [d for d, r in qrels[q].items() if r > 0] for q in mined}
    widen = max(len(p) for p in positives.values()) if pool == "rank+positives" else 0
    for q in mined:
        ids = sorted(run[q], key=lambda d: (-run[q][d], d))
        if pool != "filtered":
            ids = ids[: depth + widen]
        s = np.array([run[q][d] for d in ids], dtype=np.float64)
        s[np.isin(ids, positives[q])] = -np.inf
        if absolute_margin is not None or relative_margin is not None:
            ref = min(run[q][d] if d in run[q] else score_of(q, d) for d in positives[q])
            if absolute_margin is not None:
                s[s + absolute_margin > ref] = -np.inf
            if relative_margin is not None:
                thr = (
                    ref * (1 - relative_margin)
                    if relative_form == "signed"
                    else ref - abs(ref) * relative_margin
                )
                s[s > thr] = -np.inf
        if max_score is not None:
            s[s > max_score] = -np.inf
        if min_score is not None:
            s[s < min_score] = -np.inf
        order = np.argsort(-s, kind="stable")[:depth]  # survivors first, in rank order
        picked = [ids[i] for i in order if np.isfinite(s[i])][skip_top:]
        out[q] = picked[:num] if num else picked
    return out


runs = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(4)]),
    st.dictionaries(
        st.sampled_from([f"d{i}" for i in range(30)]),
        st.integers(-40, 40).map(lambda x: x / 8),  # exact binary fractions: margins compare exactly
        min_size=1,
        max_size=30,
    ),
    min_size=1,
)
qrels_st = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(4)]),
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(30)]), st.integers(0, 2), min_size=1, max_size=6),
    min_size=1,
)
maybe = st.one_of(st.none(), st.integers(-8, 8).map(lambda x: x / 4))


def _score_of(q: str, d: str) -> float:
    """A deterministic score for positives outside the run."""
    return (int(d[1:]) % 9 - 4) / 2


@settings(max_examples=150, deadline=None)
@given(runs, qrels_st, st.integers(1, 30), st.integers(0, 5), st.integers(0, 8), st.sampled_from(POOLS),
       maybe, st.one_of(st.none(), st.sampled_from([0.0, 0.05, 0.5, 1.5])),
       st.sampled_from(["magnitude", "signed"]), maybe, maybe)  # fmt: skip
def test_mining_matches_the_masking_reference(run, qrels, depth, skip, num, pool, am, rm, form, mx, mn):
    if skip >= depth or not any(q in run for q in qrels):
        return
    if not any(r > 0 for q in qrels if run.get(q) for r in qrels[q].values()):
        return  # the reference needs a positive per mined query
    if any(not any(r > 0 for r in qrels[q].values()) for q in qrels if run.get(q)):
        return
    kw = dict(absolute_margin=am, relative_margin=rm, relative_form=form, max_score=mx, min_score=mn)

    def scorer(pairs):
        return [_score_of(q, d) for q, d in pairs]

    got = mine_negatives(run, qrels, MineCommand(depth=depth, skip_top=skip, num=num, pool=pool, sampling="top",
                                                 **kw), scorer=scorer)  # fmt: skip
    want = reference_mine(run, qrels, depth, skip, num, pool, score_of=_score_of, **kw)
    assert {q: got.pids(q) for q in want} == want
    for q, rows in got.rows.items():
        assert not {d for d, r in qrels[q].items() if r > 0} & {p for p, _ in rows}
    # random sampling picks a subset of the same candidates, in rank order, fixed by the seed
    a = mine_negatives(
        run, qrels, MineCommand(depth=depth, skip_top=skip, num=num, pool=pool, seed=3, **kw), scorer=scorer
    )
    b = mine_negatives(
        run, qrels, MineCommand(depth=depth, skip_top=skip, num=num, pool=pool, seed=3, **kw), scorer=scorer
    )
    assert a.rows == b.rows
    full = reference_mine(run, qrels, depth, skip, 0, pool, score_of=_score_of, **kw)
    for q, rows in a.rows.items():
        pids = [p for p, _ in rows]
        assert set(pids) <= set(full[q]) and len(pids) == min(num or len(full[q]), len(full[q]))
        assert pids == [p for p in full[q] if p in set(pids)]


def test_pools_filters_and_relative_forms_on_fixed_numbers():
    run = {"q": {"a": 5.0, "p": 4.0, "b": 3.9, "c": 3.0, "d": 1.0, "e": 0.5}}
    qrels = {"q": {"p": 1, "c": 0}}
    # rank: the top 3 hits are a, p, b; p is a positive -> a, b (SimLM's code: contexts[:depth])
    assert mine_negatives(run, qrels, MineCommand(depth=3)).pids("q") == ["a", "b"]
    # rank+positives: top 3 + 1 (one positive) -> a, p, b, c -> a, b, c
    assert mine_negatives(run, qrels, MineCommand(depth=3, pool="rank+positives")).pids("q") == [
        "a",
        "b",
        "c",
    ]
    # filtered: the first 3 non-positives, then skip 1; a judged-0 document is a negative
    assert mine_negatives(run, qrels, MineCommand(depth=3, skip_top=1, pool="filtered")).pids("q") == [
        "b",
        "c",
    ]
    t = mine_negatives(run, qrels, MineCommand(depth=10, absolute_margin=0.5))
    assert t.pids("q") == ["c", "d", "e"]  # a (5 + 0.5 > 4) and b (3.9 + 0.5 > 4) filtered
    assert t.stats["filtered_by_margin_or_score"] == 2 and t.stats["excluded_positives"] == 1
    # range_min counts the survivors of the filters (sentence-transformers' order of steps)
    assert mine_negatives(run, qrels, MineCommand(depth=10, absolute_margin=0.5, skip_top=1)).pids("q") == [
        "d",
        "e",
    ]
    assert mine_negatives(run, qrels, MineCommand(depth=10, max_score=3.9, min_score=1.0)).pids("q") == [
        "b",
        "c",
        "d",
    ]
    # relative margin with a negative positive score: the two forms differ
    neg = {"q": {"p": -0.50, "x": -0.49, "y": -0.52, "z": -0.80}}
    qn = {"q": {"p": 1}}
    # magnitude: keep s <= -0.5 - 0.5 * 0.05 = -0.525 -> z only
    assert mine_negatives(neg, qn, MineCommand(depth=10, relative_margin=0.05)).pids("q") == ["z"]
    # signed: keep s <= -0.5 * 0.95 = -0.475 -> x (above the positive!), y, z
    assert mine_negatives(neg, qn, MineCommand(depth=10, relative_margin=0.05, relative_form="signed")).pids("q") == [
        "x", "y", "z"
    ]  # fmt: skip
    pos = {"q": {"p": 0.8, "x": 0.77, "y": 0.75}}
    for form in ("magnitude", "signed"):  # equal for s+ >= 0: keep s <= 0.76
        assert mine_negatives(pos, qn, MineCommand(depth=10, relative_margin=0.05, relative_form=form)).pids(
            "q"
        ) == ["y"]
    with pytest.raises(MismatchError, match="not in the corpus"):
        mine_negatives(run, qrels, known_ids={"a", "b", "p"})
    with pytest.raises(MismatchError, match="another corpus"):
        mine_negatives(run, {"q": {"zz": 1}}, known_ids={"a", "p", "b", "c", "d", "e"})
    with pytest.raises(InvalidArgumentError, match="pool"):
        mine_negatives(run, qrels, MineCommand(pool="deep"))


def test_a_positive_missing_from_the_run_is_scored_not_skipped():
    run = {"q": {"a": 0.9, "b": 0.7, "c": 0.4}, "r": {"a": 0.3, "p2": 0.2, "b": 0.1}}
    qrels = {"q": {"p": 1}, "r": {"p2": 1}}
    # without a scorer the filter cannot be applied to q: an error, not unfiltered negatives
    with pytest.raises(InvalidArgumentError, match=r"query 'q': positive 'p' is not in the run"):
        mine_negatives(run, qrels, MineCommand(absolute_margin=0.1))
    # without a margin nothing needs the positive's score
    assert mine_negatives(run, qrels).pids("q") == ["a", "b", "c"]
    asked = []

    def scorer(pairs):
        asked.extend(pairs)
        return [0.75 for _ in pairs]

    t = mine_negatives(run, qrels, MineCommand(absolute_margin=0.1), scorer=scorer)
    assert asked == [("q", "p")]  # r's positive is in the run: its run score is used
    assert t.pids("q") == ["c"] and t.pids("r") == ["b"]  # q: s + 0.1 <= 0.75; r: s + 0.1 <= 0.2
    # positive_scores win over the run and the scorer
    t = mine_negatives(
        run, qrels, MineCommand(absolute_margin=0.1), scorer=scorer, positive_scores={"q": {"p": 1.5}}
    )
    assert t.pids("q") == ["a", "b", "c"]
    # a positive the scorer does not know (NaN) and no other: the query gets no negatives, counted
    t = mine_negatives(
        run, qrels, MineCommand(absolute_margin=0.1), scorer=lambda pairs: [math.nan] * len(pairs)
    )
    assert "q" not in t.rows and t.stats["queries_without_positive_score"] == 1


def test_pair_scorer_gives_the_search_score_to_the_bit():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((6, 33)).astype(np.float16)
    p = rng.standard_normal((40, 33)).astype(np.float16)
    qids, pids = [f"q{i}" for i in range(6)], [f"d{i}" for i in range(40)]
    for metric in ("ip", "cosine"):
        s, r = search_arrays(q, [p[:17], p[17:]], 9, metric)
        run = run_from_arrays(qids, pids, s, r)
        scorer = PairScorer(qids, q, pids, [p[:17], p[17:]], metric)
        pairs = [(qq, d) for qq in run for d in run[qq]]
        got = scorer([*pairs, ("q0", "nope"), ("nope", "d1")])
        assert [float(x) for x in got[:-2]] == [run[qq][d] for qq, d in pairs]
        assert np.isnan(got[-2:]).all()


def _fixed_bert(out, texts, seed: int):
    """A random 1-layer BERT with a whole-word vocabulary built from ``texts`` in sorted order (the
    WordPiece trainer's ids vary between processes; these do not), saved as an HF folder."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    words = sorted({w for t in texts for w in t.lower().split()})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words])}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", 2), ("[SEP]", 3)],
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                   pad_token="[PAD]", mask_token="[MASK]")  # fmt: skip
    torch.manual_seed(seed)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=64))  # fmt: skip
    return model, fast


@pytest.fixture(scope="module")
def st_case(tmp_path_factory):
    """A tiny random BERT saved as a sentence-transformers model, a synthetic corpus with unique
    texts, queries with one or two positives, and the model's own (normalised) embeddings."""
    import torch
    from sentence_transformers import SentenceTransformer

    from dense_pt.retrieval.encoder import save_sentence_transformer
    from pipeline_fixtures import synthetic_corpus

    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("st-mine")
    docs, queries, qrels = synthetic_corpus(n_per_topic=6, queries_per_topic=3, seed=1)
    docs = list({t: (d, t) for d, t in docs}.values())  # sentence-transformers merges equal texts
    queries = {q: t for t, q in {t: q for q, t in queries.items()}.items()}
    ids = {d for d, _ in docs}
    qrels = {q: {d: r for d, r in qrels[q].items() if d in ids} for q in queries}
    for i, q in enumerate(sorted(qrels)):  # one positive for every other query
        if i % 2:
            qrels[q] = dict(list(qrels[q].items())[:1])
    model_dir = tmp / "st"
    bert, tok = _fixed_bert(model_dir, [t for _, t in docs] + list(queries.values()), seed=5)
    save_sentence_transformer(bert, tok, model_dir, "mean", True, 64)
    model = SentenceTransformer(str(model_dir), device="cpu")
    qids = sorted(queries)
    q_emb = model.encode([queries[q] for q in qids], normalize_embeddings=True, convert_to_numpy=True)
    p_emb = model.encode([t for _, t in docs], normalize_embeddings=True, convert_to_numpy=True)
    # sentence-transformers ranks in float32, we in float64: the fixture must have no near-ties
    top = -np.sort(-(q_emb.astype(np.float64) @ p_emb.astype(np.float64).T), axis=1)[:, :20]
    assert np.diff(-top, axis=1).min() > 1e-6, "near-equal scores in the fixture"
    return model, docs, queries, qrels, qids, q_emb, p_emb


class Margins(TypedDict, total=False):
    """The margin and score bounds both miners take under the same names."""

    absolute_margin: float
    relative_margin: float
    max_score: float
    min_score: float


def _st_mine(model, docs, queries, qrels, **kw):
    """sentence-transformers' mine_hard_negatives, its output as {qid: [pid, ...]} in its order."""
    from datasets import Dataset
    from sentence_transformers.util import mine_hard_negatives

    by_text = {t: d for d, t in docs}
    text = dict(docs)
    anchors, positives = [], []
    for q in sorted(qrels):
        for d, r in qrels[q].items():
            if r > 0:
                anchors.append(queries[q])
                positives.append(text[d])
    out = mine_hard_negatives(
        Dataset.from_dict({"query": anchors, "positive": positives}), model, corpus=[t for _, t in docs],
        sampling_strategy="top", output_format="labeled-list", batch_size=16, verbose=False, **kw,
    )  # fmt: skip
    qid_of = {t: q for q, t in queries.items()}
    res: dict[str, list[str]] = {}
    for row in out:
        negs = [by_text[t] for t, label in zip(row["positive"], row["labels"], strict=True) if label == 0]
        assert res.setdefault(qid_of[row["query"]], negs) == negs  # one list per query, whatever the positive
    return res


def _mid_gap(values: np.ndarray, quantile: float) -> float:
    """A threshold near ``quantile`` of ``values`` lying in the middle of a gap between two of them,
    so float32 (sentence-transformers) and float64 (ours) agree on every comparison."""
    v = np.unique(values)
    at = int(quantile * len(v))
    lo, hi = max(1, at - 10), min(len(v), at + 11)
    i = lo + int(np.argmax(v[lo:hi] - v[lo - 1 : hi - 1]))  # the widest gap near the quantile
    assert v[i] - v[i - 1] > 1e-5, "near-equal scores at the threshold"
    return float((v[i] + v[i - 1]) / 2)


@pytest.mark.parametrize("case", ["absolute", "relative"])
def test_same_negatives_as_sentence_transformers(st_case, case):
    model, docs, queries, qrels, qids, q_emb, p_emb = st_case
    pids = [d for d, _ in docs]
    depth, skip = 12, 1 if case == "relative" else 0
    widen = max(len(v) for v in qrels.values())
    s, r = search_arrays(q_emb, [p_emb], depth + widen, "cosine")
    run = run_from_arrays(qids, pids, s, r)  # exactly the pool sentence-transformers cuts
    scorer = PairScorer(qids, q_emb, pids, [p_emb], "cosine")
    missing = [(q, d) for q in qrels for d in qrels[q] if d not in run[q]]
    assert missing, "the fixture should have positives outside the run"
    # margins from the data, so that they bite: gaps s+ - s (absolute) or (s+ - s) / |s+| (relative)
    full = scorer([(q, d) for q in qids for d in pids]).reshape(len(qids), len(pids))
    ref = np.array([min(full[i, pids.index(d)] for d in qrels[q]) for i, q in enumerate(qids)])
    gaps = ref[:, None] - full
    kw: Margins
    if case == "absolute":
        kw = {"absolute_margin": _mid_gap(gaps[gaps > 0], 0.3), "max_score": _mid_gap(full, 0.97)}
    else:
        kw = {"relative_margin": _mid_gap((gaps / np.abs(ref)[:, None])[gaps > 0], 0.3),
              "min_score": _mid_gap(full, 0.02)}  # fmt: skip
    want = _st_mine(model, docs, queries, qrels, range_min=skip, range_max=depth,
                    num_negatives=depth - skip, **kw)  # fmt: skip
    with pytest.raises(InvalidArgumentError, match="not in the run"):
        mine_negatives(run, qrels, MineCommand(depth=depth, skip_top=skip, pool="rank+positives", **kw))
    got = mine_negatives(run, qrels, MineCommand(depth=depth, skip_top=skip, pool="rank+positives", sampling="top",
                                                 **kw), scorer=scorer)  # fmt: skip
    assert got.stats["filtered_by_margin_or_score"] > 0 and got.stats["negatives"] > 0
    assert {q: got.pids(q) for q in got.rows if got.pids(q)} == want


def test_cli_mines_with_a_margin_from_the_runs_embeddings(tmp_path):
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.search import search
    from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir

    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(tmp_path / "beir", docs, queries, qrels)
    model = tiny_model(tmp_path / "m", [t for _, t in docs] + list(queries.values()), hidden=16, layers=1)
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts

    store = tmp_path / "store"
    build_store_from_texts(store, docs, Tokenizer.from_file(str(model / "tokenizer.json")), max_length=64)
    encode(model, store, tmp_path / "ep", EncodeSettings(device="cpu"), progress=False)
    encode(model, beir / "queries.jsonl", tmp_path / "eq", EncodeSettings(device="cpu"), progress=False)
    search(tmp_path / "eq", tmp_path / "ep", tmp_path / "run.trec", SearchSettings(k=5))
    base = ["negatives", "mine", str(tmp_path / "run.trec"), "--qrels", str(beir / "qrels" / "train.tsv"),
            "--absolute-margin", "0.0", "--depth", "5"]  # fmt: skip
    res = CliRunner().invoke(app, [*base, "--out", str(tmp_path / "a.dpneg")])
    assert res.exit_code != 0 and isinstance(res.exception, InvalidArgumentError)  # `dense-pt` exits 2 on it
    assert "not in the run" in str(res.exception) and "--query-embeddings" in str(res.exception)
    emb = ["--query-embeddings", str(tmp_path / "eq"), "--passage-embeddings", str(tmp_path / "ep")]
    res = CliRunner().invoke(app, [*base, *emb, "--out", str(tmp_path / "n.dpneg")])
    assert res.exit_code == 0, res.output
    man = json.loads((tmp_path / "n.dpneg.manifest.json").read_text())
    assert man["settings"]["absolute_margin"] == 0.0 and man["settings"]["pool"] == "rank"
    assert man["stats"]["queries_without_positive_score"] == 0
