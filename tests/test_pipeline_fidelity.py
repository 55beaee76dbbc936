"""The pipeline as SimLM runs it (Figure 2, Table 13): the defaults and profiles, the checkpoint each
stage starts from, and the lengths each model is trained AND encoded with."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_helpers import subcommand, subgroup
from dense_pt.config.retrieval import EncodeSettings
from dense_pt.errors import FormatError
from dense_pt.pipeline.config import validate_config

BASE = {"out": "x", "data": {"corpus": "c", "queries": "q", "qrels": "r"}, "model": {"init": "m"}}


def effective_tau(loss: str, tau: float | None) -> float | None:
    """The temperature a stage trains with: its ``tau``, or its loss's own when unset."""
    from dense_pt.objectives.retrieval import resolve_loss

    return resolve_loss(loss).resolve_tau(tau)


def train_set(section) -> dict:
    """A stage's ``train`` table as set (profile, file, stage defaults), the keys it fingerprints."""
    return section.train.model_dump(exclude_none=True)


def test_the_paper_profile_is_simlm_table_13(tmp_path: Path):
    cfg = validate_config(BASE, tmp_path)
    assert cfg.profile == "paper"
    for r in (cfg.r1, cfg.r2):  # "Retriever 1-2" column
        assert (r.group_size, r.query_max_length, r.passage_max_length) == (16, 32, 144)
        assert r.loss == "simlm" and effective_tau(r.loss, r.tau) == 0.02  # tau unset: the loss's own
        # weight decay: the authors' scripts set none, so Hugging Face's 0 (not the engine's 0.01)
        assert (
            train_set(r) == {"lr": 2e-5, "warmup": 1000, "batch_size": 64, "weight_decay": 0.0}
            and r.epochs == 3
        )
    rr = cfg.reranker  # "Re-ranker" column: ELECTRA-base, 63 negatives, 192 tokens
    assert rr.init == "google/electra-base-discriminator"
    assert (rr.group_size, rr.max_length, rr.depth, rr.rerank_depth) == (64, 192, 200, 200)
    assert (
        train_set(rr) == {"lr": 3e-5, "warmup": 1000, "batch_size": 64, "weight_decay": 0.0}
        and rr.epochs == 3
    )
    # train_reranker_marco.sh: --rerank_forward_factor 4 --rerank_use_rdrop True (the default loss "simlm")
    assert rr.loss == "simlm" and rr.forward_factor is None and rr.group_size // 4 == 16
    d = cfg.distill  # "Retriever distill" column: from SimLM, 23 negatives, 6 epochs
    assert d.init == "model" and (d.group_size, d.alpha, effective_tau(d.loss, d.tau)) == (24, 0.2, 0.02)
    assert (d.query_max_length, d.passage_max_length) == (32, 144)
    assert (
        train_set(d) == {"lr": 3e-5, "warmup": 1000, "batch_size": 64, "weight_decay": 0.0} and d.epochs == 6
    )
    m = cfg.mine  # negatives from the top 200, SimLM's pool (the retriever's top-k, positives dropped)
    assert (m.depth, m.bm25_depth, m.pool, m.num) == (200, 200, "rank", 0)

    cpu = validate_config({**BASE, "profile": "cpu"}, tmp_path)
    assert [t.group_size for t in (cpu.r1, cpu.r2, cpu.reranker, cpu.distill)] == [4, 4, 8, 6]
    assert (cpu.mine.depth, cpu.reranker.depth, cpu.reranker.rerank_depth) == (100, 50, 50)
    assert train_set(cpu.r1) == {"lr": 2e-5, "warmup": 0.1, "batch_size": 16, "weight_decay": 0.01}
    assert cpu.distill.epochs == 2 and cpu.reranker.loss == "listwise"  # as BENCHMARKS.md measured them
    for t in (cpu.r1, cpu.r2, cpu.distill):  # the lengths are never shrunk
        assert (t.query_max_length, t.passage_max_length) == (32, 144)
    assert cpu.reranker.max_length == 192 and cpu.reranker.init == rr.init
    # the file wins over the profile, key by key (train too)
    mine = validate_config(
        {**BASE, "profile": "cpu", "r1": {"group_size": 2, "train": {"lr": 1e-5}}}, tmp_path
    )
    assert mine.r1.group_size == 2
    assert train_set(mine.r1) == {"lr": 1e-5, "warmup": 0.1, "batch_size": 16, "weight_decay": 0.01}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"profile": "gpu"}, "profile: must be one of paper or cpu"),
        (
            {"encode": {"passage_max_length": 256}},
            r"encode: passage_max_length: encoding uses each retriever",
        ),
        ({"mine": {"margin": 0.1}}, r"mine: margin: renamed absolute_margin"),
        ({"mine": {"pool": "deep"}}, r"mine: pool must be one of rank, rank\+positives, filtered"),
        ({"r2": {"epochs": 2, "train": {"max_steps": 5}}}, r"r2: gives both epochs and train.max_steps"),
        ({"distill": {"init": "r1"}}, r"distill\.init: must be one of model or r2, got 'r1'"),
        (
            {"r1": {"passage_max_length": 300}},
            r"r1\.passage_max_length 300 exceeds data\.max_length 256",
        ),
        ({"reranker": {"max_length": 300}}, r"raise data\.max_length to at least 298"),
    ],
)
def test_bad_fine_tuning_settings_are_named(tmp_path: Path, raw, message):
    with pytest.raises(FormatError, match=message):
        validate_config({**BASE, **raw}, tmp_path)


