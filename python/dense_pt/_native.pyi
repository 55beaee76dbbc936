# Hand-written stubs for the native module built from rust/py (keep in sync with rust/py/src).
# Checked against the built module by `python -m mypy.stubtest dense_pt._native` (scripts/dev.sh test).
from collections.abc import Callable, Mapping
from typing import Any, final

import numpy as np
import numpy.typing as npt

__all__ = [
    "Bm25Analyzer",
    "Bm25Builder",
    "Bm25Index",
    "Collator",
    "NgramTable",
    "__version__",
    "_panic_for_test",
    "_raise_core_error",
    "_rng_stream",
    "build_ngrams",
    "count_ngrams",
    "file_checksum",
    "mask_importance",
    "mask_nested",
    "mask_random",
    "mask_replace",
    "mask_span_crop",
    "merge_ngrams",
    "negatives_read",
    "negatives_read_buffers",
    "negatives_to_text",
    "negatives_write",
    "negatives_write_buffers",
    "peak_rss_bytes",
    "temp_owner_tag",
]

__version__: str

def _raise_core_error(kind: str, message: str) -> None: ...
def _panic_for_test(in_pool: bool) -> None: ...
def file_checksum(path: str) -> str: ...
def temp_owner_tag() -> str: ...

# --- masking (rust/py/src/masking.rs): [B, L] arrays read in place; anything else goes through
# dense_pt.masking._coerce, the one place arguments are converted and refused ---
def mask_random(
    input_ids: object,
    attention_mask: object,
    p: float,
    seed: object,
    special_tokens_mask: object | None = None,
    word_ids: object | None = None,
    special_ids: object | None = None,
    row_keys: object | None = None,
    threads: int = 1,
) -> npt.NDArray[np.bool_]: ...
def mask_importance(
    input_ids: object,
    attention_mask: object,
    importance: object,
    p: float,
    seed: object,
    sigma: float,  # the defaults are dense_pt.masking's (config/defaults): the native call takes every value
    special_tokens_mask: object | None = None,
    word_ids: object | None = None,
    special_ids: object | None = None,
    row_keys: object | None = None,
    threads: int = 1,
) -> npt.NDArray[np.bool_]: ...
def mask_nested(
    input_ids: object,
    attention_mask: object,
    p_enc: float,
    p_dec: float,
    seed: object,
    importance: object | None,
    sigma: float,
    special_tokens_mask: object | None = None,
    word_ids: object | None = None,
    special_ids: object | None = None,
    row_keys: object | None = None,
    threads: int = 1,
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.bool_]]: ...
def mask_replace(
    input_ids: object,
    mask: object,
    mask_token_id: int,
    vocab_size: int,
    seed: object,
    mask_prob: float,
    random_prob: float,
    special_ids: object | None = None,
    row_keys: object | None = None,
    threads: int = 1,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def mask_span_crop(
    lengths: npt.NDArray[np.generic],
    min_len: int,
    max_len: int,
    seed: int,
    n: int = 1,
    row_keys: npt.NDArray[np.uint64] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]: ...
def _rng_stream(kind: str, seed: int, key: int, purpose: int, n: int) -> npt.NDArray[np.generic]: ...

# --- collate (rust/py/src/collate.rs); dense_pt.collate.Collator resolves the settings ---
# pyo3 classes: built by __new__, not subclassable (final).
@final
class Collator:
    def __new__(
        cls,
        method: str,
        settings: Any,  # a CollatorSettings (or a mapping with its keys): read field by field, by name
        *,
        vocab_size: int,
        special_tokens: Mapping[str, int],
    ) -> Collator: ...
    @property
    def needs_importance(self) -> bool: ...
    @property
    def needs_word_ids(self) -> bool: ...
    @staticmethod
    def view_seed(seed: int, epoch: int, view: int) -> int: ...
    def collate(
        self,
        values: npt.NDArray[np.generic],
        offsets: npt.NDArray[np.int64],
        rows: npt.NDArray[np.int64],
        epoch: int = 0,
        importance: npt.NDArray[np.generic] | None = None,
        word_ids: npt.NDArray[np.generic] | None = None,
    ) -> dict[str, npt.NDArray[np.generic]]: ...

# ---- pmi (rust/py/src/pmi.rs) ----

@final
class NgramTable:
    @staticmethod
    def open(path: str, verify: bool = True) -> NgramTable: ...
    @property
    def path(self) -> str: ...
    @property
    def vocab_hash(self) -> str: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def max_n(self) -> int: ...
    @property
    def min_count(self) -> int: ...
    @property
    def num_passages(self) -> int: ...
    @property
    def shard(self) -> tuple[int, int]: ...
    @property
    def totals(self) -> list[int]: ...
    @property
    def entries(self) -> list[int]: ...
    def count(self, ids: list[int]) -> int: ...
    def pmi(self, ids: list[int]) -> float | None: ...
    def unigram_counts(self) -> np.ndarray: ...
    def ami(self, ids: np.ndarray, window: int = 4) -> np.ndarray: ...
    def ami_ragged(
        self, tokens: np.ndarray, offsets: np.ndarray, window: int = 4, threads: int = 1
    ) -> np.ndarray: ...
    def top_pmi(self, n: int, k: int = 10, min_count: int = 1) -> list[tuple[list[int], int, float]]: ...

def build_ngrams(
    tokens: np.ndarray,
    offsets: np.ndarray,
    out: str,
    *,
    vocab_size: int,
    vocab_hash: str,
    max_n: int = 4,
    min_count: int = 1,
    memory_bytes: int = ...,
    threads: int = 1,
    shard_index: int = 0,
    shard_count: int = 1,
    spill_dir: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, Any]: ...
def count_ngrams(
    tokens: np.ndarray,
    offsets: np.ndarray,
    *,
    vocab_size: int,
    max_n: int = 4,
    min_count: int = 1,
    memory_bytes: int = ...,
    threads: int = 1,
    spill_dir: str | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[list[tuple[np.ndarray, np.ndarray]], dict[str, Any]]: ...
def merge_ngrams(
    parts: list[str], out: str, *, min_count: int = 1, progress: Callable[[str, int, int], None] | None = None
) -> list[int]: ...
def peak_rss_bytes() -> int | None: ...

# negatives (rust/py/src/negatives.rs)

def negatives_write(
    path: str,
    query_ids: list[str],
    passage_ids: list[str],
    offsets: npt.NDArray[np.uint64],
    negatives: npt.NDArray[np.uint32],
    scores: npt.NDArray[np.float32] | None = None,
) -> None: ...
def negatives_read(
    path: str,
) -> tuple[
    list[str],
    list[str],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float32] | None,
]: ...
def negatives_to_text(path: str) -> str: ...
def negatives_write_buffers(
    path: str,
    query_offsets: npt.NDArray[np.int64],
    query_bytes: npt.NDArray[np.uint8],
    passage_offsets: npt.NDArray[np.int64],
    passage_bytes: npt.NDArray[np.uint8],
    offsets: npt.NDArray[np.uint64],
    negatives: npt.NDArray[np.uint32],
    scores: npt.NDArray[np.float32] | None = None,
) -> None: ...
def negatives_read_buffers(
    path: str,
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.int64],
    npt.NDArray[np.uint8],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float32] | None,
]: ...

