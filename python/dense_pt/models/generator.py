"""The replacement generator of SimLM and the RTD objective: a frozen Hugging Face masked LM from a
local folder (e.g. an ELECTRA generator), or a small randomly initialised BERT trained jointly with
MLM. Replacements are sampled from its softmax on the training device, never as special tokens."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from dense_pt.errors import FormatError, MismatchError


def joint_generator_config(encoder_config):
    """ELECTRA-style small generator: same depth and head size as the encoder, a third of its heads
    (so a third of its width), same vocabulary and positions."""
    from transformers import BertConfig

    heads = max(1, encoder_config.num_attention_heads // 3)
    head_dim = encoder_config.hidden_size // encoder_config.num_attention_heads
    hidden = heads * head_dim
    return BertConfig(
        vocab_size=encoder_config.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=encoder_config.num_hidden_layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=encoder_config.max_position_embeddings,
        type_vocab_size=getattr(encoder_config, "type_vocab_size", 2),
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        pad_token_id=getattr(encoder_config, "pad_token_id", 0),
    )


class Generator(nn.Module):
    """Wraps a masked LM. ``joint`` generators are trained (their MLM loss joins the total loss);
    frozen ones run in eval mode under no_grad."""

    def __init__(self, mlm: nn.Module, joint: bool):
        super().__init__()
        self.mlm, self.joint = mlm, joint
        if not joint:
            self.mlm.eval()
            for p in self.mlm.parameters():
                p.requires_grad_(False)

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.joint:
            self.mlm.eval()  # a frozen generator never uses dropout
        return self

    @classmethod
    def load(cls, spec: str | Path, encoder_config, vocab_size: int) -> Generator:
        from transformers import AutoModelForMaskedLM

        if str(spec) == "joint":
            from transformers import BertForMaskedLM

            return cls(BertForMaskedLM(joint_generator_config(encoder_config)), joint=True)
        path = Path(spec)
        if not (path / "config.json").is_file():
            raise FormatError("generator folder has no config.json (or use --generator joint)", path=path)
        mlm = AutoModelForMaskedLM.from_pretrained(str(path), local_files_only=True)
        if mlm.get_input_embeddings().num_embeddings < vocab_size:
            raise MismatchError(f"generator {path} has a smaller vocabulary than the corpus store")
        return cls(mlm, joint=False)

    def sample(
        self,
        original: torch.Tensor,
        attention_mask: torch.Tensor,
        masked: torch.Tensor,
        mask_token_id: int,
        banned_ids: torch.Tensor,
        vocab_size: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the generator on ``original`` with [MASK] at ``masked`` and sample one token per masked
        position. Returns (sampled ids [B, L] equal to ``original`` outside ``masked``, the
        generator's MLM loss — a 0-tensor for a frozen generator)."""
        gen_input = original.masked_fill(masked, mask_token_id)
        ctx = torch.enable_grad() if (self.joint and self.training) else torch.no_grad()
        with ctx:
            out = self.mlm(input_ids=gen_input, attention_mask=attention_mask)
            logits = out.logits[masked].float()  # [N, V]
            loss = (
                F.cross_entropy(logits, original[masked]) if self.joint and masked.any() else logits.sum() * 0
            )
        with torch.no_grad():
            probs_logits = logits.detach().clone()
            probs_logits[:, banned_ids[banned_ids < probs_logits.shape[1]]] = float("-inf")
            probs_logits[:, vocab_size:] = float("-inf")  # ids the encoder cannot embed
            draws = torch.multinomial(torch.softmax(probs_logits, dim=-1), 1).squeeze(-1)
        sampled = original.clone()
        sampled[masked] = draws
        return sampled, loss