def test_cli_defaults_are_the_papers():
    import typer.main

    from dense_pt.cli import app
    from dense_pt.config.finetune import DistillCommand, RerankerCommand, RetrieverCommand
    from dense_pt.config.retrieval import EncodeSettings, MineCommand

    group = typer.main.get_command(app)
    train = subgroup(group, "train").commands

    def defaults(cmd, model):
        """The command's effective defaults: the model's (its options show them; one not given
        reaches the command unset, and the model fills it)."""
        params = {p.name: p for p in cmd.params}
        dump = model().model_dump()
        assert all(params[k].default == dump[k] for k in model.model_fields if k in params)
        return dump

    r = defaults(train["retriever"], RetrieverCommand)
    rr, d = defaults(train["reranker"], RerankerCommand), defaults(train["distill"], DistillCommand)
    assert (r["group_size"], r["query_max_length"], r["passage_max_length"]) == (16, 32, 144)
    assert r["tau"] is None and effective_tau(r["loss"], r["tau"]) == 0.02
    assert (rr["group_size"], rr["query_max_length"], rr["max_length"]) == (64, 32, 192)
    assert (d["group_size"], d["query_max_length"], d["passage_max_length"], d["alpha"]) == (24, 32, 144, 0.2)
    mine = defaults(subcommand(group, "negatives", "mine"), MineCommand)
    assert (mine["depth"], mine["pool"], mine["num"], mine["relative_form"]) == (200, "rank", 0, "magnitude")
    # encode's length: None, the lengths the model was trained with
    assert defaults(subcommand(group, "encode"), EncodeSettings)["max_length"] is None


def _fake_electra_in_hub_cache(cache: Path, tokenizer_from: Path) -> Path:
    """A tiny random ELECTRA discriminator, stored where the Hugging Face cache keeps
    google/electra-base-discriminator, with the tokenizer of the pipeline's model."""
    import torch
    from transformers import ElectraConfig, ElectraForPreTraining

    repo = cache / "models--google--electra-base-discriminator"
    commit = "0" * 40
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    vocab = json.loads((tokenizer_from / "tokenizer.json").read_text())["model"]["vocab"]
    torch.manual_seed(1)
    cfg = ElectraConfig(vocab_size=len(vocab), embedding_size=16, hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, max_position_embeddings=128)  # fmt: skip
    ElectraForPreTraining(cfg).save_pretrained(str(snap))
    for f in tokenizer_from.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens")):
            shutil.copy(f, snap / f.name)
    return snap


def _train_manifest(out: Path, stage: str) -> dict:
    return json.loads((out / stage / "train" / "manifest.json").read_text())


def _emb_length(out: Path, stage: str, kind: str) -> int:
    return json.loads((out / stage / f"emb_{kind}" / "manifest.json").read_text())["settings"]["max_length"]