# ---- bm25 (rust/py/src/bm25.rs) ----

_U32 = npt.NDArray[np.uint32]
_U64 = npt.NDArray[np.uint64]

@final
class Bm25Analyzer:
    def __new__(cls, word_chars: bytes, stopwords: list[str]) -> Bm25Analyzer: ...
    def analyze(
        self, texts: list[str], stem: Callable[[list[str]], list[str]] | None = None
    ) -> tuple[_U32, _U64]: ...
    @property
    def num_words(self) -> int: ...

@final
class Bm25Builder:
    def __new__(cls, path: str) -> Bm25Builder: ...
    def add(self, pids: list[str], ids: _U32, offsets: _U64) -> None: ...
    def finish(self, analyzer: Bm25Analyzer, k1: float, b: float, memory_bytes: int) -> dict[str, Any]: ...

@final
class Bm25Index:
    @staticmethod
    def open(path: str) -> Bm25Index: ...
    @property
    def num_docs(self) -> int: ...
    @property
    def num_terms(self) -> int: ...
    @property
    def num_postings(self) -> int: ...
    @property
    def avgdl(self) -> float: ...
    @property
    def k1(self) -> float: ...
    @property
    def b(self) -> float: ...
    def analyzer(self, word_chars: bytes, stopwords: list[str]) -> Bm25Analyzer: ...
    def search(
        self, ids: _U32, offsets: _U64, k: int, threads: int = 1
    ) -> tuple[_U32, npt.NDArray[np.float64], _U64]: ...
    def pids(self, docs: _U32) -> list[str]: ...
    def term_id(self, stem: str) -> int | None: ...
