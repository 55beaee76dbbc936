"""Fine-tuning losses of the retrieval stages, as pure torch functions.

Shapes: ``q`` is [B, d] (queries), ``p`` is [B * n, d] (passages in groups of n per query: the
positive first, then n - 1 hard negatives). "In-batch negatives" of query i are every passage of
the batch except its own positive. With ``gather=True`` (the default) the batch is the global
batch across processes and the gradient is exact under DDP (``dense_pt.objectives.gather``).

Retriever losses (``LOSSES``; s(x, y) = cos(x, y) / tau for the cosine ones, x . y / tau for the
dot-product ones; d_i+ is query i's positive):

* ``simlm`` (default) -- SimLM as the authors' released code trains it
  (``full_contrastive_scores_and_labels`` in unilm/simlm ``src/utils.py``, the code behind the
  paper's numbers): cross-entropy of query i over

      [ s(q_i, p) for every passage p ]  +  [ s(d_i+, q_j), s(q_i, q_j), s(d_i+, d_j+)  for j != i ]

  i.e. the query against all passages, its positive against the other queries, the query against
  the other queries and its positive against the other positives; the positive is never scored
  against its own (or any) hard negative. tau = 0.02 (the authors' scripts and Table 13).
* ``simlm-eq3`` -- SimLM eq. 3 as the paper's text writes it, N_i the hard and in-batch negatives:

      L = -log  exp(s(q_i, d_i+)) / ( exp(s(q_i, d_i+)) + sum_{n in N_i} [ exp(s(q_i, n)) + exp(s(d_i+, n)) ] )

* ``infonce`` -- CDMAE eq. 10: -log softmax of q_i . p / tau over the positive, the hard and the
  in-batch negatives; tau = 1 (the paper's plain dot product) unless given.
* ``triplet`` -- SEED-Encoder's margin loss over the query's own group: mean over its hard
  negatives n of max(0, margin - q . d+ + q . n); no temperature, no in-batch negatives.

Also the re-ranker's losses: ``listwise_rerank_loss`` (SimLM eq. 4 as printed), and the authors'
procedure (``train_reranker_marco.sh --rerank_forward_factor 4 --rerank_use_rdrop True``):
``select_top_group`` (which passages of a group scored without gradients it trains on: the
positive, then the highest-scoring negatives) and ``rdrop_listwise_loss`` (the listwise loss of
two dropout passes plus their symmetric KL, R-Drop). And ``distill_loss``: KL(p_ranker || p_ret) over each
group + alpha * a contrastive loss. With ``contrastive="simlm"`` it is SimLM eq. 5 as the authors
train it (``kd_cont_loss_weight`` 0.2, hard negatives kept); with ``"infonce"`` CDMAE eq. 11 (the
retriever's group scores are dot products, the contrastive term is eq. 10).

Every public loss here (and ``group_scores``) computes in float32 with autocast off whatever the
step's precision (``dense_pt.training.precision.fp32_scores``): a bf16 score matrix is off by ~1
at dot products of ~200.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from dense_pt.config.choices import DEFAULT_LOSS, DISTILL_LOSSES, LOSS_TAU, check_loss, resolve_tau
from dense_pt.config.defaults.finetune import ALPHA, TAU  # SimLM Table 13: the one place of these defaults
from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives.gather import gathered_loss
from dense_pt.training.precision import fp32_scores

__all__ = [
    "DEFAULT_LOSS",
    "DISTILL_LOSSES",
    "LOSSES",
    "TAU",
    "RetrieverLoss",
    "distill_loss",
    "eq3_loss",
    "group_scores",
    "infonce_loss",
    "listwise_rerank_loss",
    "rdrop_listwise_loss",
    "resolve_loss",
    "select_top_group",
    "simlm_loss",
    "triplet_loss",
]


def _group_size(q: torch.Tensor, p: torch.Tensor) -> int:
    if q.shape[0] == 0 or p.shape[0] % q.shape[0]:
        raise ValueError(f"{p.shape[0]} passages do not form groups for {q.shape[0]} queries")
    return p.shape[0] // q.shape[0]


def _off_diagonal(scores: torch.Tensor) -> torch.Tensor:
    return scores.masked_fill(
        torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device), float("-inf")
    )


def _full_contrastive(q: torch.Tensor, p: torch.Tensor, tau: float) -> torch.Tensor:
    n = _group_size(q, p)
    qn, pn = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    pos = pn[::n]  # [B, d]: each query's positive
    scores = torch.cat(
        [qn @ pn.T, _off_diagonal(pos @ qn.T), _off_diagonal(qn @ qn.T), _off_diagonal(pos @ pos.T)], dim=1
    )
    labels = torch.arange(q.shape[0], device=q.device) * n
    return F.cross_entropy(scores / tau, labels)


def _eq3(q: torch.Tensor, p: torch.Tensor, tau: float) -> torch.Tensor:
    n = _group_size(q, p)
    b = q.shape[0]
    qn, pn = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    pos_idx = torch.arange(b, device=q.device) * n
    s_q = qn @ pn.T / tau  # [B, P]
    s_d = pn[pos_idx] @ pn.T / tau  # [B, P]
    is_pos = torch.zeros_like(s_q, dtype=torch.bool)
    is_pos[torch.arange(b, device=q.device), pos_idx] = True
    s_pos = s_q[is_pos]
    neg_q = s_q.masked_fill(is_pos, float("-inf"))
    neg_d = s_d.masked_fill(is_pos, float("-inf"))  # also removes s(d+, d+)
    logits = torch.cat([s_pos[:, None], neg_q, neg_d], dim=1)
    return -(s_pos - torch.logsumexp(logits, dim=1)).mean()


def _infonce(q: torch.Tensor, p: torch.Tensor, tau: float) -> torch.Tensor:
    n = _group_size(q, p)
    labels = torch.arange(q.shape[0], device=q.device) * n
    return F.cross_entropy(q @ p.T / tau, labels)


@fp32_scores
def simlm_loss(q: torch.Tensor, p: torch.Tensor, tau: float = TAU, gather: bool = True) -> torch.Tensor:
    """SimLM's contrastive loss as the authors' code computes it (see the module docstring)."""
    return gathered_loss(partial(_full_contrastive, tau=tau), q, p, gather=gather)


@fp32_scores
def eq3_loss(q: torch.Tensor, p: torch.Tensor, tau: float = TAU, gather: bool = True) -> torch.Tensor:
    """SimLM eq. 3 as the paper's text writes it (see the module docstring)."""
    return gathered_loss(partial(_eq3, tau=tau), q, p, gather=gather)