def test_each_stage_starts_where_simlm_starts_and_encodes_with_its_training_lengths(tmp_path, monkeypatch):
    import huggingface_hub.constants
    import torch

    from dense_pt.pipeline.run import run_pipeline
    from dense_pt.retrieval.encode import encode, model_hash
    from pipeline_fixtures import small_config, synthetic_corpus, tiny_model, write_beir

    torch.set_num_threads(1)
    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(tmp_path / "data", docs, queries, qrels)
    model = tiny_model(tmp_path / "model", [t for _, t in docs] + list(queries.values()), hidden=16, layers=1)
    electra = _fake_electra_in_hub_cache(tmp_path / "hub", model)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out = tmp_path / "pipe"
    cfg = small_config(out, beir, model, steps=2)
    # distinct lengths per stage, so each one's encoding shows whose lengths it used
    lengths = {"r1": (12, 40), "r2": (14, 48), "distill": (10, 56)}
    for stage, (q, p) in lengths.items():
        table = getattr(cfg, stage)
        table.query_max_length, table.passage_max_length = q, p
    cfg.reranker.query_max_length, cfg.reranker.max_length = 8, 60
    cfg.reranker.init = "google/electra-base-discriminator"
    lines: list[str] = []
    run_pipeline(cfg, progress=False, log=lines.append)

    # Figure 2: R1, R2 and the distilled retriever start from the pre-trained model, the re-ranker
    # from the ELECTRA discriminator (found in the local hub cache, never downloaded)
    base = model_hash(model)
    for stage in ("r1", "r2", "distill"):
        inputs = _train_manifest(out, stage)["inputs"]["model"]
        assert Path(inputs["path"]) == model and inputs["sha256"] == base, stage
    rr = _train_manifest(out, "reranker")["inputs"]["model"]
    assert Path(rr["path"]) == electra and rr["sha256"] == model_hash(electra)
    assert (
        json.loads((out / "reranker" / "train" / "model" / "config.json").read_text())["model_type"]
        == "electra"
    )

    # Table 13: the lengths of training are the lengths of encoding (zero-shot: R1's)
    assert (_emb_length(out, "zeroshot", "queries"), _emb_length(out, "zeroshot", "passages")) == lengths[
        "r1"
    ]
    for stage, (q, p) in lengths.items():
        settings = _train_manifest(out, stage)["settings"]
        assert (settings["query_max_length"], settings["passage_max_length"]) == (q, p)
        assert (_emb_length(out, stage, "queries"), _emb_length(out, stage, "passages")) == (q, p), stage
        saved = json.loads((out / stage / "train" / "model" / "retriever.json").read_text())
        assert saved == {"query_max_length": q, "passage_max_length": p}
    rr_saved = json.loads((out / "reranker" / "train" / "model" / "reranker.json").read_text())
    assert rr_saved == {"query_max_length": 8, "max_length": 60}  # re-ranking and scoring read these
    # `dense-pt encode` without --max-length encodes a trained retriever with its training lengths
    r2_model = out / "r2" / "train" / "model"
    encode(r2_model, out / "store" / "store", tmp_path / "ep", EncodeSettings(device="cpu"), progress=False)
    encode(r2_model, beir / "queries.jsonl", tmp_path / "eq", EncodeSettings(device="cpu"), progress=False)
    got = [
        json.loads((tmp_path / f / "manifest.json").read_text())["settings"]["max_length"]
        for f in ("eq", "ep")
    ]
    assert tuple(got) == lengths["r2"]

    # the other initialisations stay options: distillation from R2, the re-ranker from the model
    cfg.distill.init = "r2"
    cfg.reranker.init = "model"
    lines.clear()
    run_pipeline(cfg, progress=False, log=lines.append)
    assert "[r2] up to date, skipped" in lines and "[reranker] running" in lines
    assert Path(_train_manifest(out, "distill")["inputs"]["model"]["path"]) == r2_model
    assert Path(_train_manifest(out, "reranker")["inputs"]["model"]["path"]) == model


def test_a_missing_or_foreign_reranker_checkpoint_stops_before_the_first_stage(tmp_path, monkeypatch):
    import huggingface_hub.constants

    from dense_pt.errors import DensePtError, InvalidArgumentError
    from dense_pt.pipeline.run import run_pipeline
    from pipeline_fixtures import small_config, synthetic_corpus, tiny_model, write_beir

    docs, queries, qrels = synthetic_corpus(n_per_topic=2, queries_per_topic=1)
    beir = write_beir(tmp_path / "data", docs, queries, qrels)
    model = tiny_model(tmp_path / "model", [t for _, t in docs], hidden=16, layers=1)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    cfg = small_config(tmp_path / "pipe", beir, model, steps=1)
    cfg.reranker.init = "google/electra-base-discriminator"
    with pytest.raises(InvalidArgumentError, match=r"local Hugging Face cache.*hf download google/electra"):
        run_pipeline(cfg, progress=False, log=lambda _: None)
    assert not (tmp_path / "pipe" / "store").exists()
    # another vocabulary than the corpus store's: refused up front too
    other = tiny_model(tmp_path / "other", ["completely different words here"], hidden=16, layers=1)
    cfg.reranker.init = str(other)
    with pytest.raises(DensePtError, match="another vocabulary"):
        run_pipeline(cfg, progress=False, log=lambda _: None)
    assert not (tmp_path / "pipe" / "store").exists()
