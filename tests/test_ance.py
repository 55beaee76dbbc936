"""ANCE negatives (``refresh_every``): every N steps the retriever being trained re-encodes the
corpus, searches the training queries and mines fresh negatives (``dense_pt.finetune.refresh``).

Checked against the command line run by hand on the weights of that step (``dense-pt encode`` +
``search`` + ``negatives mine``), against itself killed with SIGKILL in the middle of a refresh and
resumed (bit-identical weights and negatives), and under ``torchrun --nproc_per_node 2`` (gloo)
against one process (the encoding split over the processes: the same negatives; the training on
them: the same weights up to float32 rounding). Tiny models, a few steps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from dense_pt.cli import app
from dense_pt.config.retrieval import BM25Command, EncodeSettings, MineCommand
from dense_pt.retrieval.negatives import read_negatives

STEPS, EVERY = 4, 2


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """The synthetic corpus and store, a tiny BERT without dropout and a wide init (far-apart
    vectors: no near-ties for float32 rounding to flip), BM25 negatives to start from."""
    from transformers import BertConfig, BertModel

    from dense_pt.retrieval.bm25 import bm25
    from dense_pt.retrieval.negatives import mine_negatives, write_negatives
    from dense_pt.runs import load_run
    from retrieval_fixtures import tiny_setup

    root = tmp_path_factory.mktemp("ance")
    beir, model, store, _, qrels = tiny_setup(root)
    cfg = BertConfig.from_pretrained(model)
    cfg.update({"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.5})
    torch.manual_seed(0)
    BertModel(cfg).save_pretrained(model)
    bm25(beir / "corpus.jsonl", beir / "queries.jsonl", root / "bm25.trec", BM25Command(k=20))
    write_negatives(
        root / "neg.dpneg", mine_negatives(load_run(root / "bm25.trec"), qrels, MineCommand(depth=20, num=6))
    )
    # adam_eps 1 and no decay: a weight difference is a gradient difference (test_distributed_training)
    (root / "train.toml").write_text(
        f"[train]\nmax_steps = {STEPS}\nlr = 10.0\nadam_eps = 1.0\nwarmup = 0\nschedule = 'constant'\n"
        "weight_decay = 0.0\nthreads = 1\nsave_every = 100\nlog_every = 1\nprecision = 'fp32'\nseed = 3\n"
    )
    return root, beir, model, store


def _args(setup, out: Path, *extra: str) -> list[str]:
    root, beir, model, store = setup
    return ["train", "retriever", str(model), "--corpus", str(store), "--queries", str(beir / "queries.jsonl"),
            "--qrels", str(beir / "qrels" / "train.tsv"), "--negatives", str(root / "neg.dpneg"),
            "--config", str(root / "train.toml"), "--group-size", "3", "--query-max-length", "8",
            "--passage-max-length", "16", "--batch-size", "4", "--out", str(out), *extra]  # fmt: skip


# (--set for num: under torchrun, whose own parser takes `--num` for an abbreviation of --numa-binding)
ANCE = ("--refresh-every", str(EVERY), "--depth", "12", "--set", "mine.num=5")


def _cli(args: list[str]) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)


def _rows(path: Path) -> dict[str, list[tuple[str, float]]]:
    return read_negatives(path).rows


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(folder.rglob("*.safetensors")):
        out.update({f"{f.relative_to(folder)}:{k}": v for k, v in load_file(f).items()})
    assert out
    return out


@pytest.fixture(scope="module")
def ance(setup):
    """One uninterrupted run with refreshes at steps 2 (and none at 4, the last step)."""
    out = setup[0] / "ance"
    _cli(_args(setup, out, *ANCE))
    return out


def test_refresh_equals_encode_search_mine_on_that_steps_checkpoint(setup, ance, tmp_path):
    """The negatives the run trained on after step 2 are those `dense-pt encode` + `search` +
    `negatives mine` give with the weights of step 2: a run of 2 steps (the same first 2 steps: the
    same data, a constant rate) whose model equals checkpoint 2 of the ANCE run."""
    import json

    root, beir, _, store = setup
    two = tmp_path / "two"
    _cli([*_args(setup, two), "--max-steps", str(EVERY)])
    ckpt = load_file(ance / "checkpoints" / f"checkpoint-{EVERY:08d}" / "model.safetensors")
    final = load_file(two / "model" / "model.safetensors")
    assert {k: v for k, v in ckpt.items() if k.startswith("backbone.")}.keys() == {
        f"backbone.{k}" for k in final
    }
    assert all(torch.equal(ckpt[f"backbone.{k}"], v) for k, v in final.items())  # checkpoint 2 = that model
    train = tmp_path / "train.jsonl"  # the training queries (the judged ones; mining reads the qrels anyway)
    judged = set(json.loads(x)["query-id"] if x.startswith("{") else x.split("\t")[0]
                 for x in (beir / "qrels" / "train.tsv").read_text().splitlines()[1:])  # fmt: skip
    train.write_text("".join(x + "\n" for x in (beir / "queries.jsonl").read_text().splitlines()
                             if json.loads(x)["_id"] in judged))  # fmt: skip
    _cli(["encode", str(two / "model"), str(store), "--out", str(tmp_path / "ep")])
    _cli(["encode", str(two / "model"), str(train), "--out", str(tmp_path / "eq")])
    k = json.loads((ance / "refresh" / f"step-{EVERY:08d}" / "refresh.json").read_text())["k"]
    _cli(
        [
            "search",
            str(tmp_path / "eq"),
            str(tmp_path / "ep"),
            "--out",
            str(tmp_path / "run.trec"),
            "-k",
            str(k),
        ]
    )
    _cli(["negatives", "mine", str(tmp_path / "run.trec"), "--qrels", str(beir / "qrels" / "train.tsv"),
          "--out", str(tmp_path / "neg.dpneg"), "--depth", "12", "--num", "5", "--seed", "3"])  # fmt: skip
    got = _rows(ance / "refresh" / f"step-{EVERY:08d}" / "negatives.dpneg")
    want = _rows(tmp_path / "neg.dpneg")
    assert got == want and len(got) > 5
    assert got != {q: r for q, r in _rows(root / "neg.dpneg").items() if q in got}  # fresh, not BM25's
    manifest = json.loads((ance / "manifest.json").read_text())
    assert [r["step"] for r in manifest["settings"]["refresh"]["refreshes"]] == [EVERY]
    # only what the resume needs stays: the negatives and the record
    assert sorted(p.name for p in (ance / "refresh" / f"step-{EVERY:08d}").iterdir()) == [
        "negatives.dpneg", "refresh.json"]  # fmt: skip


def _kill_when(args: list[str], ready, cwd: Path) -> None:
    """Start `dense-pt ARGS`, SIGKILL it as soon as ``ready()`` holds."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "dense_pt", *args], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    deadline = time.time() + 300
    try:
        while not ready():
            assert proc.poll() is None, f"the run ended before the kill: {proc.stderr.read()[-2000:]!r}"  # type: ignore[union-attr]
            assert time.time() < deadline
            time.sleep(0.002)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()


