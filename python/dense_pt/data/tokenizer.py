"""Tokenizers: load one (tokenizer.json or a local HF folder), train a small WordPiece on the fly,
and identify a vocabulary by hash so every artifact can say which tokenizer it was built for."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import Any

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
    """Load a ``tokenizer.json`` file, or the ``tokenizer.json`` inside a local HF model folder,
    with padding and truncation switched off (see ``without_padding_or_truncation``): every
    caller tokenizes content and handles length itself."""
    path = Path(path)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.exists():
        raise FormatError("expected a tokenizer.json file or a model folder containing one", path=file)
    try:
        tok = Tokenizer.from_file(str(file))
    except Exception as exc:  # the tokenizers library raises a bare Exception on bad JSON
        raise FormatError(f"not a valid tokenizers JSON file ({exc})", path=file) from exc
    return without_padding_or_truncation(tok)


def hf_fast_tokenizer(
    tok: Tokenizer, special_ids: dict[str, int], model_max_length: int | None = None
) -> Any:
    """``tok`` as a transformers ``PreTrainedTokenizerFast`` (for ``save_pretrained``), its special
    tokens named by role from their ids (a store's manifest ``special_tokens``), never assumed to be
    BERT's; ``model_max_length``: the length the model was trained at, which loaders
    (``AutoTokenizer``, sentence-transformers) then truncate to. Needs transformers."""
    from transformers import PreTrainedTokenizerFast

    names = {
        f"{role}_token": tok.id_to_token(int(i)) for role, i in special_ids.items() if role in _ROLE_NAMES
    }
    limit = {} if model_max_length is None else {"model_max_length": int(model_max_length)}
    return PreTrainedTokenizerFast(tokenizer_object=tok, **names, **limit)


# Hugging Face writes this (int(1e30)) as model_max_length when a tokenizer has no limit.
_NO_LIMIT = 10**12
# Models whose position table has pad_token_id + 1 extra rows before the first real position.
_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "longformer", "bart", "mbart")


def known_max_length(path: str | Path) -> tuple[int | None, str]:
    """The longest input (special tokens included) the model or tokenizer at ``path`` declares,
    and where it was found: ``model_max_length`` of a folder's tokenizer_config.json, else its
    config.json ``max_position_embeddings`` (minus the offset RoBERTa-style models reserve);
    ``(None, reason)`` when neither is there. A tokenizer.json's own truncation setting is not a
    limit of the model (all-MiniLM-L6-v2's says 128 for a 512-position model) and is ignored."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    tok_cfg = folder / "tokenizer_config.json"
    if tok_cfg.is_file():
        value = _json_int(tok_cfg, "model_max_length")
        if value is not None and 0 < value < _NO_LIMIT:
            return value, f"model_max_length of {tok_cfg}"
    model_cfg = folder / "config.json"
    if model_cfg.is_file():
        value = _json_int(model_cfg, "max_position_embeddings")
        if value is not None and value > 0:
            try:
                cfg = json.loads(model_cfg.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                cfg = {}
            if str(cfg.get("model_type", "")) in _OFFSET_POSITIONS:
                value -= int(cfg.get("pad_token_id") or 0) + 1
            return value, f"max_position_embeddings of {model_cfg}"
    return None, "no limit known"


def _json_int(path: Path, key: str) -> int | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get(key)
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and value == value:
        return int(min(value, _NO_LIMIT))
    return None


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
    from dense_pt.logs import stderr_is_terminal

    trainer = trainers.WordPieceTrainer(  # its progress (indicatif) is blank lines in a log file
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIAL_TOKENS,
        show_progress=stderr_is_terminal(),
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


# A passage longer than this many characters per wanted token is tokenized by its head only
# (see ``encode_texts``); at least MIN_HEAD_CHARS characters are always tried.
HEAD_CHARS_PER_TOKEN = 16
MIN_HEAD_CHARS = 4096
_SPACES = (" ", "\n", "\t")


def _head(text: str, chars: int) -> tuple[str, bool]:
    """The first ``chars`` characters of ``text``, cut back to the last whitespace in the second
    half (so no word is split), and whether the cut fell inside a word."""
    if len(text) <= chars:
        return text, False
    cut = max(text.rfind(c, chars // 2, chars) for c in _SPACES)
    if cut > 0:
        return text[:cut], False
    return text[:chars], True


_pool_started = False


def start_thread_pool(tok: Tokenizer) -> None:
    """Start the tokenizers library's thread pool (it starts on the first parallel call of the
    process) on a two-text batch, with stderr silenced. A pool that cannot start (a memory or
    process limit: ``ulimit -v`` leaves no room for its threads' stacks and arenas) panics inside
    the library, whose panic hook writes a Rust report to stderr before Python sees the exception;
    then the rest of the process tokenizes on its own thread, with one warning, instead of failing
    at every batch."""
    global _pool_started
    if _pool_started or os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("false", "0", "off", "no"):
        return
    _pool_started = True
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            try:
                tok.encode_batch(["a", "b"], add_special_tokens=False)
                return
            except BaseException as exc:  # pyo3's PanicException derives from BaseException
                if type(exc).__name__ != "PanicException":
                    raise
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from dense_pt import logs

    logs.log.warning(
        "the tokenizer's worker threads could not start (a memory or process limit, `ulimit -v` / "
        "`ulimit -u`?): tokenizing on one thread"
    )


def encode_texts(
    tok: Tokenizer, texts: list[str], max_content: int | None = None
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Content token ids (no specials) and per-token word indices for a batch of texts.

    ``encode_batch`` runs multi-threaded inside the tokenizers library. Truncation keeps the head
    and never tokenizes a whole long text: a text is first cut to ``16 * max_content``
    characters (4,096 at least) at a word boundary, and only if that head yields too few tokens
    is it doubled, so a 200 MB passage costs about as much as a short one (tokenizing it whole
    took 19 GB). The tokens of the head are the first tokens of the whole text: pre-tokenizers
    split at whitespace, and a head cut inside a word drops that word's tokens before counting.
    The word indices are computed for the whole batch at once with numpy (a per-token Python loop
    cost as much as the tokenization itself).
    """
    tok = without_padding_or_truncation(tok)
    start_thread_pool(tok)
    if max_content is None:
        encs = tok.encode_batch(texts, add_special_tokens=False)
        ids_lists = [e.ids for e in encs]
        word_lists = [e.word_ids for e in encs]
    else:
        ids_lists, word_lists = _encode_heads(tok, texts, max_content)
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


def _encode_heads(
    tok: Tokenizer, texts: list[str], max_content: int
) -> tuple[list[list[int]], list[list[int | None]]]:
    """At most ``max_content`` leading tokens (and their word ids) of each text, tokenizing only
    a head of each text (see ``encode_texts``)."""
    if max_content < 0:
        raise InvalidArgumentError(f"max_content must be >= 0, got {max_content}")
    chars = max(MIN_HEAD_CHARS, HEAD_CHARS_PER_TOKEN * max_content)
    ids_out: list[list[int]] = [[] for _ in texts]
    words_out: list[list[int | None]] = [[] for _ in texts]
    todo = list(range(len(texts)))
    while todo:
        heads = [_head(texts[i], chars) for i in todo]
        encs = tok.encode_batch([h for h, _ in heads], add_special_tokens=False)
        again = []
        for i, (head, split_word), e in zip(todo, heads, encs, strict=True):
            ids, words = e.ids, e.word_ids
            whole = len(head) == len(texts[i])
            if split_word and ids:  # the last word was cut: its tokens may differ
                last = words[-1]
                keep = len(words)
                while keep and words[keep - 1] == last:
                    keep -= 1
                ids, words = ids[:keep], words[:keep]
            if whole or len(ids) >= max_content:
                ids_out[i], words_out[i] = ids[:max_content], words[:max_content]
            else:
                again.append(i)
        todo = again
        chars *= 2
    return ids_out, words_out


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
