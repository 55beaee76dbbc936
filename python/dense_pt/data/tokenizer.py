"""Tokenizers: load one (tokenizer.json or a local HF folder), train a small WordPiece on the fly,
and identify a vocabulary by hash so every artifact can say which tokenizer it was built for."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from dense_pt.errors import FormatError, InvalidArgumentError

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Names under which the five roles appear in common vocabularies (BERT, RoBERTa/BPE, T5-ish).
_ROLE_NAMES = {
    "pad": ["[PAD]", "<pad>"],
    "unk": ["[UNK]", "<unk>"],
    "cls": ["[CLS]", "<s>", "<cls>"],
    "sep": ["[SEP]", "</s>", "<sep>"],
    "mask": ["[MASK]", "<mask>"],
}


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a ``tokenizer.json`` file, or the ``tokenizer.json`` inside a local HF model folder."""
    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.exists():
        raise FormatError("expected a tokenizer.json file or a model folder containing one", path=file)
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # the tokenizers library raises a bare Exception on bad JSON
        raise FormatError(f"not a valid tokenizers JSON file ({exc})", path=file) from exc


def train_wordpiece(
    texts: Iterable[str], vocab_size: int = 8000, lowercase: bool = True, min_frequency: int = 2
) -> Tokenizer:
    """Train a BERT-style WordPiece tokenizer ([PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3, [MASK]=4)."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    norm = [normalizers.NFD(), normalizers.StripAccents()]
    if lowercase:
        norm.insert(0, normalizers.Lowercase())
    tok.normalizer = normalizers.Sequence(norm)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS
    )
    tok.train_from_iterator(texts, trainer=trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return tok


def special_token_ids(tok: Tokenizer) -> dict[str, int]:
    """The ids of the pad/unk/cls/sep/mask roles; refuses a vocabulary that lacks cls, sep, pad or mask."""
    out: dict[str, int] = {}
    for role, names in _ROLE_NAMES.items():
        for name in names:
            tid = tok.token_to_id(name)
            if tid is not None:
                out[role] = int(tid)
                break
    missing = [r for r in ("cls", "sep", "pad", "mask") if r not in out]
    if missing:
        raise InvalidArgumentError(
            f"tokenizer has no token for role(s) {missing}; expected one of "
            + ", ".join(f"{r}: {_ROLE_NAMES[r]}" for r in missing)
        )
    return out


def vocab_hash(tok: Tokenizer) -> str:
    """sha256 of the (token, id) pairs in id order: equal vocabularies hash equal, whatever the file."""
    vocab = tok.get_vocab(with_added_tokens=True)
    pairs = sorted(vocab.items(), key=lambda kv: kv[1])
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode("utf-8")).hexdigest()


def encode_texts(
    tok: Tokenizer, texts: list[str], max_content: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Content token ids (no specials) and per-token word indices for a batch of texts.

    ``encode_batch`` runs multi-threaded inside the tokenizers library. Truncation keeps the head.
    """
    encs = tok.encode_batch(texts, add_special_tokens=False)
    out = []
    for enc in encs:
        ids = np.asarray(enc.ids, dtype=np.uint32)
        words = _word_index(enc.word_ids)
        if max_content is not None and len(ids) > max_content:
            ids, words = ids[:max_content], words[:max_content]
        out.append((ids, words))
    return out


def _word_index(word_ids: list[int | None]) -> np.ndarray:
    """Renumber the tokenizer's word ids 0, 1, 2, ... in order; a token without a word id starts a
    new word of its own (so whole-word masking never glues unrelated tokens together)."""
    out = np.empty(len(word_ids), dtype=np.uint32)
    current = -1
    prev: int | None = None
    for i, w in enumerate(word_ids):
        if w is None or w != prev:
            current += 1
        out[i] = current
        prev = w
    return out
