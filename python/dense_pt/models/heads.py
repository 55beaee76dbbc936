"""Output heads: the masked-LM head tied to the encoder's input embeddings, and the
replaced-token-detection head. Both score only the positions that carry a label, which saves the
[B, L, vocab] logits tensor."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

_ACT = {"gelu": F.gelu, "relu": F.relu, "gelu_new": lambda x: F.gelu(x, approximate="tanh")}


def _act(name: str):
    return _ACT.get(name, F.gelu)


class MLMHead(nn.Module):
    """BERT's prediction head: dense + activation + LayerNorm, then the (tied) word embeddings plus a
    bias. all-MiniLM-L6-v2 ships no MLM head: then the transform starts random, the decoder matrix
    is the embeddings themselves."""

    def __init__(self, hidden: int, embedding: nn.Embedding, act: str = "gelu", eps: float = 1e-12):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=eps)
        self.bias = nn.Parameter(torch.zeros(embedding.num_embeddings))
        self.act = act
        # Not a submodule: the weight belongs to the encoder and is saved with it.
        self._embedding = [embedding]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.norm(_act(self.act)(self.dense(hidden)))
        return F.linear(h, self._embedding[0].weight, self.bias)

    def init_from_checkpoint(self, folder: str | Path) -> bool:
        """Load BERT's ``cls.predictions`` transform and bias when the checkpoint has them."""
        from safetensors import safe_open

        files = sorted(Path(folder).glob("*.safetensors")) if Path(folder).is_dir() else []
        names = {
            "cls.predictions.transform.dense.weight": self.dense.weight,
            "cls.predictions.transform.dense.bias": self.dense.bias,
            "cls.predictions.transform.LayerNorm.weight": self.norm.weight,
            "cls.predictions.transform.LayerNorm.bias": self.norm.bias,
            "cls.predictions.bias": self.bias,
        }
        found = 0
        for f in files:
            with safe_open(str(f), framework="pt") as st:
                for key in st.keys():
                    if key in names and tuple(st.get_slice(key).get_shape()) == tuple(names[key].shape):
                        with torch.no_grad():
                            names[key].copy_(st.get_tensor(key))
                        found += 1
        return found == len(names)


class RTDHead(nn.Module):
    """ELECTRA's discriminator head: dense + activation + a scalar logit per token (replaced or not)."""

    def __init__(self, hidden: int, act: str = "gelu"):
        super().__init__()
        self.dense = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)
        self.act = act

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(_act(self.act)(self.dense(hidden))).squeeze(-1)


def mlm_loss(head: MLMHead, hidden: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy averaged over the positions whose label is not -100 (0 when there are none).
    The count stays on the device (a sum over it, divided by it): no ``.item()``, no host sync and
    no graph break for ``torch.compile`` besides the gather of the labelled rows itself."""
    sel = labels != -100
    logits = head(hidden[sel])
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    total = F.cross_entropy(logits, labels[sel], reduction="sum")
    return total / sel.sum().clamp(min=1).to(total.dtype)
