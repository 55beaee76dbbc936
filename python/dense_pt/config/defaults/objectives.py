"""Every pre-training method's defaults, each with the paper (or the authors' released code) it
comes from. Declared once here; read by ``resolve_options`` (the objectives' ``MethodOptions``),
the collator presets (``dense_pt.collate``), the pre-training config and CLI
(``dense_pt.pretrain``), and shown by ``dense-pt pretrain --method M --help``.

Plain frozen data, no torch (the base install's collator reads it). A method may carry several
*profiles*, one per paper that trained it (``condenser``: Condenser's own settings, or the row of
SimLM's Table 7); ``profile(method, paper=None)`` returns the default one. Sections of a profile:

- ``top``: settings of the run (``max_length``);
- ``options``: the objective's options (``MethodOptions`` fields); ``REQUIRED`` marks an option the
  user must give (SimLM's generator), its source saying what the paper used;
- ``train``: the optimiser and schedule (``TrainConfig`` fields);
- ``scale``: the paper's batch and steps, recorded for recipes but not applied (a default of
  2,048 passages per step would not fit one machine; set ``--batch-size``, ``--grad-accum`` and
  ``--max-steps`` to reach them).

Where the paper's text and the released code disagree, the code that produced the paper's numbers
is the default (its source says "code"); where both are silent, the source says "dense-pt" and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

REQUIRED = "<required>"


@dataclass(frozen=True)
class Default:
    value: Any
    source: str


def _frozen(d: Mapping[str, Default] | None) -> Mapping[str, Default]:
    return MappingProxyType(dict(d or {}))


@dataclass(frozen=True)
class Profile:
    """One paper's settings for one method."""

    method: str
    paper: str  # the key users pass as --paper
    title: str
    top: Mapping[str, Default] = field(default_factory=dict)
    options: Mapping[str, Default] = field(default_factory=dict)
    train: Mapping[str, Default] = field(default_factory=dict)
    scale: Mapping[str, Default] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("top", "options", "train", "scale"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def values(self, section: str) -> dict[str, Any]:
        """{name: value} of one section (``REQUIRED`` entries left out)."""
        return {k: d.value for k, d in getattr(self, section).items() if d.value != REQUIRED}

    def rows(self) -> list[tuple[str, Any, str]]:
        """(dotted name, value, source) of every entry, for people reading the defaults."""
        out = []
        for section in ("top", "options", "train", "scale"):
            prefix = "" if section == "top" else f"{section}."
            for name, d in getattr(self, section).items():
                out.append((prefix + name, d.value, d.source))
        return out


def _d(value: Any, source: str) -> Default:
    return Default(value, source)


# ---- shared pieces (each number once) -----------------------------------------------------------

BERT_FILL = {
    "mask_prob": _d(0.8, "BERT (Devlin et al. 2019) §3.1: 80% [MASK]"),
    "random_prob": _d(0.1, "BERT §3.1: 10% a random token, 10% unchanged"),
}

# CDMAE's decoder masks the most important tokens after adding noise (also the standalone
# ``dense_pt.masking.importance_mask``'s default).
IMPORTANCE_NOISE = {"sigma": _d(1.0, "CDMAE Algorithm 1: importance + N(0, sigma^2) noise, sigma = 1")}

# SimLM (Wang et al., ACL 2023): Table 11 and the authors' unilm/simlm code (scripts/train_rlm.sh,
# src/config.py, src/collators/rlm_collator.py, src/models/rlm.py).
SIMLM_TITLE = "SimLM (Wang et al., ACL 2023)"
SIMLM_TOP = {"max_length": _d(144, "SimLM Table 11 (code: train_rlm.sh --rlm_max_length 144)")}
SIMLM_MASKING = {
    "whole_word": _d(True, "SimLM code: rlm_collator.py masks whole words (whole_word_mask)"),
    "crop": _d("head", "SimLM code: rlm_collator.py lets the tokenizer truncate (keeps the head)"),
}
SIMLM_RATES = {
    "p_enc": _d(0.3, "SimLM Table 11: encoder mask/replace rate 30%"),
    "p_dec": _d(0.5, "SimLM Table 11: decoder mask/replace rate 50% (encoder's positions nested)"),
}
SIMLM_DECODER = {
    "decoder_layers": _d(2, "SimLM code: config.py rlm_decoder_layers=2, copies of the encoder's last 2"),
    "projection": _d(False, "SimLM code: rlm.py feeds the last layer's [CLS] state to the decoder as is"),
}
SIMLM_GENERATOR = {
    "generator": _d(
        REQUIRED,
        "SimLM Table 11: a frozen google/electra-base-generator; pass --generator PATH|HUB-NAME "
        "(or --generator joint)",
    ),
    "generator_fill": _d(
        "mask",
        "SimLM code: train_rlm.sh --all_use_mask_token True (eq. 1's Mask: [MASK] at every masked "
        "position); 'bert' = 80/10/10, config.py's own default",
    ),
    "generator_weight": _d(
        0.2, "SimLM code: train_rlm.sh --rlm_generator_mlm_weight 0.2 (only a joint generator has a loss)"
    ),
}
SIMLM_TRAIN = {
    "lr": _d(3e-4, "SimLM Table 11"),
    "warmup": _d(4000, "SimLM Table 11: 4,000 warm-up steps"),
    "schedule": _d("linear", "SimLM code: DeepSpeed WarmupDecayLR (linear decay to 0)"),
    "weight_decay": _d(0.0, "SimLM code: train_rlm.sh --weight_decay 0.0"),
    "adam_eps": _d(1e-8, "SimLM code: the Hugging Face Trainer's AdamW default (the script sets none)"),
    "adam_beta1": _d(0.9, "SimLM code: the Hugging Face Trainer's AdamW default"),
    "adam_beta2": _d(0.999, "SimLM code: the Hugging Face Trainer's AdamW default"),
    "max_grad_norm": _d(1.0, "SimLM code: the Hugging Face Trainer's default"),
}
SIMLM_SCALE = {
    "global_batch": _d(2048, "SimLM Table 11 (train_rlm.sh: 64 per GPU x 4 accumulation x 8 GPUs)"),
    "max_steps": _d(80_000, "SimLM Table 11"),
    "precision": _d("fp16", "SimLM code: train_rlm.sh --fp16"),
}
ABLATION_TITLE = "SimLM §5.1 / Table 7 variant: SimLM's settings (Table 11, its collator), as we read §5.1"

# Condenser (Gao & Callan, EMNLP 2021): the luyug/Condenser README command and arguments.py.
CONDENSER_TITLE = "Condenser (Gao & Callan, EMNLP 2021)"
CONDENSER_HEAD = {
    "decoder_layers": _d(2, "Condenser code: README --n_head_layers 2"),
    "condenser_layer": _d(
        None,
        "Condenser code: README --skip_from 6 of BERT-base's 12 layers; None = the encoder's middle layer",
    ),
    "projection": _d(False, "Condenser code: modeling.py feeds the last layer's [CLS] state as is"),
}

# LLM-based document expansion (Ma et al. 2023, "Pre-training with Large Language Model-based
# Document Expansion for Dense Passage Retrieval"), implementation details.
LLMEXP_TITLE = "LLM document expansion (Ma et al. 2023)"

# What the bottleneck reads. Every paper starts from a BERT-style checkpoint pre-trained with [CLS]
# and feeds the decoder h_cls; continued pre-training of a sentence model trained with mean pooling
# (all-MiniLM-L6-v2) would otherwise swap its representation for another one (issue 15).
POOLING = {
    "pooling": _d(
        "auto",
        "dense-pt: the checkpoint's own pooling (its sentence-transformers Pooling module), else [CLS] "
        "as in the papers (SimLM §3, CDMAE §3, SEED-Encoder §3, Condenser §3: the decoder reads h_cls)",
    )
}

# ---- the profiles -------------------------------------------------------------------------------

_PROFILES: tuple[Profile, ...] = (
    Profile(
        "simlm",
        "simlm",
        SIMLM_TITLE,
        top=SIMLM_TOP,
        options={**POOLING, **SIMLM_RATES, **SIMLM_GENERATOR, **SIMLM_DECODER, **SIMLM_MASKING, **BERT_FILL},
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "enc-dec-rtd",
        "simlm",
        ABLATION_TITLE,
        top=SIMLM_TOP,
        options={
            **POOLING,
            **SIMLM_RATES,
            **SIMLM_GENERATOR,
            **SIMLM_DECODER,
            **SIMLM_MASKING,
            **BERT_FILL,
            "rtd_weight": _d(50.0, "ELECTRA (Clark et al. 2020): discriminator loss weight lambda = 50"),
        },
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "enc-dec-mlm",
        "simlm",
        ABLATION_TITLE,
        top=SIMLM_TOP,
        options={**POOLING, **SIMLM_RATES, **SIMLM_DECODER, **SIMLM_MASKING, **BERT_FILL},
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "mlm",
        "simlm",
        ABLATION_TITLE,
        top=SIMLM_TOP,
        options={
            "p_enc": _d(0.3, "SimLM Table 7: the MLM row, at SimLM's 30% encoder rate"),
            "projection": _d(False, "no bottleneck: MLM on the encoder alone"),
            **SIMLM_MASKING,
            **BERT_FILL,
        },
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "autoencoder",
        "simlm",
        ABLATION_TITLE,
        top=SIMLM_TOP,
        options={
            **POOLING,
            **SIMLM_DECODER,
            "crop": SIMLM_MASKING["crop"],
        },
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "condenser",
        "condenser",
        CONDENSER_TITLE,
        top={
            "max_length": _d(144, "dense-pt: Condenser's README leaves it to --max_seq_length; SimLM's 144")
        },
        options={
            **POOLING,
            "p_enc": _d(0.15, "Condenser code: arguments.py mlm_probability 0.15"),
            "whole_word": _d(True, "Condenser code: data.py CondenserCollator masks whole words"),
            "crop": _d("random", "Condenser code: data.py _truncate keeps a random window"),
            **CONDENSER_HEAD,
            **BERT_FILL,
        },
        train={
            "lr": _d(1e-4, "Condenser code: README --learning_rate 1e-4"),
            "warmup": _d(0.1, "Condenser code: README --warmup_ratio 0.1"),
            "schedule": _d("linear", "Condenser code: the Hugging Face Trainer's default (linear decay)"),
            "weight_decay": _d(0.01, "Condenser code: README --weight_decay 0.01"),
            "adam_eps": _d(1e-8, "Condenser code: the Hugging Face Trainer's AdamW default"),
            "adam_beta1": _d(0.9, "Condenser code: the Hugging Face Trainer's AdamW default"),
            "adam_beta2": _d(0.999, "Condenser code: the Hugging Face Trainer's AdamW default"),
            "max_grad_norm": _d(1.0, "Condenser code: the Hugging Face Trainer's default"),
        },
        scale={"epochs": _d(8, "Condenser code: README --num_train_epochs 8")},
    ),
    Profile(
        "condenser",
        "simlm",
        ABLATION_TITLE,
        top=SIMLM_TOP,
        options={
            **POOLING,
            "p_enc": _d(0.3, "SimLM §5.1: the Condenser row of Table 7 is trained with a 30% mask"),
            **{k: v for k, v in CONDENSER_HEAD.items() if k != "decoder_layers"},
            "decoder_layers": _d(2, "SimLM §5.1 / Table 7: Condenser's 2-layer head"),
            **SIMLM_MASKING,
            **BERT_FILL,
        },
        train=SIMLM_TRAIN,
        scale=SIMLM_SCALE,
    ),
    Profile(
        "cdmae",
        "cdmae",
        "CDMAE (corpus-aware contextual masked auto-encoding)",
        top={
            "max_length": _d(
                144, "dense-pt: not stated in CDMAE's Appendix A; SimLM's 144, whose setup it follows"
            )
        },
        options={
            **POOLING,
            "p_enc": _d(0.3, "CDMAE, method: encoder MLM on a random 30% mask"),
            "p_dec": _d(0.5, "CDMAE Algorithm 1: the decoder hides the 50% most important tokens"),
            **IMPORTANCE_NOISE,
            "projection": _d(True, "CDMAE, method: bottleneck h_b = W h_cls + b"),
            "decoder_layers": _d(2, "CDMAE, method: a 2-layer decoder (as wide as the encoder)"),
            "whole_word": _d(False, "dense-pt: CDMAE masks tokens (its importance is per token)"),
            "crop": _d("random", "dense-pt: the paper is silent; a random window sees all of a long passage"),
            **BERT_FILL,
        },
        train={
            "lr": _d(3e-4, "CDMAE Appendix A (linear decay)"),
            "warmup": _d(0.1, "CDMAE Appendix A: warm-up ratio 0.1"),
            "schedule": _d("linear", "CDMAE Appendix A"),
            "weight_decay": _d(0.01, "CDMAE Appendix A: AdamW, weight decay 0.01"),
            "adam_eps": _d(1e-8, "dense-pt: Appendix A gives none; PyTorch's / Hugging Face's AdamW default"),
            "adam_beta1": _d(0.9, "dense-pt: Appendix A gives none; AdamW default"),
            "adam_beta2": _d(0.999, "dense-pt: Appendix A gives none; AdamW default"),
            "max_grad_norm": _d(1.0, "dense-pt: Appendix A gives none; the Hugging Face Trainer's default"),
        },
        scale={
            "global_batch": _d(2048, "CDMAE Appendix A"),
            "max_steps": _d(80_000, "CDMAE Appendix A"),
        },
    ),
    Profile(
        "seed",
        "seed",
        "SEED-Encoder (Lu et al., EMNLP 2021)",
        top={"max_length": _d(512, "SEED-Encoder pre-training setup: sequences of 512 tokens")},
        options={
            **POOLING,
            "p_enc": _d(0.15, "SEED-Encoder pre-training setup: 15% masked tokens"),
            "decoder_layers": _d(3, "SEED-Encoder: a 3-layer decoder"),
            "attention_span": _d(2, "SEED-Encoder eq. 9: each token sees the previous k = 2"),
            "seed_window": _d(
                "strict",
                "SEED-Encoder eq. 9 (the text); 'released' = the authors' code (see docs/pretrain.md)",
            ),
            "projection": _d(False, "SEED-Encoder: the decoder reads the encoder's [CLS] state"),
            "whole_word": _d(False, "dense-pt: the paper masks tokens (BERT-style)"),
            "crop": _d("random", "dense-pt: the paper is silent; a random window sees all of a long passage"),
            **BERT_FILL,
        },
        train={
            "lr": _d(1e-4, "SEED-Encoder pre-training setup"),
            "warmup": _d(10_000, "SEED-Encoder pre-training setup: 10k warm-up steps, then linear decay"),
            "schedule": _d("linear", "SEED-Encoder pre-training setup"),
            "weight_decay": _d(0.01, "SEED-Encoder pre-training setup"),
            "adam_eps": _d(1e-6, "SEED-Encoder pre-training setup"),
            "adam_beta1": _d(0.9, "SEED-Encoder pre-training setup"),
            "adam_beta2": _d(0.999, "SEED-Encoder pre-training setup"),
            "max_grad_norm": _d(1.0, "SEED-Encoder pre-training setup: gradient clipping 1.0"),
        },
        scale={
            "global_batch": _d(256, "SEED-Encoder pre-training setup"),
            "max_steps": _d(1_000_000, "SEED-Encoder pre-training setup: 1M steps (BERT-base, from scratch)"),
        },
    ),
    Profile(
        "querygen",
        "llm-expansion",
        LLMEXP_TITLE,
        top={"max_length": _d(144, "dense-pt: not stated with the query-generation settings; SimLM's 144")},
        options={
            **POOLING,
            "p_enc": _d(0.3, "dense-pt: the encoder's MLM rate is not stated; SimLM's 30%"),
            "decoder_layers": _d(1, "LLM expansion paper: a 1-layer randomly initialised decoder"),
            "projection": _d(False, "LLM expansion paper: the decoder reads h_cls"),
            "whole_word": _d(False, "dense-pt: not stated; token masking"),
            "crop": _d("random", "dense-pt: not stated; a random window sees all of a long passage"),
            **BERT_FILL,
        },
        train={
            "lr": _d(3e-4, "LLM expansion paper: query generation lr 3e-4"),
            "warmup": _d(0.1, "LLM expansion paper: warm-up ratio 0.1 (of the first curriculum stage)"),
            "schedule": _d("linear", "dense-pt: not stated without a curriculum; the Hugging Face default"),
            "weight_decay": _d(0.01, "dense-pt: not stated; the usual 0.01"),
            "adam_eps": _d(1e-8, "dense-pt: not stated; AdamW default"),
            "adam_beta1": _d(0.9, "dense-pt: not stated; AdamW default"),
            "adam_beta2": _d(0.999, "dense-pt: not stated; AdamW default"),
            "max_grad_norm": _d(1.0, "dense-pt: not stated; the Hugging Face Trainer's default"),
        },
        scale={
            "global_batch": _d(2048, "LLM expansion paper: query generation"),
            "max_steps": _d(80_000, "LLM expansion paper: query generation"),
        },
    ),
    Profile(
        "contrastive",
        "llm-expansion",
        LLMEXP_TITLE,
        top={"max_length": _d(144, "dense-pt: not stated with the contrastive settings; SimLM's 144")},
        options={
            **POOLING,
            "p_enc": _d(0.15, "LLM expansion paper: coCondenser's settings (15% MLM)"),
            **CONDENSER_HEAD,
            "whole_word": _d(True, "coCondenser's collator (Condenser's) masks whole words"),
            "crop": _d("random", "coCondenser's collator (Condenser's) keeps a random window"),
            **BERT_FILL,
        },
        train={
            "lr": _d(1e-4, "LLM expansion paper: contrastive pre-training lr 1e-4 (coCondenser's)"),
            "warmup": _d(0.1, "LLM expansion paper: coCondenser's settings (warm-up ratio 0.1)"),
            "schedule": _d("linear", "dense-pt: not stated without a curriculum; the Hugging Face default"),
            "weight_decay": _d(0.01, "LLM expansion paper: coCondenser's settings (weight decay 0.01)"),
            "adam_eps": _d(1e-8, "dense-pt: not stated; AdamW default"),
            "adam_beta1": _d(0.9, "dense-pt: not stated; AdamW default"),
            "adam_beta2": _d(0.999, "dense-pt: not stated; AdamW default"),
            "max_grad_norm": _d(1.0, "dense-pt: not stated; the Hugging Face Trainer's default"),
        },
        scale={
            "global_batch": _d(2048, "LLM expansion paper: contrastive pre-training"),
            "max_steps": _d(120_000, "LLM expansion paper: contrastive pre-training"),
        },
    ),
)

# The curriculum of the LLM expansion paper (section "Curriculum Learning"), for querygen and
# contrastive runs given --curriculum without stage schedules.
CURRICULUM_SCHEDULES = Default(
    ("cosine", "constant"),
    "LLM expansion paper, Curriculum Learning: stage 1 cosine, later stages constant",
)
STAGE_OPTIMIZER = Default(
    "reset",
    "LLM expansion paper, Curriculum Learning: stage 2 starts from the stage-1 checkpoint (a new run: "
    "fresh AdamW moments)",
)

STAGE_WARMUP = Default(
    0,
    "LLM expansion paper, Curriculum Learning: later stages run at a constant rate (no warm-up stated); "
    "with a reset optimiser the first steps move at the peak rate at once, so --stage-warmup offers one",
)

PROFILES: dict[str, dict[str, Profile]] = {}
for _p in _PROFILES:
    PROFILES.setdefault(_p.method, {})[_p.paper] = _p
# The profile a method uses without --paper: the paper the method is named after.
DEFAULT_PAPER: dict[str, str] = {
    "simlm": "simlm",
    "enc-dec-rtd": "simlm",
    "enc-dec-mlm": "simlm",
    "mlm": "simlm",
    "autoencoder": "simlm",
    "condenser": "condenser",
    "cdmae": "cdmae",
    "seed": "seed",
    "querygen": "llm-expansion",
    "contrastive": "llm-expansion",
}


def profile(method: str, paper: str | None = None) -> Profile:
    """The defaults of ``method`` from ``paper`` (default: ``DEFAULT_PAPER[method]``)."""
    from dense_pt.errors import InvalidArgumentError

    if method not in PROFILES:
        raise InvalidArgumentError(f"unknown method {method!r}; choose one of {', '.join(PROFILES)}")
    papers = PROFILES[method]
    name = paper or DEFAULT_PAPER[method]
    if name not in papers:
        raise InvalidArgumentError(
            f"{method} has no defaults from paper {name!r} (available: {', '.join(papers)})"
        )
    return papers[name]


def describe_method(method: str) -> list[dict[str, Any]]:
    """Every profile of ``method``, default first, as plain data (for the CLI and people)."""
    from dense_pt.errors import InvalidArgumentError

    if method not in PROFILES:
        raise InvalidArgumentError(f"unknown method {method!r}; choose one of {', '.join(PROFILES)}")
    names = sorted(PROFILES[method], key=lambda n: n != DEFAULT_PAPER[method])
    return [
        {
            "method": method,
            "paper": n,
            "title": PROFILES[method][n].title,
            "default": n == DEFAULT_PAPER[method],
            "rows": PROFILES[method][n].rows(),
        }
        for n in names
    ]


__all__ = [
    "BERT_FILL",
    "CURRICULUM_SCHEDULES",
    "DEFAULT_PAPER",
    "IMPORTANCE_NOISE",
    "PROFILES",
    "REQUIRED",
    "STAGE_OPTIMIZER",
    "STAGE_WARMUP",
    "Default",
    "Profile",
    "describe_method",
    "profile",
]