@fp32_scores
def infonce_loss(q: torch.Tensor, p: torch.Tensor, tau: float = 1.0, gather: bool = True) -> torch.Tensor:
    """CDMAE eq. 10: cross-entropy of dot-product scores / tau over all passages of the batch."""
    return gathered_loss(partial(_infonce, tau=tau), q, p, gather=gather)


@fp32_scores
def triplet_loss(q: torch.Tensor, p: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """SEED's margin loss over each query's own group (no in-batch negatives)."""
    n = _group_size(q, p)
    if n < 2:
        raise ValueError("the triplet loss needs at least one hard negative per query")
    groups = p.view(q.shape[0], n, -1)
    s = torch.einsum("bd,bnd->bn", q, groups)
    return F.relu(margin - s[:, :1] + s[:, 1:]).mean()


@dataclass(frozen=True)
class RetrieverLoss:
    """A retriever loss and what goes with it: the similarity it trains (the exported model
    normalises its vectors iff ``cosine``), its temperature default (None: it has none)."""

    name: str
    fn: Callable[..., torch.Tensor]
    similarity: str  # "cosine" | "dot"
    default_tau: float | None
    source: str

    def resolve_tau(self, tau: float | None) -> float | None:
        return resolve_tau(self.name, tau)  # the check the config models run too


# The names, their order and each default tau are dense_pt.config.choices' LOSS_TAU.
LOSSES: dict[str, RetrieverLoss] = {
    "simlm": RetrieverLoss("simlm", simlm_loss, "cosine", LOSS_TAU["simlm"], "SimLM, the authors' full_contrastive_scores_and_labels"),
    "simlm-eq3": RetrieverLoss("simlm-eq3", eq3_loss, "cosine", LOSS_TAU["simlm-eq3"], "SimLM eq. 3 (the paper's text)"),
    "infonce": RetrieverLoss("infonce", infonce_loss, "dot", LOSS_TAU["infonce"], "CDMAE eq. 10"),
    "triplet": RetrieverLoss("triplet", triplet_loss, "dot", LOSS_TAU["triplet"], "SEED-Encoder's margin loss"),
}  # fmt: skip


def resolve_loss(name: str) -> RetrieverLoss:
    check_loss(name)
    return LOSSES[name]


@fp32_scores
def listwise_rerank_loss(logits: torch.Tensor) -> torch.Tensor:
    """SimLM eq. 4: ``logits`` [B, n] re-ranker scores of each group, positive at index 0."""
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


def select_top_group(scores: torch.Tensor, keep: int) -> torch.Tensor:
    """Which ``keep`` passages of each group [B, n] (positive at index 0) the re-ranker trains on,
    as the authors' ``Reranker.forward`` picks them: the positive always (its score set to +inf),
    then the ``keep - 1`` highest-scoring negatives, in descending score. Ties keep the group's
    order (the mined rank): a stable sort, where the authors' ``torch.topk`` leaves it open.
    Returns indices [B, keep], the positive's 0 first."""
    n = scores.shape[1]
    if not 1 <= keep <= n:
        raise InvalidArgumentError(f"keep must be in [1, {n}], got {keep}")
    s = scores.detach().float().clone()
    s[:, 0] = float("inf")
    return torch.sort(s, dim=1, descending=True, stable=True).indices[:, :keep]


@fp32_scores
def rdrop_listwise_loss(logits_a: torch.Tensor, logits_b: torch.Tensor) -> torch.Tensor:
    """R-Drop over the listwise loss, as the authors' re-ranker trains: ``logits_a`` / ``logits_b``
    [B, n] are two forward passes of the same groups with independent dropout (positive at 0). The
    mean of the two passes' cross-entropy plus the symmetric KL between their distributions,
    0.5 (KL(p_a || p_b) + KL(p_b || p_a)), each KL summed over the group and averaged over the
    queries (``KLDivLoss(reduction="batchmean", log_target=True)``), weight 1; the gradient flows
    through both sides of each KL (neither is detached)."""
    la, lb = F.log_softmax(logits_a, dim=-1), F.log_softmax(logits_b, dim=-1)
    ce = 0.5 * (-la[:, 0].mean() - lb[:, 0].mean())
    kl_ab = (la.exp() * (la - lb)).sum(-1).mean()
    kl_ba = (lb.exp() * (lb - la)).sum(-1).mean()
    return ce + 0.5 * (kl_ab + kl_ba)


@fp32_scores
def group_scores(
    q: torch.Tensor, p: torch.Tensor, tau: float = TAU, similarity: str = "cosine"
) -> torch.Tensor:
    """[B, n] scores / tau of each query against its own group (cosine or dot product)."""
    n = _group_size(q, p)
    if similarity == "cosine":
        q, p = F.normalize(q, dim=-1), F.normalize(p, dim=-1)
    elif similarity != "dot":
        raise InvalidArgumentError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")
    return torch.einsum("bd,bnd->bn", q, p.view(q.shape[0], n, -1)) / tau


@fp32_scores
def distill_loss(
    q: torch.Tensor,
    p: torch.Tensor,
    teacher_logits: torch.Tensor,
    alpha: float = ALPHA,
    tau: float | None = None,
    contrastive: str = DEFAULT_LOSS,
    gather: bool = True,
) -> torch.Tensor:
    """KL(p_ranker || p_ret) over each group (mean over the local groups: DDP's averaging makes it
    the global mean) + alpha * the ``contrastive`` loss over the global batch. p_ret is the softmax
    of the retriever's group scores under that loss's similarity and temperature: SimLM eq. 5 with
    ``"simlm"`` (cosine / 0.02), CDMAE eq. 11 with ``"infonce"`` (dot product)."""
    if contrastive not in DISTILL_LOSSES:
        raise InvalidArgumentError(
            f"distillation's contrastive term must be one of {DISTILL_LOSSES}, got {contrastive!r}"
        )
    loss = LOSSES[contrastive]
    tau = loss.resolve_tau(tau)
    assert tau is not None  # every loss of DISTILL_LOSSES has a temperature
    log_p_ret = F.log_softmax(group_scores(q, p, tau, loss.similarity), dim=-1)
    log_p_rank = F.log_softmax(teacher_logits.to(q.dtype), dim=-1)
    kl = (log_p_rank.exp() * (log_p_rank - log_p_ret)).sum(-1).mean()
    return kl + alpha * loss.fn(q, p, tau, gather)
