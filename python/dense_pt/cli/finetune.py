"""`dense-pt train retriever | reranker | distill` and `dense-pt score`: the fine-tuning stages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from dense_pt import logs
from dense_pt.cli import app
from dense_pt.config.defaults import finetune as FT

train_app = typer.Typer(help="Fine-tune retrievers and re-rankers.", no_args_is_help=True)
app.add_typer(train_app, name="train")


def _train_cfg(config: Path | None, epochs: float | None = None, **overrides: Any):
    """TrainConfig from the [train] table of a TOML file, CLI options winning."""
    from dense_pt.errors import InvalidArgumentError
    from dense_pt.training import TrainConfig, merge_overrides, read_toml

    if epochs is not None and overrides.get("max_steps") is not None:
        raise InvalidArgumentError("give --epochs or --max-steps, not both")

    base = TrainConfig()
    stage: dict[str, Any] = {}
    if config is not None:
        data = read_toml(config)
        base = TrainConfig.load(data.get("train", {}), config, prefix="train")
        stage = data.get("stage", {})
    return merge_overrides(base, overrides), stage


COMMON = dict(
    corpus=typer.Option(..., help="Corpus store folder."),
    queries=typer.Option(..., help="Queries file (BEIR jsonl or qid<TAB>text)."),
    qrels=typer.Option(..., help="Training judgements."),
    out=typer.Option(..., "--out", "-o", help="Output folder (resumable; final model in OUT/model)."),
    report_to=typer.Option(
        None,
        "--report-to",
        help="none | tensorboard: also write the logged scalars under OUT/tb "
        "(pip install 'dense-pt[tensorboard]'). Default: the TOML's [train] report_to, else none.",
    ),
)


@train_app.command("retriever")
def retriever(
    model: Path = typer.Argument(..., help="Init: a local HF folder or a config.json."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    out: Path = COMMON["out"],
    negatives: Path | None = typer.Option(None, help="Negatives file (.dpneg) from mine-negatives."),
    loss: str = typer.Option(
        "simlm",
        help="simlm (SimLM, the authors' code) | simlm-eq3 (SimLM eq. 3 as printed) | "
        "infonce (CDMAE eq. 10, dot product) | triplet (SEED).",
    ),
    group_size: int = typer.Option(FT.RETRIEVER_GROUP_SIZE, help="1 positive + n-1 negatives per query."),
    query_max_length: int = typer.Option(FT.QUERY_MAX_LENGTH),
    passage_max_length: int = typer.Option(FT.PASSAGE_MAX_LENGTH),
    tau: float | None = typer.Option(
        None, help=f"Temperature: default {FT.TAU} for simlm / simlm-eq3, 1 for infonce; triplet has none."
    ),
    pooling: str = typer.Option(
        "auto", help="cls | mean | auto (from the init's sentence-transformers files)."
    ),
    config: Path | None = typer.Option(None, help="TOML with a [train] table (engine settings)."),
    max_steps: int | None = typer.Option(None),
    epochs: float | None = typer.Option(None, help="Passes over the training queries (sets max_steps)."),
    batch_size: int | None = typer.Option(None),
    lr: float | None = typer.Option(None),
    seed: int | None = typer.Option(None),
    report_to: str | None = COMMON["report_to"],
    resume: bool = typer.Option(True, help="Continue from the latest checkpoint in OUT."),
) -> None:
    """Train a bi-encoder retriever (shared encoder, in-batch + cross-device negatives)."""
    from dense_pt.finetune.stages import train_retriever

    cfg, _ = _train_cfg(
        config, epochs, max_steps=max_steps, batch_size=batch_size, lr=lr, seed=seed, report_to=report_to
    )
    m = train_retriever(model, corpus, queries, qrels, out, negatives, loss, group_size, query_max_length,
                        passage_max_length, tau, pooling=pooling, train=cfg, resume=resume, epochs=epochs)  # fmt: skip
    logs.status(f"wrote {out}/model after {m['steps']} steps")


@train_app.command("reranker")
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
    group_size: int = typer.Option(FT.RERANKER_GROUP_SIZE),
    query_max_length: int = typer.Option(FT.QUERY_MAX_LENGTH),
    max_length: int = typer.Option(FT.RERANKER_MAX_LENGTH, help="The whole pair, [CLS] q [SEP] p [SEP]."),
    config: Path | None = typer.Option(None, help="TOML with a [train] table."),
    max_steps: int | None = typer.Option(None),
    epochs: float | None = typer.Option(None, help="Passes over the training queries (sets max_steps)."),
    batch_size: int | None = typer.Option(None),
    lr: float | None = typer.Option(None),
    seed: int | None = typer.Option(None),
    report_to: str | None = COMMON["report_to"],
    resume: bool = typer.Option(True),
) -> None:
    """Train a cross-encoder re-ranker with the listwise loss (SimLM eq. 4)."""
    from dense_pt.finetune.checkpoints import resolve_checkpoint
    from dense_pt.finetune.stages import train_reranker

    cfg, _ = _train_cfg(
        config, epochs, max_steps=max_steps, batch_size=batch_size, lr=lr, seed=seed, report_to=report_to
    )
    init = resolve_checkpoint(model, None, "MODEL")
    m = train_reranker(init, corpus, queries, qrels, negatives, out, group_size, query_max_length,
                       max_length, train=cfg, resume=resume, epochs=epochs)  # fmt: skip
    logs.status(f"wrote {out}/model after {m['steps']} steps")


@train_app.command("distill")
def distill(
    model: Path = typer.Argument(..., help="Retriever to start from (e.g. R2's OUT/model)."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    out: Path = COMMON["out"],
    scores: Path = typer.Option(..., help="Re-ranker scores from `dense-pt score`."),
    group_size: int = typer.Option(FT.DISTILL_GROUP_SIZE),
    alpha: float = typer.Option(FT.ALPHA, help="Weight of the contrastive term (SimLM eq. 5, CDMAE eq. 11)."),
    loss: str = typer.Option(
        "simlm",
        help="The contrastive term and the similarity of the student's scores: simlm (SimLM eq. 5, "
        "cosine / tau) | simlm-eq3 | infonce (CDMAE eq. 11, dot product).",
    ),
    tau: float | None = typer.Option(None, help=f"Temperature: default {FT.TAU} for simlm*, 1 for infonce."),
    query_max_length: int = typer.Option(FT.QUERY_MAX_LENGTH),
    passage_max_length: int = typer.Option(FT.PASSAGE_MAX_LENGTH),
    config: Path | None = typer.Option(None, help="TOML with a [train] table."),
    max_steps: int | None = typer.Option(None),
    epochs: float | None = typer.Option(None, help="Passes over the training queries (sets max_steps)."),
    batch_size: int | None = typer.Option(None),
    lr: float | None = typer.Option(None),
    seed: int | None = typer.Option(None),
    report_to: str | None = COMMON["report_to"],
    resume: bool = typer.Option(True),
) -> None:
    """Distil re-ranker scores into a retriever: KL(p_ranker || p_ret) + alpha * contrastive. The exported
    retriever normalises its vectors iff the loss trains cosine similarity."""
    from dense_pt.finetune.stages import train_distill

    cfg, _ = _train_cfg(
        config, epochs, max_steps=max_steps, batch_size=batch_size, lr=lr, seed=seed, report_to=report_to
    )
    m = train_distill(model, corpus, queries, qrels, scores, out, group_size=group_size, alpha=alpha, loss=loss, tau=tau,
                      query_max_length=query_max_length, passage_max_length=passage_max_length,
                      train=cfg, resume=resume, epochs=epochs)  # fmt: skip
    logs.status(f"wrote {out}/model after {m['steps']} steps")


@app.command()
def score(
    reranker: Path = typer.Argument(..., help="Re-ranker model folder (train reranker's OUT/model)."),
    corpus: Path = COMMON["corpus"],
    queries: Path = COMMON["queries"],
    qrels: Path = COMMON["qrels"],
    negatives: Path = typer.Option(..., help="Negatives file whose pairs to score."),
    out: Path = typer.Option(..., "--out", "-o", help="Scores file (.dpneg layout; manifest beside it)."),
    batch_size: int = typer.Option(64),
) -> None:
    """Re-ranker logits for (query, positives + mined negatives), for distillation."""
    from dense_pt.finetune.stages import score as run_score

    m = run_score(reranker, corpus, queries, qrels, negatives, out, batch_size)
    logs.status(f"wrote {out}: {m['pairs']} pairs")
