"""Tokenizers: load one (tokenizer.json or a local HF folder), train a small WordPiece on the fly,
and identify a vocabulary by hash so every artifact can say which tokenizer it was built for."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from itertools import chain
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


def without_padding_or_truncation(tok: Tokenizer) -> Tokenizer:
    """The tokenizer itself, or a copy with padding and truncation switched off. Model folders often
    ship a tokenizer.json that pads to a fixed length and truncates (all-MiniLM-L6-v2: both at 128),
    which would put [PAD] ids into a store and silently cut passages; the store truncates itself."""
    if tok.padding is None and tok.truncation is None:
        return tok
    plain = Tokenizer.from_str(tok.to_str())
    plain.no_padding()
    plain.no_truncation()
    return plain


def encode_texts(
    tok: Tokenizer, texts: list[str], max_content: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Content token ids (no specials) and per-token word indices for a batch of texts.

    ``encode_batch`` runs multi-threaded inside the tokenizers library. Truncation keeps the head.
    The word indices are computed for the whole batch at once with numpy (a per-token Python loop
    cost as much as the tokenization itself).
    """
    encs = without_padding_or_truncation(tok).encode_batch(texts, add_special_tokens=False)
    ids_lists = [e.ids if max_content is None else e.ids[:max_content] for e in encs]
    word_lists = [e.word_ids if max_content is None else e.word_ids[:max_content] for e in encs]
    lengths = np.fromiter((len(x) for x in ids_lists), dtype=np.int64, count=len(ids_lists))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat_ids = np.fromiter(chain.from_iterable(ids_lists), dtype=np.uint32, count=int(offsets[-1]))
    n = int(offsets[-1])
    try:  # fast path: every token belongs to a word (always so without special tokens)
        words = np.fromiter(chain.from_iterable(word_lists), dtype=np.int64, count=n)
    except TypeError:  # some word id is None: mark it -1
        words = np.fromiter(
            (-1 if w is None else w for w in chain.from_iterable(word_lists)), dtype=np.int64, count=n
        )
    flat_words = _word_index_flat(words, offsets)
    return [
        (flat_ids[offsets[i] : offsets[i + 1]], flat_words[offsets[i] : offsets[i + 1]])
        for i in range(len(lengths))
    ]


def _word_index_flat(words: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Renumber the tokenizer's word ids 0, 1, 2, ... within each row; a token without a word id
    starts a new word of its own (so whole-word masking never glues unrelated tokens together)."""
    n = len(words)
    new_word = np.ones(n, dtype=bool)
    if n > 1:
        new_word[1:] = words[1:] != words[:-1]
    new_word[words < 0] = True  # a token without a word id is a word of its own
    starts = offsets[:-1][offsets[:-1] < offsets[1:]]
    new_word[starts] = True
    counter = np.cumsum(new_word, dtype=np.int64)
    # per row: subtract the running count just before the row's first token
    row_base = np.repeat(counter[starts] - 1, np.diff(offsets)[offsets[:-1] < offsets[1:]])
    return (counter - 1 - row_base).astype(np.uint32)


def _word_index(word_ids: list[int | None]) -> np.ndarray:
    """Reference (per-token loop) for one row; kept for the tests of the vectorized version."""
    out = np.empty(len(word_ids), dtype=np.uint32)
    current = -1
    prev: int | None = None
    for i, w in enumerate(word_ids):
        if w is None or w != prev:
            current += 1
        out[i] = current
        prev = w
    return out
