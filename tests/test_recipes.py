"""The per-paper recipes in examples/: the pipeline files (every *.toml but the CPU example
scifact.toml, the studies study-*.toml and the ``dense-pt pretrain`` configs *-pretrain.toml) and
the pre-training configs. Each loads, its pre-training values are the method's declared defaults,
and it runs to the end on a tiny corpus and model, shrunk only by overrides (steps, batch, lengths,
group sizes, and [model] init / model: a local tiny model, nothing downloaded), so the file itself
is what is tested."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
    assert {p.stem for p in PRETRAIN_CONFIGS} == {
        "llm-expansion-pretrain", "llm-expansion-querygen-pretrain", "seed-pretrain"}  # fmt: skip


def test_recipes_start_where_the_papers_started():
    """The starting checkpoints, data and schedules the papers name (values, not comments)."""
    cdmae, seed = read_toml(EXAMPLES / "cdmae.toml"), read_toml(EXAMPLES / "seed.toml")
    assert cdmae["model"]["init"] == "Shitao/RetroMAE" and cdmae["pretrain"]["train"]["max_steps"] == 80_000
    con = read_toml(EXAMPLES / "llm-expansion-pretrain.toml")
    assert (
        con["model"] == "Luyu/condenser" and "docs" in con["corpus"] and con["train"]["max_steps"] == 120_000
    )
    qg = read_toml(EXAMPLES / "llm-expansion-querygen-pretrain.toml")
    assert (qg["method"], qg["options"]["decoder_layers"], qg["train"]["lr"], qg["train"]["warmup"],
            qg["train"]["max_steps"], qg["train"]["seed"]) == ("querygen", 1, 3e-4, 0.1, 80_000, 42)  # fmt: skip
    assert qg["train"]["batch_size"] * qg["train"]["grad_accum"] == 2048
    assert qg["curriculum"] == "passage:0.75,queries:0.25" and con["curriculum"] == "spans:0.75,queries:0.25"
    pre = read_toml(EXAMPLES / "seed-pretrain.toml")
    assert pre["model"] == "seed-bert-base.json" and pre["train"]["max_steps"] == 1_000_000
    assert (pre["train"]["batch_size"], pre["max_length"], pre["options"]["p_enc"]) == (256, 512, 0.15)
    from transformers import AutoConfig

    bert = AutoConfig.from_pretrained(str(EXAMPLES / "seed-bert-base.json"))  # BERT-base, 32,768 tokens
    assert (bert.vocab_size, bert.hidden_size, bert.num_hidden_layers, bert.num_attention_heads,
            bert.intermediate_size, bert.max_position_embeddings) == (32768, 768, 12, 12, 3072, 512)  # fmt: skip
    assert seed["model"]["init"] == "../runs/seed-pretrain/encoder" and "pretrain" not in seed
    assert seed["mine"]["bm25_depth"] == 100  # "BM25 Neg": BM25's top 100
    assert seed["r2"]["init"] == "r1" and seed["r2"]["refresh_every"] == 10_000  # ANCE


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Any]:
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


def _overrides(raw: dict, tiny: dict[str, Any], out: Path, model: Path) -> list[str]:
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
        # one step (two with a refresh after the first); the re-ranker's 8 keep the authors' forward
        # factor 4 (it trains on the top 2)
        size = 8 if table == "reranker" else 4
        sets += [f"{table}.group_size={size}", f"{table}.query_max_length=16"]
        if "max_steps" in raw[table].get("train", {}):
            sets += [f"{table}.train.max_steps=2", f"{table}.train.save_every=2"]
        else:
            sets.append(f"{table}.epochs=0.1")
        if "refresh_every" in raw[table]:
            sets.append(f"{table}.refresh_every=1")
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


def _run_pretrain_config(config: Path, tiny: dict[str, Any], out: Path) -> Path:
    """A `dense-pt pretrain` recipe on a store of the tiny corpus (with hand-written queries, what
    `dense-pt expand` writes, where it reads some), from the tiny model; its curriculum as written.
    Returns the encoder it writes."""
    from tokenizers import Tokenizer

    from dense_pt.data.store import build_store_from_texts
    from dense_pt.pretrain import build_config, run_pretrain
    from dense_pt.pretrain.context_data import plan_curriculum
    from pretrain_helpers import write_queries

    tok = Tokenizer.from_file(str(tiny["model"] / "tokenizer.json"))
    store = build_store_from_texts(out / "store", tiny["docs"], tok, max_length=64)
    raw = read_toml(config)
    top = {"model": str(tiny["model"]), "corpus": str(store.path), "out": str(out / "pre"), "max_length": 64}
    if "queries" in raw:
        top["queries"] = str(write_queries(out / "queries", tiny["docs"]))
    train = {"max_steps": 4, "warmup": 1, "save_every": 4, "log_every": 1, **TINY_TRAIN}
    cfg = build_config(config, top=top, train=train)
    if "curriculum" in raw:
        assert cfg.curriculum == raw["curriculum"]
        assert [s.source for s in plan_curriculum(cfg)] == [
            x.split(":")[0] for x in raw["curriculum"].split(",")
        ]
    res = run_pretrain(cfg, progress=False)
    assert res["steps"] == 4 and (out / "pre" / "encoder" / "config.json").is_file()
    return out / "pre" / "encoder"


@pytest.fixture(scope="module")
def pretrained(tiny, tmp_path_factory) -> dict[str, Path]:
    """Every `dense-pt pretrain` recipe run to its end on the tiny corpus: {stem: encoder}."""
    return {p.stem: _run_pretrain_config(p, tiny, tmp_path_factory.mktemp(p.stem)) for p in PRETRAIN_CONFIGS}


@pytest.mark.slow
@pytest.mark.parametrize("config", PRETRAIN_CONFIGS, ids=[p.stem for p in PRETRAIN_CONFIGS])
def test_pretrain_recipe_runs_to_the_end(config: Path, pretrained: dict[str, Path]):
    from transformers import AutoModel

    AutoModel.from_pretrained(str(pretrained[config.stem]))  # an encoder the fine-tuning can start from


# the pipeline recipe a pre-training recipe feeds (the pipeline does not run `dense-pt expand`)
FED_BY = {"llm-expansion": "llm-expansion-pretrain", "seed": "seed-pretrain"}
# seed.toml's header: the cheaper variant, continuing a checkpoint on MS MARCO (not the paper's)
SEED_VARIANT = (
    'pretrain={method="seed", max_length=512, train={max_steps=100000, batch_size=256, grad_accum=1}}'
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "recipe", [*RECIPES, "seed-variant"], ids=[*(p.stem for p in RECIPES), "seed-variant"]
)
def test_recipe_runs_to_the_end(recipe, tiny: dict[str, Any], pretrained: dict[str, Path], tmp_path: Path):
    extra: list[str] = []
    if recipe == "seed-variant":
        recipe = EXAMPLES / "seed.toml"
        assert SEED_VARIANT in recipe.read_text()  # the command the header documents
        extra = [SEED_VARIANT]
    raw = read_toml(recipe)
    if extra:
        raw["pretrain"] = {"method": "seed", "options": {}}
    model = pretrained[FED_BY[recipe.stem]] if recipe.stem in FED_BY and not extra else tiny["model"]
    cfg = load_pipeline_config(recipe, [*extra, *_overrides(raw, tiny, tmp_path / "out", model)])
    lines: list[str] = []
    res = run_pipeline(cfg, progress=False, log=lines.append)
    assert [s for s in res if s != "report"] == [s for s in planned_stages(cfg) if s != "report"]
    assert all(m["status"] == "done" for m in res.values())
    if cfg.pretrain is not None:
        assert res["pretrain"]["method"] == raw["pretrain"]["method"] and res["pretrain"]["steps"] == 2
    assert (tmp_path / "out" / "report" / "report.md").is_file()
    if cfg.r2.refresh_every is not None:  # ANCE: one refresh after R2's first step, its negatives used
        assert (tmp_path / "out" / "r2" / "train" / "refresh" / "step-00000001" / "negatives.dpneg").is_file()


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
            elif key == "forward_factor":
                assert (
                    value == 4
                )  # train_reranker_marco.sh; the profile leaves it to the loss, whose own is 4
            else:
                assert value == want, f"[{table}] {key}"
    assert raw["model"]["init"] and raw["pretrain"]["options"]["generator"] == "google/electra-base-generator"
