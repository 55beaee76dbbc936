"""The vectorised miner, fed a run a chunk of queries at a time, mines what the per-query miner of
earlier versions mined (tests/mining_reference.py, kept verbatim): the same negatives in the same
order, the same seeded random draws, the same statistics, and a negatives file equal byte for byte."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mining_reference as ref
from dense_pt.config.retrieval import MineCommand
from dense_pt.errors import InvalidArgumentError, MismatchError
from dense_pt.retrieval.negatives import mine, mine_negatives, read_mined, write_negatives
from dense_pt.runs import read_run, write_run
from dense_pt.runs.chunk import chunks_of_mapping


def case(seed: int, queries: int = 80, docs: int = 60):
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(docs)] + ["é", "Z", "00"]
    run, qrels = {}, {}
    for i in range(queries):
        q = f"q{i}"
        if rng.random() < 0.9:
            run[q] = {d: rng.randint(-6, 6) / 4 for d in rng.sample(pool, rng.randint(1, 40))}  # ties, +-0
            if rng.random() < 0.2:
                run[q][rng.choice(list(run[q]))] = -0.0
        if rng.random() < 0.8:
            judged = rng.sample(pool, rng.randint(1, 4))
            qrels[q] = {d: rng.choice([0, 1, 1, 2]) for d in judged}
    qrels["only-judged"] = {"d1": 1}
    return run, qrels


def score_of(pairs):
    return [
        ((int(d[1:]) if d[1:].isdigit() else 7) % 9 - 4) / 2 if q != "q3" else float("nan") for q, d in pairs
    ]


SETTINGS = [
    dict(depth=10),
    dict(depth=12, num=4, sampling="random", seed=5),
    dict(depth=12, num=4, sampling="top", skip_top=2),
    dict(depth=8, pool="rank+positives", num=3, seed=1),
    dict(depth=6, pool="filtered", absolute_margin=0.25, max_score=1.0),
    dict(depth=30, relative_margin=0.1, relative_form="signed", min_score=-1.0, num=5, seed=9),
    dict(depth=30, relative_margin=0.5, absolute_margin=0.0, pool="rank+positives"),
]


@pytest.mark.parametrize("kw", SETTINGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_mining_equals_the_per_query_reference(tmp_path, kw, seed):
    run, qrels = case(seed)
    write_run(tmp_path / "r.arrow", run)
    # the reference reads the run as the file holds it (each query's hits in rank order)
    file_run = {q: h for c in read_run(tmp_path / "r.arrow") for q, h in c.to_dict().items()}
    scorer = score_of if "margin" in "".join(kw) else None
    want = ref.mine_negatives(file_run, qrels, scorer=scorer, **kw)
    s = MineCommand(**kw)
    for source in (read_run(tmp_path / "r.arrow", chunk_rows=17), tmp_path / "r.arrow", run):
        got = mine(source, qrels, s, scorer=scorer)
        assert got.rows() == want.rows
        assert list(got.rows()) == list(want.rows)  # the judgements' query order
        assert got.stats == want.stats
    ref.write_negatives(tmp_path / "want.dpneg", want)
    write_negatives(tmp_path / "got.dpneg", got)
    assert (tmp_path / "got.dpneg").read_bytes() == (tmp_path / "want.dpneg").read_bytes()
    back = read_mined(tmp_path / "got.dpneg")
    assert back.qids == got.qids and back.pids.to_pylist() == got.pids.to_pylist()


runs = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(5)]),
    st.dictionaries(
        st.sampled_from([f"d{i}" for i in range(25)]),
        st.integers(-12, 12).map(lambda x: x / 4),
        min_size=1,
        max_size=25,
    ),
    min_size=1,
)
qrels_st = st.dictionaries(
    st.sampled_from([f"q{i}" for i in range(5)]),
    st.dictionaries(st.sampled_from([f"d{i}" for i in range(25)]), st.integers(0, 2), min_size=1, max_size=5),
    min_size=1,
)


@settings(max_examples=60, deadline=None)
@given(runs, qrels_st, st.integers(1, 25), st.integers(0, 3), st.integers(0, 6), st.sampled_from(["rank", "rank+positives", "filtered"]),
       st.sampled_from(["random", "top"]), st.one_of(st.none(), st.sampled_from([0.0, 0.5])), st.integers(1, 3))  # fmt: skip
def test_mining_equals_the_reference_on_any_run(run, qrels, depth, skip, num, pool, sampling, margin, chunk):
    if skip >= depth or not any(q in run for q in qrels):
        return
    kw = dict(
        depth=depth, skip_top=skip, num=num, pool=pool, sampling=sampling, absolute_margin=margin, seed=2
    )
    want = ref.mine_negatives(run, qrels, scorer=score_of, **kw)
    chunks = list(chunks_of_mapping(run, chunk_rows=chunk))
    got = mine(chunks, qrels, MineCommand(**kw), scorer=score_of)
    assert got.rows() == want.rows and got.stats == want.stats


def test_refusals_name_what_is_wrong(tmp_path):
    run = {"q": {"a": 1.0, "ghost": 0.5}}
    with pytest.raises(MismatchError, match="share no query id"):
        mine_negatives(run, {"other": {"a": 1}})
    with pytest.raises(MismatchError, match="document 'ghost', not in the corpus"):
        mine_negatives(run, {"q": {"a": 1}}, known_ids=pa.array(["a", "b"]))
    with pytest.raises(MismatchError, match="another corpus"):
        mine_negatives(run, {"q": {"zz": 1}}, known_ids=pa.array(["a", "ghost"]))
    with pytest.raises(InvalidArgumentError, match="positive 'p' is not in the run"):
        mine_negatives(run, {"q": {"p": 1}}, MineCommand(absolute_margin=0.1))
    # a positive outside the corpus is not scored (as before): the query has no positive score
    judged = {"q": {"p": 1, "a": 0}}
    t = mine_negatives(
        run, judged, MineCommand(absolute_margin=0.1), known_ids={"a", "ghost"}, scorer=score_of
    )
    assert t.rows == {} and t.stats["queries_without_positive_score"] == 1
