"""The names the config models check a value against, written once here (plain data, no torch):
the torch-side modules that implement them import these lists, so a model never imports its
consumer. Each list keeps its owner's order (error messages list them in it)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from dense_pt.config.defaults.finetune import RERANKER_FORWARD_FACTOR as SIMLM_FORWARD_FACTOR
from dense_pt.config.defaults.finetune import TAU
from dense_pt.errors import InvalidArgumentError

# Pre-training methods, in the order the CLI lists them (dense_pt.objectives).
PRETRAIN_METHODS: tuple[str, ...] = (
    "simlm",
    "cdmae",
    "seed",
    "mlm",
    "enc-dec-mlm",
    "enc-dec-rtd",
    "condenser",
    "autoencoder",
    "querygen",
    "contrastive",
)

# The methods whose batches the collator makes (dense_pt.collate.METHODS), in its order: every
# pre-training method but querygen, whose batches come from dense_pt.pretrain.context_data.
COLLATOR_METHODS: tuple[str, ...] = (
    "mlm",
    "cdmae",
    "simlm",
    "enc-dec-mlm",
    "enc-dec-rtd",
    "seed",
    "condenser",
    "autoencoder",
    "contrastive",
)

# Retriever losses (dense_pt.objectives.retrieval) and the temperature each trains with when tau
# is not set: SimLM's 0.02 (Table 13), CDMAE eq. 10's plain dot product (1), none for the triplet.
LOSS_TAU: dict[str, float | None] = {"simlm": TAU, "simlm-eq3": TAU, "infonce": 1.0, "triplet": None}
DEFAULT_LOSS = "simlm"
# Losses that can be distillation's contrastive term (they score the group with a temperature).
DISTILL_LOSSES: tuple[str, ...] = ("simlm", "simlm-eq3", "infonce")

# Re-ranker training (dense_pt.finetune.models.CrossEncoder) and the forward factor each uses when
# forward_factor is not set: SimLM's released procedure (train_reranker_marco.sh
# --rerank_forward_factor 4 --rerank_use_rdrop True) scores the whole group without gradients and
# trains on its top quarter with R-Drop; "listwise" is SimLM eq. 4 as printed, over the whole group.
RERANKER_FORWARD_FACTOR: dict[str, int] = {"simlm": SIMLM_FORWARD_FACTOR, "listwise": 1}
DEFAULT_RERANKER_LOSS = "simlm"

# Hard-negative mining (dense_pt.retrieval.negatives).
SAMPLINGS: tuple[str, ...] = ("random", "top")
POOLS: tuple[str, ...] = ("rank", "rank+positives", "filtered")
RELATIVE_FORMS: tuple[str, ...] = ("magnitude", "signed")

# Hybrid retrieval (dense_pt.retrieval.fusion): the methods and reciprocal rank fusion's constant.
FUSION_METHODS: tuple[str, ...] = ("interpolation", "rrf")
RRF_K = 60  # Cormack, Clarke & Buettcher, SIGIR 2009

# How hits of equal score are ordered (dense_pt.runs.rank_hits): trec_eval's docno rule
# by default, or the run's own order.
TIE_BREAKS: tuple[str, ...] = ("docno", "score-only")
DEFAULT_TIE_BREAK = "docno"

# How `runs merge` combines shard runs (dense_pt.runs.merge): by query shards, by passage shards,
# or whichever the inputs show.
MERGE_MODES: tuple[str, ...] = ("auto", "queries", "passages")


def one_of(names: Iterable[str]) -> dict[str, Any]:
    """A ``str`` field's closed list, for its ``json_schema_extra``: the JSON schema's ``enum``,
    which the command line makes a choice of (names in --help, shell completion). The field's
    validator still checks the value, with its own message."""
    return {"enum": list(names)}


def check_loss(name: str) -> None:
    if name not in LOSS_TAU:
        raise InvalidArgumentError(f"loss must be one of {tuple(LOSS_TAU)}, got {name!r}")


def resolve_tau(loss: str, tau: float | None) -> float | None:
    """The temperature ``loss`` trains with: ``tau`` if given (> 0), else the loss's own; None for
    a loss without one (which refuses a ``tau``)."""
    check_loss(loss)
    default = LOSS_TAU[loss]
    if default is None:
        if tau is not None:
            raise InvalidArgumentError(f"the {loss} loss has no temperature; do not set tau")
        return None
    tau = default if tau is None else float(tau)
    if not tau > 0:
        raise InvalidArgumentError(f"tau must be > 0, got {tau}")
    return tau


def resolve_forward_factor(loss: str, forward_factor: int | None) -> int:
    """How many times more passages the re-ranker scores than it trains on: ``forward_factor`` if
    given, else the loss's own (4 for ``simlm``, 1 for ``listwise``, which trains on every passage
    and refuses another factor)."""
    if loss not in RERANKER_FORWARD_FACTOR:
        raise InvalidArgumentError(f"loss must be one of {tuple(RERANKER_FORWARD_FACTOR)}, got {loss!r}")
    if forward_factor is None:
        return RERANKER_FORWARD_FACTOR[loss]
    if forward_factor < 1:
        raise InvalidArgumentError(f"forward_factor must be >= 1, got {forward_factor}")
    if loss == "listwise" and forward_factor != 1:
        raise InvalidArgumentError(
            "the listwise loss trains on every passage of the group: forward_factor must be 1 (or unset); "
            "the simlm loss selects the top 1 / forward_factor of the group"
        )
    return forward_factor
