"""Fine-tuning losses of the retrieval stages, as pure torch functions.

Shapes: ``q`` is [B, d] (queries), ``p`` is [B * n, d] (passages in groups of n per query: the
positive first, then n - 1 hard negatives). "In-batch negatives" of query i are every passage of
the batch except its own positive, i.e. its hard negatives plus the other queries' positives and
hard negatives. With ``gather=True`` (the default) the batch is the global batch across devices
(``gather_with_grad``): gradients flow through the local part only, which DDP's gradient
averaging turns into the full gradient.

* ``simlm_loss`` (SimLM eq. 3), with s(x, y) = cos(x, y) / tau, tau = 0.02 and N_i the hard and
  in-batch negatives of query i:

      L = -log  exp(s(q_i, d_i+)) / ( exp(s(q_i, d_i+))
                                      + sum_{n in N_i} [ exp(s(q_i, n)) + exp(s(d_i+, n)) ] )

  i.e. the denominator also holds the positive passage against every negative.
* ``infonce_loss`` (CDMAE eq. 10): -log softmax of the dot products q_i . p over the positive, the
  hard and the in-batch negatives (optionally divided by a temperature).
* ``triplet_loss`` (SEED-Encoder's margin loss): mean over the hard negatives n of
  max(0, margin - q . d+ + q . n).
* ``listwise_rerank_loss`` (SimLM eq. 4): -log softmax over a group of re-ranker logits
  [g(q, d+), g(q, n_1), ...], positive at index 0.
* ``distill_loss`` (SimLM eq. 5): KL(p_ranker || p_ret) over the group (p = softmax of the
  re-ranker logits and of the retriever's scaled cosine scores) + alpha * simlm_loss, alpha 0.2.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

TAU = 0.02


def gather_with_grad(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """All-gather ``x`` along dim 0 across processes, keeping the autograd graph of the local
    slice; returns (gathered, index of the local slice's first row). Without an initialised
    process group (or with one process) it is ``(x, 0)``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return x, 0
    world, rank = dist.get_world_size(), dist.get_rank()
    parts = [torch.empty_like(x) for _ in range(world)]
    dist.all_gather(parts, x.contiguous())
    parts[rank] = x  # the local slice carries gradients; the others are constants
    return torch.cat(parts, 0), rank * x.shape[0]


def _group_size(q: torch.Tensor, p: torch.Tensor) -> int:
    if p.shape[0] % q.shape[0]:
        raise ValueError(f"{p.shape[0]} passages do not form groups for {q.shape[0]} queries")
    return p.shape[0] // q.shape[0]


def _gathered(p: torch.Tensor, n: int, gather: bool) -> tuple[torch.Tensor, int]:
    """All passages of the global batch and the global index of the first local query."""
    if not gather:
        return p, 0
    pa, start = gather_with_grad(p)
    return pa, start // n


def simlm_loss(q: torch.Tensor, p: torch.Tensor, tau: float = TAU, gather: bool = True) -> torch.Tensor:
    """SimLM eq. 3 (see the module docstring); mean over the local queries."""
    n = _group_size(q, p)
    pa, start = _gathered(p, n, gather)
    b = q.shape[0]
    qn = F.normalize(q, dim=-1)
    pn = F.normalize(pa, dim=-1)
    rows = torch.arange(b, device=q.device) + start  # global query index of each local query
    pos_idx = rows * n
    pos = pn[pos_idx]  # [b, d]
    s_q = qn @ pn.T / tau  # [b, P]
    s_d = pos @ pn.T / tau  # [b, P]
    is_pos = torch.zeros_like(s_q, dtype=torch.bool)
    is_pos[torch.arange(b), pos_idx] = True
    s_pos = s_q[torch.arange(b), pos_idx]
    neg_q = s_q.masked_fill(is_pos, float("-inf"))
    neg_d = s_d.masked_fill(is_pos, float("-inf"))  # also removes s(d+, d+)
    logits = torch.cat([s_pos[:, None], neg_q, neg_d], dim=1)
    return -(s_pos - torch.logsumexp(logits, dim=1)).mean()


def infonce_loss(
    q: torch.Tensor, p: torch.Tensor, temperature: float = 1.0, gather: bool = True
) -> torch.Tensor:
    """CDMAE eq. 10: cross-entropy of dot-product scores over all passages of the (global) batch."""
    n = _group_size(q, p)
    pa, start = _gathered(p, n, gather)
    scores = q @ pa.T / temperature
    labels = (torch.arange(q.shape[0], device=q.device) + start) * n
    return F.cross_entropy(scores, labels)


def triplet_loss(q: torch.Tensor, p: torch.Tensor, margin: float = 1.0) -> torch.Tensor:
    """SEED's margin loss over each query's own group (no in-batch negatives)."""
    n = _group_size(q, p)
    if n < 2:
        raise ValueError("the triplet loss needs at least one hard negative per query")
    groups = p.view(q.shape[0], n, -1)
    s = torch.einsum("bd,bnd->bn", q, groups)
    return F.relu(margin - s[:, :1] + s[:, 1:]).mean()


def listwise_rerank_loss(logits: torch.Tensor) -> torch.Tensor:
    """SimLM eq. 4: ``logits`` [B, n] re-ranker scores of each group, positive at index 0."""
    return F.cross_entropy(logits, torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device))


def group_scores(q: torch.Tensor, p: torch.Tensor, tau: float = TAU) -> torch.Tensor:
    """[B, n] scaled cosine scores of each query against its own group."""
    n = _group_size(q, p)
    groups = F.normalize(p, dim=-1).view(q.shape[0], n, -1)
    return torch.einsum("bd,bnd->bn", F.normalize(q, dim=-1), groups) / tau


def distill_loss(
    q: torch.Tensor,
    p: torch.Tensor,
    teacher_logits: torch.Tensor,
    alpha: float = 0.2,
    tau: float = TAU,
    gather: bool = True,
) -> torch.Tensor:
    """SimLM eq. 5: KL(p_ranker || p_ret) over each group (batch mean) + alpha * eq. 3."""
    log_p_ret = F.log_softmax(group_scores(q, p, tau), dim=-1)
    log_p_rank = F.log_softmax(teacher_logits.to(q.dtype), dim=-1)
    kl = (log_p_rank.exp() * (log_p_rank - log_p_ret)).sum(-1).mean()
    return kl + alpha * simlm_loss(q, p, tau, gather)


LOSSES = {"simlm": simlm_loss, "infonce": infonce_loss, "triplet": triplet_loss}
