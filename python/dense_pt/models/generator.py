"""The replacement generator of SimLM and the RTD objective: a frozen Hugging Face masked LM (SimLM
Table 11 uses google/electra-base-generator), given as a local folder or as a hub name already in
the local Hugging Face cache, or ``joint``: a small randomly initialised BERT trained with MLM
alongside the model. Replacements are sampled from its softmax on the training device, never as
special tokens. Nothing is downloaded at run time."""

from __future__ import annotations

import errno
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from dense_pt.errors import FormatError, MismatchError, io_error
from dense_pt.models.unpad import Unpadded, masked_lm_logits

JOINT = "joint"


def resolve_generator(spec: str | Path, cache_dir: str | Path | None = None) -> str | Path:
    """``joint``, a local model folder, or a hub name (``google/electra-base-generator``) resolved to
    its snapshot folder in the local Hugging Face cache (``cache_dir``: another cache root)."""
    if str(spec) == JOINT:
        return JOINT
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FormatError(
                "generator folder has no config.json (a masked LM, or --generator joint)", path=path
            )
        return path
    if path.exists():
        raise FormatError(
            "the generator must be a model folder, a hub name or 'joint', not a file", path=path
        )
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        folder = snapshot_download(str(spec), local_files_only=True, cache_dir=cache_dir)
    except (LocalEntryNotFoundError, HFValidationError, OSError, ValueError):
        raise io_error(
            errno.ENOENT,
            f"generator {str(spec)!r} is neither a folder nor a model in the local Hugging Face cache "
            f"(dense-pt never downloads at run time: fetch it once with `hf download {spec}`, or "
            "pass a folder, or --generator joint)",
            str(spec),
        ) from None
    return Path(folder)


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


class ElectraGenerator(Unpadded, nn.Module):
    """Wraps a masked LM. ``joint`` generators are trained (their MLM loss joins the total loss);
    frozen ones run in eval mode under no_grad. ``source`` is the folder it was loaded from."""

    def __init__(self, mlm: nn.Module, joint: bool, source: Path | None = None):
        super().__init__()
        self.mlm, self.joint, self.source = mlm, joint, source
        if not joint:
            self.mlm.eval()
            for p in self.mlm.parameters():
                p.requires_grad_(False)

    def unpad_models(self) -> list[nn.Module]:
        return [self.mlm]

    def train(self, mode: bool = True):
        super().train(mode)
        if not self.joint:
            self.mlm.eval()  # a frozen generator never uses dropout
        return self

    @classmethod
    def load(cls, spec: str | Path, encoder_config, vocab_size: int) -> ElectraGenerator:
        from transformers import AutoModelForMaskedLM

        where = resolve_generator(spec)
        if where == JOINT:
            from transformers import BertForMaskedLM

            return cls(BertForMaskedLM(joint_generator_config(encoder_config)), joint=True)
        mlm = AutoModelForMaskedLM.from_pretrained(str(where), local_files_only=True)
        if mlm.get_input_embeddings().num_embeddings < vocab_size:
            raise MismatchError(f"generator {spec} has a smaller vocabulary than the corpus store")
        return cls(mlm, joint=False, source=Path(where))

    def sample(
        self,
        gen_input: torch.Tensor,
        attention_mask: torch.Tensor,
        positions: torch.Tensor,
        original: torch.Tensor,
        banned_ids: torch.Tensor,
        vocab_size: int,
        with_loss: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the generator on ``gen_input`` (the view with its masked positions filled) and sample
        one token at each of ``positions`` [B, L] bool. Returns (``original`` with the samples at
        ``positions``, the generator's MLM loss against ``original`` there when ``with_loss`` and
        the generator is joint — else a 0-tensor)."""
        train_it = self.joint and self.training and with_loss
        loss = torch.zeros((), device=gen_input.device)
        with torch.enable_grad() if train_it else torch.no_grad():
            logits = masked_lm_logits(
                self.mlm, gen_input, attention_mask, positions, unpad=self.unpad
            ).float()  # [N, V]
            if train_it:  # the mean over the positions, 0 with none: no host sync on their count
                total = F.cross_entropy(logits, original[positions], reduction="sum")
                loss = total / positions.sum().clamp(min=1)
        with torch.no_grad():
            vocab = torch.arange(logits.shape[1], device=logits.device)
            # never a special token, nor an id the encoder cannot embed (a static-shaped mask: no sync)
            banned = torch.isin(vocab, banned_ids) | (vocab >= vocab_size)
            draws = torch.multinomial(
                torch.softmax(logits.detach().masked_fill(banned, float("-inf")), dim=-1), 1
            )
        # the draws in the row-major order of ``positions``, as ``original[positions]`` lists them
        sampled = original.masked_scatter(positions, draws.squeeze(-1).to(original.dtype))
        return sampled, loss


Generator = ElectraGenerator  # the old name (expansion's LLM backends are QueryGenerator)
