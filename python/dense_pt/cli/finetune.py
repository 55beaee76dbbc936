"""`dense-pt train retriever | reranker | distill` and `dense-pt score`: the fine-tuning stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.cli.options import (
    FORCE_DIR_HELP,
    M,
    config_option,
    flag,
    force_option,
    load_settings,
    model_options,
    set_option,
    split,
    with_model_options,
)
from dense_pt.cli.output import emit, json_option
from dense_pt.config.base import Model
from dense_pt.config.defaults import finetune as FT
from dense_pt.config.finetune import (
    DistillCommand,
    DistillInputs,
    RerankerCommand,
    RerankerInputs,
    RetrieverCommand,
    RetrieverInputs,
    ScoreInputs,
)

train_app = typer.Typer(help="Fine-tune retrievers and re-rankers.", no_args_is_help=True)
app.add_typer(train_app, name="train")


def _tables(model: type[Model]) -> list[tuple[str, type[Model]]]:
    """The command's option tables: its own keys, ``[mine]`` (a retriever's refresh), ``[train]``."""
    from dense_pt.config import TrainConfig
    from dense_pt.config.retrieval import MineSettings

    mine = [("mine", MineSettings)] if "mine" in model.model_fields else []
    return [("top", model), *mine, ("train", TrainConfig)]


def _settings(model: type[M], command: str, config: Path | None, sets: list[str], values: dict[str, Any]):
    """The stage's settings from ``--config`` (its keys at the top, ``[train]`` for the engine),
    ``--set`` and the options, checked by ``model``; the engine's ``TrainConfig`` from its
    ``[train]`` table."""
    from dense_pt.config import TrainConfig
    from dense_pt.errors import InvalidArgumentError

    if values.get("epochs") is not None and values.get("max_steps") is not None:
        raise InvalidArgumentError("give --epochs or --max-steps, not both")
    where = f"dense-pt {command}"
    s = load_settings(model, config, sets, split(values, _tables(model)), where)
    train = TrainConfig.load(s.train.model_dump(exclude_none=True), where, "train")  # type: ignore[attr-defined]
    return s, train


def _options(model: type[Model]) -> list:
    return model_options(_tables(model))


COMMON = dict(
    corpus=typer.Option(..., help="Corpus store folder."),
    queries=typer.Option(..., help="Queries file (BEIR jsonl or qid<TAB>text)."),
    qrels=typer.Option(..., help="Training judgements."),
    out=typer.Option(..., "--out", "-o", help="Output folder (resumable; final model in OUT/model)."),
    force=force_option(FORCE_DIR_HELP),
)
RESUME = flag("--resume/--no-resume", default=True, help="Continue from the latest checkpoint in OUT.")
CONFIG_HELP = "TOML file: the stage's keys at the top level, a [train] table for the engine; options win."


def retriever(
    model: Path = typer.Argument(..., help="Init: a local HF folder or a config.json."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    out: Path = COMMON["out"],
    negatives: Path | None = typer.Option(
        None, help="Negatives file (.dpneg) from `dense-pt negatives mine`."
    ),
    config: Path | None = config_option(CONFIG_HELP),
    set_: list[str] = set_option(),
    resume: bool = RESUME,
    force: bool = COMMON["force"],
    as_json: bool = json_option(),
    **values: Any,
) -> None:
    """Train a bi-encoder retriever (shared encoder, in-batch + cross-device negatives)."""
    from dense_pt.artifacts import claimed
    from dense_pt.finetune.stages import train_retriever

    s, cfg = _settings(RetrieverCommand, "train retriever", config, set_, values)
    inputs = RetrieverInputs(model=model, corpus=corpus, queries=queries, qrels=qrels, out=out,
                             negatives=negatives, pooling=s.pooling)  # fmt: skip
    with claimed(out, "retriever", "train retriever", force=force):
        m = train_retriever(inputs, s, cfg, s.refresh(), resume=resume)
    _trained(out, m, as_json)


def reranker(
    model: str = typer.Argument(
        ...,
        help=f"Init: a local HF folder, a config.json, or a hub name already in the local cache (SimLM: "
        f"{FT.RERANKER_INIT}; nothing is downloaded).",
    ),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    out: Path = COMMON["out"],
    negatives: Path = typer.Option(..., help="Negatives mined from the previous retriever's top-k."),
    config: Path | None = config_option(CONFIG_HELP),
    set_: list[str] = set_option(),
    resume: bool = RESUME,
    force: bool = COMMON["force"],
    as_json: bool = json_option(),
    **values: Any,
) -> None:
    """Train a cross-encoder re-ranker with the listwise loss (SimLM eq. 4)."""
    from dense_pt.artifacts import claimed
    from dense_pt.finetune.checkpoints import resolve_checkpoint
    from dense_pt.finetune.stages import train_reranker

    s, cfg = _settings(RerankerCommand, "train reranker", config, set_, values)
    init = resolve_checkpoint(model, None, "MODEL")
    inputs = RerankerInputs(
        model=init, corpus=corpus, queries=queries, qrels=qrels, out=out, negatives=negatives
    )
    with claimed(out, "reranker", "train reranker", force=force):
        m = train_reranker(inputs, s, cfg, resume=resume)
    _trained(out, m, as_json)


def distill(
    model: Path = typer.Argument(..., help="Retriever to start from (e.g. R2's OUT/model)."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    out: Path = COMMON["out"],
    scores: Path = typer.Option(..., help="Re-ranker scores from `dense-pt score`."),
    config: Path | None = config_option(CONFIG_HELP),
    set_: list[str] = set_option(),
    resume: bool = RESUME,
    force: bool = COMMON["force"],
    as_json: bool = json_option(),
    **values: Any,
) -> None:
    """Distil re-ranker scores into a retriever: KL(p_ranker || p_ret) + alpha * contrastive. The exported
    retriever normalises its vectors iff the loss trains cosine similarity."""
    from dense_pt.artifacts import claimed
    from dense_pt.finetune.stages import train_distill

    s, cfg = _settings(DistillCommand, "train distill", config, set_, values)
    inputs = DistillInputs(model=model, corpus=corpus, queries=queries, qrels=qrels, out=out, scores=scores)
    with claimed(out, "distilled retriever", "train distill", force=force):
        m = train_distill(inputs, s, cfg, resume=resume)
    _trained(out, m, as_json)


def _trained(out: Path, manifest: dict[str, Any], as_json: bool) -> None:
    """The stage's result: its manifest (inputs, settings, steps, last log), or one status line."""
    result = {"out": out, "model": out / "model", **manifest}
    emit(result, as_json, lambda: logs.status(f"wrote {out}/model after {manifest['steps']} steps"))


