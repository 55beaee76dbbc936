"""The per-paper recipes in examples/ (every *.toml but the CPU example scifact.toml, the studies
study-*.toml and the ``dense-pt pretrain`` configs *-pretrain.toml): each loads, its pre-training values are the
method's declared defaults, and it runs to the end on a tiny corpus and model, shrunk only by
``--set`` overrides (steps, batch, lengths, group sizes), so the file itself is what is tested."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dense_pt.config.train import STEP_SWITCHES
from dense_pt.pipeline import load_pipeline_config, run_pipeline
from dense_pt.pipeline.run import planned_stages
from dense_pt.training import read_toml

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
RECIPES = sorted(
    p
    for p in EXAMPLES.glob("*.toml")
    if p.name != "scifact.toml" and not p.name.endswith("-pretrain.toml") and not p.name.startswith("study-")
)
PRETRAIN_CONFIGS = sorted(EXAMPLES.glob("*-pretrain.toml"))
TINY_TRAIN = {"batch_size": 4, "grad_accum": 1, "precision": "fp32", "threads": 1}


def test_every_paper_has_a_recipe():
    assert {p.stem for p in RECIPES} == {"simlm", "cdmae", "seed", "llm-expansion"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    """The demo's synthetic corpus split into train / dev qrels, and a tiny random 2-layer model."""
    import torch

    from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir

    torch.set_num_threads(1)
    base = tmp_path_factory.mktemp("recipes")
    docs, queries, qrels = synthetic_corpus(n_per_topic=4, queries_per_topic=2)
    beir = write_beir(base / "data", docs, queries, qrels)
    dev = {q for i, q in enumerate(sorted(qrels)) if i % 4 == 0}
    for name, keep in (("train", lambda q: q not in dev), ("dev", lambda q: q in dev)):
        lines = [f"{q} 0 {d} {r}" for q, ds in sorted(qrels.items()) if keep(q) for d, r in ds.items()]
        (base / f"{name}.qrels").write_text("\n".join(lines) + "\n")
    model = tiny_model(base / "model", [t for _, t in docs] + list(queries.values()), hidden=16, layers=2)
    return {"base": base, "beir": beir, "model": model, "docs": docs}


def _overrides(raw: dict, tiny: dict[str, Path], out: Path, model: Path) -> list[str]:
    beir = tiny["beir"]
    sets = [f"out='{out}'", f"data.corpus='{beir / 'corpus.jsonl'}'", f"data.queries='{beir / 'queries.jsonl'}'",
            f"data.qrels='{tiny['base'] / 'train.qrels'}'", f"data.dev_qrels='{tiny['base'] / 'dev.qrels'}'",
            "data.max_length=64", f"model.init='{model}'", "eval.k=20", "encode.batch_size=32",
            "mine.depth=20", "mine.bm25_depth=20"]  # fmt: skip
    if "pretrain" in raw:
        sets += ["pretrain.max_length=64", "pretrain.train.max_steps=2", "pretrain.train.warmup=1",
                 "pretrain.train.save_every=2", "pretrain.train.log_every=1"]  # fmt: skip
        sets += [f"pretrain.train.{k}={json.dumps(v)}" for k, v in TINY_TRAIN.items()]
        if "generator" in raw["pretrain"].get("options", {}):
            sets.append(
                "pretrain.options.generator='joint'"
            )  # no ELECTRA here: a small one trained alongside
        if "pmi" in raw["pretrain"]:
            sets.append("pretrain.pmi.memory_gb=0.25")
    for table in ("r1", "r2", "reranker", "distill"):
        if table not in raw or raw[table].get("enabled") is False:
            continue
        sets += [f"{table}.group_size=4", f"{table}.query_max_length=16", f"{table}.epochs=0.1"]  # one step
        sets += [f"{table}.train.{k}={json.dumps(v)}" for k, v in TINY_TRAIN.items() if k != "grad_accum"]
        if table == "reranker":
            sets += [
                "reranker.init='model'",
                "reranker.max_length=64",
                "reranker.depth=20",
                "reranker.rerank_depth=20",
            ]
        else:
            sets.append(f"{table}.passage_max_length=64")
    return sets


