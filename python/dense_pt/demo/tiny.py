"""The demo's tiny models, built on the spot (never downloaded): the BERT config its pre-training
starts from, and random-initialised language models for the expansion stage (and tests). The LMs'
outputs are random tokens: they exercise the generation plumbing (batching, padding, seeding,
decoding), not query quality.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dense_pt._extras import require

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def tiny_bert_config(vocab_size: int, pad_token_id: int) -> dict[str, Any]:
    """The demo encoder: a 4-layer, 64-wide BERT (``config.json`` contents), sized to a vocabulary.
    160 positions: the store's 126 content tokens plus specials fit."""
    return {
        "model_type": "bert",
        "vocab_size": vocab_size,
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "max_position_embeddings": 160,
        "pad_token_id": pad_token_id,
    }


def _tokenizer(texts: Iterable[str], vocab_size: int):  # -> transformers.PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    transformers = require("transformers")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    from dense_pt.logs import stderr_is_terminal

    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=stderr_is_terminal(),
    )
    tok.train_from_iterator(list(texts), trainer)
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )


def build_tiny_lm(
    folder: str | Path, texts: Iterable[str], kind: str = "causal", vocab_size: int = 400, seed: int = 0
) -> Path:
    """Save a tiny random ``kind`` ("causal": Llama, "seq2seq": T5) model and its tokenizer to ``folder``."""
    torch = require("torch")
    transformers = require("transformers")
    folder = Path(folder)
    tok = _tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    ids = {"pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id}
    if kind == "causal":
        config = transformers.LlamaConfig(
            vocab_size=len(tok),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            bos_token_id=tok.bos_token_id,
            **ids,
        )
        model = transformers.LlamaForCausalLM(config)
    elif kind == "seq2seq":
        config = transformers.T5Config(
            vocab_size=len(tok),
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            decoder_start_token_id=tok.pad_token_id,
            **ids,
        )
        model = transformers.T5ForConditionalGeneration(config)
    else:
        raise ValueError(f"kind must be 'causal' or 'seq2seq', got {kind!r}")
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
