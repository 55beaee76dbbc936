"""The training data path reads a negatives file as arrays (``read_mined``) and resolves its ids
against the store in one lookup; the groups it draws equal those of the per-query dict path of
earlier versions (kept below as the reference), and unknown passages are still refused."""

from __future__ import annotations

import numpy as np
import pytest

from dense_pt.data.store import CorpusStore, build_store_from_texts
from dense_pt.data.tokenizer import train_wordpiece
from dense_pt.errors import MismatchError
from dense_pt.finetune.data import GroupSampler, build_sampler
from dense_pt.retrieval.negatives import NegativesTable, read_mined, read_negatives, write_negatives


def reference_build_sampler(store, queries, qrels, negatives, tokenize, group_size, seed, restrict_to=None):
    """build_sampler before negatives were read as arrays (commit 29880bb), verbatim in substance."""
    index = {pid: i for i, pid in enumerate(store.ids.to_pylist())}
    keep = set(restrict_to) if restrict_to is not None else None
    qids, poss, negs = [], [], []
    skipped = {"no_text": 0, "no_positive_in_store": 0, "filled_negatives": 0}
    for q, ds in qrels.items():
        if keep is not None and q not in keep:
            continue
        if q not in queries:
            skipped["no_text"] += 1
            continue
        pos = [index[d] for d, r in ds.items() if r > 0 and d in index]
        if not pos:
            skipped["no_positive_in_store"] += 1
            continue
        neg_rows = [index[d] for d in (negatives or {}).get(q, []) if d not in ds or ds[d] <= 0]
        if len(neg_rows) < group_size - 1:
            skipped["filled_negatives"] += 1
        qids.append(q)
        poss.append(np.asarray(pos, dtype=np.int64))
        negs.append(np.asarray(neg_rows, dtype=np.int64))
    toks = [np.asarray(t, dtype=np.int64) for t in tokenize([queries[q] for q in qids])]
    return GroupSampler(
        qids, toks, poss, negs, len(index), group_size, seed, {"queries": len(qids), **skipped}
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tn")
    tok = train_wordpiece(["alpha beta gamma delta"] * 5, vocab_size=40, min_frequency=1)
    build_store_from_texts(tmp / "store", [(f"p{i}", "alpha beta") for i in range(40)], tok)
    return CorpusStore.open(tmp / "store")


def test_groups_from_the_arrays_equal_the_dict_path(store, tmp_path):
    rng = np.random.default_rng(0)
    qrels, rows = {}, {}
    for i in range(30):
        q = f"q{i}"
        judged = rng.choice(40, size=3, replace=False)
        qrels[q] = {f"p{judged[0]}": 1, f"p{judged[1]}": 0, f"p{judged[2]}": int(i % 3 == 0)}
        n = int(rng.integers(0, 12))
        negs = [f"p{j}" for j in rng.choice(40, size=n, replace=False)]
        rows[q] = [(p, float(k)) for k, p in enumerate(negs)]  # may include a judged positive
    qrels["ghost"] = {"p999": 1}  # no positive in the store
    queries = {q: "alpha" for q in qrels if q != "q7"}  # q7 without text
    write_negatives(tmp_path / "n.dpneg", NegativesTable(rows))
    tokenize = lambda texts: [[5, 6]] * len(texts)  # noqa: E731
    got = build_sampler(store, queries, qrels, read_mined(tmp_path / "n.dpneg"), tokenize, 6, 3)
    as_dict = {q: [p for p, _ in r] for q, r in read_negatives(tmp_path / "n.dpneg").rows.items()}
    want = reference_build_sampler(store, queries, qrels, as_dict, tokenize, 6, 3)
    assert got.qids == want.qids and got.stats == want.stats and got.num_passages == want.num_passages
    for a, b in zip(got.negatives, want.negatives, strict=True):
        assert a.tolist() == b.tolist()
    for a, b in zip(got.positives, want.positives, strict=True):
        assert a.tolist() == b.tolist()
    for epoch in (0, 1):
        for r in range(len(got)):
            (pa_, na), (pb, nb) = got.group(r, epoch), want.group(r, epoch)
            assert pa_ == pb and na.tolist() == nb.tolist() and na.dtype == nb.dtype
    # the dict path of today gives the same sampler too
    again = build_sampler(store, queries, qrels, as_dict, tokenize, 6, 3)
    assert [n.tolist() for n in again.negatives] == [n.tolist() for n in want.negatives]


def test_unknown_passages_and_another_corpus_are_refused(store, tmp_path):
    write_negatives(tmp_path / "bad.dpneg", NegativesTable({"q": [("p1", 1.0), ("nope", 0.5)]}))
    with pytest.raises(MismatchError, match=r"negatives name passage 'nope' \(query 'q'\)"):
        build_sampler(
            store, {"q": "a"}, {"q": {"p2": 1}}, read_mined(tmp_path / "bad.dpneg"), lambda t: [[1]], 2, 0
        )
    with pytest.raises(MismatchError, match="another corpus"):
        build_sampler(store, {"q": "a"}, {"q": {"elsewhere": 1}}, None, lambda t: [[1]], 2, 0)
    with pytest.raises(MismatchError, match="'nope', which is not in the corpus"):
        read_negatives(tmp_path / "bad.dpneg", known_ids=store)
    assert store.rows_of(["p3", "zz", "p0"]).tolist() == [3, -1, 0]