for _name, _fn, _model in (
    ("retriever", retriever, RetrieverCommand),
    ("reranker", reranker, RerankerCommand),
    ("distill", distill, DistillCommand),
):
    train_app.command(_name)(with_model_options(_fn, _options(_model)))


@app.command()
def score(
    reranker: Path = typer.Argument(..., help="Re-ranker model folder (train reranker's OUT/model)."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    negatives: Path = typer.Option(..., help="Negatives file whose pairs to score."),
    out: Path = typer.Option(..., "--out", "-o", help="Scores file (.dpneg layout; manifest beside it)."),
    batch_size: int = typer.Option(64, help="Pairs scored per forward pass."),
    force: bool = force_option("Replace the output files (OUT and its manifest) if they exist."),
    as_json: bool = json_option(),
) -> None:
    """Re-ranker logits for (query, positives + mined negatives), for distillation."""
    from dense_pt.artifacts import check_output_file
    from dense_pt.finetune.stages import score_negatives

    for path in (out, Path(f"{out}.manifest.json")):
        check_output_file(path, force)
    inputs = ScoreInputs(reranker=reranker, corpus=corpus, queries=queries, qrels=qrels, negatives=negatives,
                         out=out)  # fmt: skip
    m = score_negatives(inputs, batch_size)
    emit({"out": out, **m}, as_json, lambda: logs.status(f"wrote {out}: {m['pairs']} pairs"))