@pytest.mark.slow
def test_killed_mid_refresh_resumes_bit_identically(setup, ance, tmp_path):
    """SIGKILL while the refresh at step 2 exports the model; resumed, SIGKILL again while it
    encodes; resumed again, the run ends with exactly the weights and negatives of the
    uninterrupted one."""
    out = tmp_path / "killed"
    folder = out / "refresh" / f"step-{EVERY:08d}"
    args = _args(setup, out, *ANCE)
    _kill_when(args, lambda: folder.is_dir() and not (folder / "model" / "exported.json").exists(), tmp_path)
    assert (out / "checkpoints" / f"checkpoint-{EVERY:08d}").is_dir()  # saved for the refresh, before it
    _kill_when(args, lambda: (folder / "emb_passages").is_dir(), tmp_path)
    assert not (folder / "refresh.json").exists(), "the kill came after the refresh finished"
    _cli(args)
    assert _rows(folder / "negatives.dpneg") == _rows(
        ance / "refresh" / f"step-{EVERY:08d}" / "negatives.dpneg"
    )
    a, b = _weights(out / "model"), _weights(ance / "model")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_encoding_split_over_processes_equals_one(setup, tmp_path):
    """encode(part=(r, 2)) by two callers + merge_parts: the folder one process writes, bit for bit."""
    from dense_pt.retrieval.encode import Embeddings, encode, merge_parts

    _, _, model, store = setup
    for r in (1, 0):
        encode(
            model,
            store,
            tmp_path / "two",
            EncodeSettings(shard_size=7, device="cpu"),
            progress=False,
            part=(r, 2),
        )
    with pytest.raises(Exception, match="no part manifests"):
        merge_parts(tmp_path / "one")
    merge_parts(tmp_path / "two")
    encode(model, store, tmp_path / "one", EncodeSettings(shard_size=7, device="cpu"), progress=False)
    one, two = Embeddings.open(tmp_path / "one"), Embeddings.open(tmp_path / "two")
    assert one.num_shards == two.num_shards > 2
    ids1, e1 = one.load_all()
    ids2, e2 = two.load_all()
    assert ids1 == ids2 and np.array_equal(e1, e2)
    assert not list((tmp_path / "two").glob("manifest.part-*"))


