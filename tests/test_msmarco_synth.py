"""benches/msmarco_synth.py: the synthetic MS MARCO the scale benchmarks run on (scale 0.001 here)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from dense_pt.data.judgements import read_qrels
from dense_pt.data.readers import read_corpus, read_queries

BENCHES = Path(__file__).resolve().parent.parent / "benches"


def load_synth():
    spec = importlib.util.spec_from_file_location("msmarco_synth", BENCHES / "msmarco_synth.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["msmarco_synth"] = mod
    spec.loader.exec_module(mod)
    return mod


synth = load_synth()


@pytest.fixture(scope="module")
def small(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth")
    return synth.generate(out, 0.001, seed=3, source=shared_data / "beir-scifact")


def test_counts_follow_the_scale() -> None:
    assert synth.counts(1.0) == synth.Counts(8_841_823, 502_939, 6_980)
    assert synth.counts(0.01) == synth.Counts(88_418, 5_029, 70)
    assert synth.counts(0.001).dev == 10  # at least a few dev queries
    for bad in (0.0, 0.0009, 1.5):
        with pytest.raises(ValueError):
            synth.counts(bad)


def test_files_read_back_through_our_readers(small: Path, shared_data: Path) -> None:
    c = synth.counts(0.001)
    passages = {p.id: p.text for p in read_corpus(small / "collection.tsv")}
    assert list(passages) == [str(i) for i in range(c.passages)]
    lengths = np.array([len(t.split()) for t in passages.values()])
    assert 52 <= lengths.mean() <= 60 and np.median(lengths) < lengths.mean()  # MS MARCO: ~56, skewed
    assert lengths.max() <= synth.LEN_MAX and lengths.min() >= synth.LEN_MIN
    vocab_words = set(
        w.decode() for w in synth.vocabulary(shared_data / "beir-scifact").blob.tobytes().split()
    )
    train = {q.id: q.text for q in read_queries(small / "queries.train.tsv")}
    dev = {q.id: q.text for q in read_queries(small / "queries.dev.small.tsv")}
    assert (len(train), len(dev)) == (c.train, c.dev) and not set(train) & set(dev)
    on = total = 0
    targets = set()
    for name, queries in (("qrels.train.tsv", train), ("qrels.dev.small.tsv", dev)):
        assert (small / name).read_text().splitlines()[0].count("\t") == 3  # qid 0 pid 1
        judged = list(read_qrels(small / name))
        assert [j.qid for j in judged] == list(queries) and all(j.rel == 1 for j in judged)
        for j in judged:
            words = queries[j.qid].split()
            assert synth.Q_MIN <= len(words) <= synth.Q_MAX and set(words) <= vocab_words
            target_words = set(passages[j.pid].split())
            assert sum(w in target_words for w in words) >= synth.MIN_ON
            on += sum(w in target_words for w in words)
            total += len(words)
            targets.add(j.pid)
    assert len(targets) == c.train + c.dev  # distinct targets
    assert 0.8 < on / total < 0.95  # mostly from the target, a few off-passage words


def test_seeded_and_reused(small: Path, shared_data: Path, tmp_path: Path) -> None:
    again = synth.generate(tmp_path / "a", 0.001, seed=3, source=shared_data / "beir-scifact")
    other = synth.generate(tmp_path / "b", 0.001, seed=4, source=shared_data / "beir-scifact")
    for name in synth.FILES:
        assert (again / name).read_bytes() == (small / name).read_bytes()
    assert (other / "collection.tsv").read_bytes() != (small / "collection.tsv").read_bytes()
    meta = json.loads((small / "synth.json").read_text())
    assert meta["scale"] == 0.001 and meta["seed"] == 3
    before = (again / "collection.tsv").stat().st_mtime_ns
    synth.ensure(again, 0.001, seed=3, source=shared_data / "beir-scifact")
    assert (again / "collection.tsv").stat().st_mtime_ns == before  # matching folder kept
    (again / "queries.train.tsv").unlink()
    synth.ensure(again, 0.001, seed=3, source=shared_data / "beir-scifact")
    assert (again / "queries.train.tsv").read_bytes() == (small / "queries.train.tsv").read_bytes()