def _pretrain_first(tiny: dict[str, Path], tmp_path: Path) -> Path:
    """llm-expansion: its `dense-pt pretrain` config on a store of the tiny corpus with hand-written
    queries (what `dense-pt expand` writes); returns the encoder the pipeline recipe fine-tunes."""
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts
    from dense_pt.pretrain import build_config, run_pretrain
    from pretrain_helpers import write_queries

    tok = Tokenizer.from_file(str(tiny["model"] / "tokenizer.json"))
    store = build_store_from_texts(tmp_path / "store", tiny["docs"], tok, max_length=64)
    queries = write_queries(tmp_path / "queries", tiny["docs"])
    (config,) = PRETRAIN_CONFIGS
    top = {"model": str(tiny["model"]), "corpus": str(store.path), "out": str(tmp_path / "pre"),
           "queries": str(queries), "max_length": 64}  # fmt: skip
    train = {"max_steps": 4, "warmup": 1, "save_every": 4, "log_every": 1, **TINY_TRAIN}
    cfg = build_config(config, top=top, train=train)
    assert cfg.curriculum == "spans:0.75,queries:0.25"
    assert [s.source for s in cfg.stages()] == ["spans", "queries"]
    run_pretrain(cfg, progress=False)
    return tmp_path / "pre" / "encoder"


@pytest.mark.slow
@pytest.mark.parametrize("recipe", RECIPES, ids=[p.stem for p in RECIPES])
def test_recipe_runs_to_the_end(recipe: Path, tiny: dict[str, Path], tmp_path: Path):
    raw = read_toml(recipe)
    model = _pretrain_first(tiny, tmp_path) if recipe.stem == "llm-expansion" else tiny["model"]
    cfg = load_pipeline_config(recipe, _overrides(raw, tiny, tmp_path / "out", model))
    lines: list[str] = []
    res = run_pipeline(cfg, progress=False, log=lines.append)
    assert [s for s in res if s != "report"] == [s for s in planned_stages(cfg) if s != "report"]
    assert all(m["status"] == "done" for m in res.values())
    if cfg.pretrain is not None:
        assert res["pretrain"]["method"] == raw["pretrain"]["method"] and res["pretrain"]["steps"] == 2
    assert (tmp_path / "out" / "report" / "report.md").is_file()


def _declared(method: str, paper: str | None):
    from dense_pt.objectives import profile

    return profile(method, paper)


@pytest.mark.parametrize("path", RECIPES + PRETRAIN_CONFIGS, ids=[p.stem for p in RECIPES + PRETRAIN_CONFIGS])
def test_recipe_pretraining_is_the_declared_defaults(path: Path):
    """Every pre-training value a recipe writes out that the method's profile declares is that
    declared value: a recipe shows the defaults, it does not silently change them."""
    raw = read_toml(path)
    sec = raw.get("pretrain", raw if "method" in raw else None)
    if sec is None:
        return
    prof = _declared(sec["method"], sec.get("paper"))
    assert sec.get("max_length", prof.top["max_length"].value) == prof.top["max_length"].value
    for section in ("options", "train"):
        declared = getattr(prof, section)
        for key, value in sec.get(section, {}).items():
            if key in declared and key != "generator":
                assert value == declared[key].value, f"{path.name}: {section}.{key}"
    scale = prof.values("scale")
    train = sec.get("train", {})
    if "global_batch" in scale:
        assert train["batch_size"] * train.get("grad_accum", 1) == scale["global_batch"]
    if "max_steps" in scale:
        assert train["max_steps"] == scale["max_steps"]


def test_simlm_recipe_fine_tuning_is_table_13():
    """simlm.toml's fine-tuning tables equal the pipeline's paper profile (SimLM Table 13) key by key."""
    from dense_pt.config.pipeline import table_defaults

    raw = read_toml(EXAMPLES / "simlm.toml")
    for table in ("r1", "r2", "reranker", "distill", "mine"):
        for key, value in raw[table].items():
            want = table_defaults(table)[key]
            if key == "train":  # Table 13's; a recipe may add how a step runs (the same gradients)
                assert {k: v for k, v in value.items() if k not in STEP_SWITCHES} == want, table
            elif key == "tau":
                assert value == 0.02  # Table 13; the profile leaves it to the loss, whose own is 0.02
            else:
                assert value == want, f"[{table}] {key}"
    assert raw["model"]["init"] and raw["pretrain"]["options"]["generator"] == "google/electra-base-generator"