@pytest.mark.slow
def test_two_processes_refresh_the_same_negatives(setup, tmp_path):
    """torchrun --nproc_per_node 2 (gloo), half the batch per process, each encoding half of the
    shards, against one process. At lr 1e-30 no update survives float32 rounding, so both runs hold
    the initial weights bit for bit (with a real rate they differ by the rounding of the gradient's
    all-reduce, and near-tied negatives could swap): the refresh must give the same negatives, to the
    bit, and the (global, logged) losses after it must be the one process's, not those of the BM25
    negatives: both processes train on the refreshed ones."""
    import json

    from test_distributed_training import torchrun

    def losses(out: Path) -> list[float]:
        return [json.loads(x)["loss"] for x in (out / "log.jsonl").read_text().splitlines()]

    tiny_lr = ("--lr", "1e-30")
    _cli(_args(setup, tmp_path / "one", *ANCE, *tiny_lr))
    _cli(_args(setup, tmp_path / "bm25", *tiny_lr))
    args = _args(setup, tmp_path / "two", *ANCE, *tiny_lr)
    args[args.index("--batch-size") + 1] = "2"
    torchrun(args, tmp_path)
    step = f"step-{EVERY:08d}"
    two = _rows(tmp_path / "two" / "refresh" / step / "negatives.dpneg")
    assert two == _rows(tmp_path / "one" / "refresh" / step / "negatives.dpneg") and len(two) > 5
    one, stale, both = losses(tmp_path / "one"), losses(tmp_path / "bm25"), losses(tmp_path / "two")
    assert one[:EVERY] == pytest.approx(
        stale[:EVERY], rel=1e-6
    )  # the same model and negatives until the refresh
    assert both == pytest.approx(one, rel=1e-5)
    assert all(abs(a - b) > 1e-3 for a, b in zip(one[EVERY:], stale[EVERY:], strict=True))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--depth", "12"), "mining settings (depth) are for --refresh-every"),
        (("--refresh-every", "0"), "refresh_every: must be >= 1"),
        ((*ANCE, "--skip-top", "12"), "mine: skip_top 12 must be < depth 12"),
    ],
)
def test_refresh_settings_are_checked(setup, tmp_path, extra, message):
    from dense_pt.cli import exit_code

    res = CliRunner().invoke(app, [*_args(setup, tmp_path / "x"), *extra])
    assert res.exception is not None
    assert exit_code(res.exception) == 2 and message in str(res.exception)
    assert not (tmp_path / "x").exists()
