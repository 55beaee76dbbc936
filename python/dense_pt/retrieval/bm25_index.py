"""The BM25 index on disk (the engine is rust/core/src/bm25): built once per corpus and settings,
kept in a folder, memory-mapped by every later search.

Where: the folder the caller names (``--index DIR``), else dense-pt's cache
(``$XDG_CACHE_HOME/dense-pt/bm25/<corpus checksum>-<corpus name>.bm25``, ``~/.cache`` by default,
``$DENSE_PT_CACHE_DIR`` to move it; see ``default_index_path``), never beside the corpus: an input's
folder may be shared, read-only or under version control. With the cache turned off
(``DENSE_PT_CACHE_DIR=""``) and no folder named, a search builds the index in a temporary folder
of the run's output folder and removes it after (``index_folder``).

The folder holds the engine's arrays and ``manifest.json``: the index's key and the size and
xxh3-128 checksum of every file (checked when it is opened: ``dense_pt.artifacts.open``).
The key is what the postings depend on: the corpus file's checksum and size, the analysis (bm25s's
token pattern and lower-casing, the stopword list, the stemmer and its version, Python's Unicode
version, which decides ``\\w`` and ``str.lower``) and the scoring (k1, b). ``index_for`` reuses a
folder only when its key equals the one wanted; otherwise it rebuilds it, saying why, and never
silently serves a stale index. A folder that is not a dense-pt BM25 index is never replaced.

Analysis follows ``bm25s.tokenize`` (what the previous ``dense-pt bm25`` ran): Python lower-cases
(``str.lower``), the engine splits on Python's own ``\\w`` (a table of code points made here, so
``(?u)\\b\\w\\w+\\b`` gives the same tokens), drops the stopwords and asks PyStemmer for the stem of
each word it has not seen before (once per distinct word).
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import artifacts, logs
from dense_pt.artifacts.checksums import cache_root, checksum_entry, file_checksum_cached
from dense_pt.artifacts.replace import atomic_dir
from dense_pt.data.readers import DEFAULT_TITLE_SEP, corpus_texts, resolve_beir
from dense_pt.errors import DensePtIOError, FormatError, InvalidArgumentError, MismatchError, not_found
from dense_pt.progress import Progress
from dense_pt.write_errors import write_error

FORMAT_VERSION = 2  # 2: passage indices bit-packed by block (rust/core/src/bm25/postings.rs)
KIND = "bm25 index"  # "dense-pt bm25 index" before dense_pt.artifacts (read as this)
MANIFEST = artifacts.MANIFEST
TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # bm25s's default pattern, which the engine implements
# bm25s's English stopwords (bm25s.stopwords.STOPWORDS_EN, Lucene's English stop set; a test checks
# they are equal), so that bm25s is not needed to build or search.
STOPWORDS_EN = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they",
    "this", "to", "was", "will", "with",
)  # fmt: skip
BUILD_BATCH = 8192  # passages analyzed and added at once
BUILD_MEMORY = 1 << 30  # bytes of postings one inversion pass holds (8 per posting)
DEFAULT_SUFFIX = ".bm25"
CACHE_OFF = (
    "the cache is off ($DENSE_PT_CACHE_DIR is empty) and no index folder was given: give it one with --index"
)


@functools.cache
def word_chars() -> bytes:
    """One bit per code point (little-endian), set where Python's ``re`` matches ``\\w``: every code
    point decoded into one string, the regex run over it once."""
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    found = "".join(re.findall(r"\w+", every)).encode("utf-32-le")
    is_word = np.zeros(0x110000, dtype=bool)
    is_word[np.frombuffer(found, dtype="<u4")] = True
    return np.packbits(is_word, bitorder="little").tobytes()


def stopword_list(stopwords: str | Iterable[str] | None) -> tuple[str, ...]:
    """``"en"`` / ``"english"``: bm25s's English list; None: none; else the words given."""
    if stopwords is None:
        return ()
    if isinstance(stopwords, str):
        if stopwords in ("en", "english"):
            return STOPWORDS_EN
        raise InvalidArgumentError(f"stopwords must be 'en', None or a list of words, got {stopwords!r}")
    return tuple(stopwords)


STEMMER_MISSING = (
    "bm25: PyStemmer is not installed, so words are not stemmed (pip install 'dense-pt[eval]' or "
    "PyStemmer; --no-stem says unstemmed is meant)"
)


@functools.cache
def _pystemmer() -> tuple[Callable[[list[str]], list[str]], str] | None:
    """The English stemmer and its name for the key; None, said once per process, without PyStemmer
    (stemming was asked for: the run would differ from a stemmed one without a word)."""
    try:
        import Stemmer
    except ImportError:
        logs.log.warning(STEMMER_MISSING)
        return None
    from importlib.metadata import version

    return Stemmer.Stemmer("english").stemWords, f"PyStemmer {version('PyStemmer')} english"


@dataclass(frozen=True)
class Analysis:
    """How text becomes terms: the stopwords and whether words are stemmed (English Snowball by
    PyStemmer, when installed: without it words are not stemmed, and the key says so)."""

    stopwords: tuple[str, ...] = STOPWORDS_EN
    stem: bool = True

    def stemmer(self) -> Callable[[list[str]], list[str]] | None:
        found = _pystemmer() if self.stem else None
        return found[0] if found else None

    def key(self) -> dict[str, Any]:
        found = _pystemmer() if self.stem else None
        return {
            "lower": True,
            "token_pattern": TOKEN_PATTERN,
            "stopwords": list(self.stopwords),
            "stemmer": found[1] if found else None,
            "unicode": unicodedata.unidata_version,
        }


def index_key(corpus: Path | None, analysis: Analysis, k1: float, b: float) -> dict[str, Any]:
    """What an index's postings depend on (None for a corpus that is not a file)."""
    source = None
    if corpus is not None:
        source = {
            "bytes": corpus.stat().st_size,
            "xxh3_128": file_checksum_cached(corpus),
            "title_sep": DEFAULT_TITLE_SEP,
        }
    scoring = {"method": "lucene", "k1": k1, "b": b}
    return {"format": FORMAT_VERSION, "corpus": source, "analysis": analysis.key(), "scoring": scoring}


class BM25Index:
    """An open index: analyze query texts and search them."""

    def __init__(self, path: Path, manifest: dict[str, Any], analysis: Analysis):
        from dense_pt import _native

        self.path, self.manifest, self.analysis = path, manifest, analysis
        self.native = _native.Bm25Index.open(str(path))
        self._analyzer = self.native.analyzer(word_chars(), list(analysis.stopwords))
        self._stem = analysis.stemmer()

    @property
    def num_docs(self) -> int:
        return self.native.num_docs

    def search(self, texts: list[str], k: int, threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Top ``k`` of each query text: (passage indices, scores, offsets), best first; ties to
        the passage earlier in the corpus."""
        ids, offsets = self._analyzer.analyze([t.lower() for t in texts], self._stem)
        return self.native.search(ids, offsets, k, threads)

    def pids(self, docs: np.ndarray) -> list[str]:
        return self.native.pids(np.ascontiguousarray(docs, dtype=np.uint32))


def default_index_path(corpus: Path) -> Path | None:
    """The index of ``corpus`` in dense-pt's cache, keyed by the corpus file's checksum and name
    (None when the cache is off)."""
    root = cache_root()
    if root is None:
        return None
    return root / "bm25" / f"{file_checksum_cached(corpus)[:16]}-{corpus.name}{DEFAULT_SUFFIX}"


@contextmanager
def index_folder(
    corpus: str | Path, index: str | Path | None, out: str | Path | None = None
) -> Iterator[Path]:
    """Where the index of ``corpus`` is kept: ``index`` when given, else the cache's folder, else
    (the cache off) a temporary folder inside ``out``'s folder, removed on exit; without ``out``
    there is nowhere to put it: refused."""
    if index is not None:
        yield Path(index)
        return
    corpus = resolve_beir(corpus, "corpus")
    if not corpus.is_file():
        raise not_found(corpus, f"{corpus}: no such corpus file")
    _note_the_old_sibling(corpus)
    cached = default_index_path(corpus)
    if cached is not None:
        yield cached
        return
    if out is None:
        raise InvalidArgumentError(CACHE_OFF)
    logs.status("bm25: the cache is off: the index is built for this run only (--index DIR keeps it)")
    Path(out).parent.mkdir(parents=True, exist_ok=True)  # the run's folder, made as the run's writer would
    with (
        tempfile.TemporaryDirectory(prefix=".bm25-index-", dir=Path(out).parent) as tmp,
        _naming(Path(out), tmp),
    ):
        yield Path(tmp) / "index"


@contextmanager
def _naming(target: Path, temp: str | Path) -> Iterator[None]:
    """A failed write under ``temp`` (a temporary the user never named: the engine's errors name the
    folder it writes) told as one of ``target``, the user's path."""
    try:
        yield
    except DensePtIOError as e:
        if str(temp) not in str(e):
            raise
        raise write_error(e, target) from e


def _note_the_old_sibling(corpus: Path) -> None:
    """Say once that an index earlier dense-pt versions kept beside the corpus is not used."""
    old = corpus.with_name(corpus.name + DEFAULT_SUFFIX)
    if (old / MANIFEST).is_file():
        logs.log.warning(
            f"bm25: {old} (an index dense-pt kept beside the corpus before) is no longer used: indexes "
            "live in dense-pt's cache or at --index; remove it, or pass it as --index"
        )


def _manifest(path: Path, rebuild: bool = False) -> dict[str, Any] | None:
    """The manifest of index folder ``path`` (any layout: ``dense_pt.artifacts``), None when
    ``path`` does not exist; a folder that is not an index is refused (it is never replaced), and
    so is an index of another format version, except an older one when it is to be rebuilt
    (``rebuild``: an index is a cache of its corpus)."""
    if not path.exists():
        return None
    manifest = artifacts.read(path, KIND)
    if manifest is None:
        raise InvalidArgumentError(
            f"{path} exists and is not a dense-pt BM25 index: refusing to replace it (give --index "
            "a new folder, or remove this one)"
        )
    version = manifest["key"].get("format") if isinstance(manifest["key"], dict) else None
    older = isinstance(version, int) and 1 <= version < FORMAT_VERSION
    if version != FORMAT_VERSION and not (older and rebuild):
        remedy = "rebuild it (dense-pt bm25 CORPUS --index DIR)" if older else "give --index a new folder"
        raise FormatError(
            f"BM25 index format version {version!r} is not supported (this dense-pt reads version "
            f"{FORMAT_VERSION}); {remedy}",
            path / MANIFEST,
        )
    return manifest


def open_index(
    path: str | Path, analysis: Analysis | None = None, key: dict[str, Any] | None = None
) -> BM25Index:
    """Open an index folder, checking its files against the manifest (and its key, when given)."""
    path = Path(path)
    if _manifest(path) is None:
        raise not_found(path, f"{path}: no BM25 index there")
    manifest = artifacts.open(path, KIND, verify="cached")
    if key is not None and manifest["key"] != key:
        raise MismatchError(f"{path}: the index was built for {_differences(manifest['key'], key)}")
    stored = manifest["key"]["analysis"]
    want = analysis or Analysis(tuple(stored["stopwords"]), stored["stemmer"] is not None)
    if want.key()["stemmer"] != stored["stemmer"]:
        raise MismatchError(f"{path}: built with stemmer {stored['stemmer']}, here {want.key()['stemmer']}")
    return BM25Index(path, manifest, want)


def _differences(have: Any, want: dict[str, Any]) -> str:
    if not isinstance(have, dict):
        return "another format"
    parts = [k for k in want if have.get(k) != want[k]]
    return "another " + " and ".join(parts or ["key"])


def _batches(passages: Iterable[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    it = iter(passages)
    while batch := list(islice(it, size)):
        yield batch


def build_index(
    passages: Iterable[tuple[str, str]],
    path: str | Path,
    *,
    analysis: Analysis,
    k1: float,
    b: float,
    key: dict[str, Any],
    memory_bytes: int = BUILD_MEMORY,
    progress: Progress | None = None,
) -> BM25Index:
    """Build an index from ``(pid, text)`` pairs (streamed in batches, never held) into ``path``,
    atomically: an interrupted build leaves no folder (or the previous one)."""
    from dense_pt import _native

    path = Path(path)
    _manifest(path, rebuild=True)  # refuses a folder that is not an index
    analyzer = _native.Bm25Analyzer(word_chars(), list(analysis.stopwords))
    stem = analysis.stemmer()
    with atomic_dir(path, force=True) as tmp, _naming(path, tmp):
        builder = _native.Bm25Builder(str(tmp))
        done = 0
        if progress is not None:
            progress.update("indexing", 0)
        for batch in _batches(passages, BUILD_BATCH):
            ids, offsets = analyzer.analyze([t.lower() for _, t in batch], stem)
            builder.add([p for p, _ in batch], ids, offsets)
            done += len(batch)
            if progress is not None:
                progress.update("indexing", done)
        stats = builder.finish(analyzer, k1, b, memory_bytes)
        files = {f.name: checksum_entry(f) for f in sorted(tmp.iterdir())}
        settings = {"k1": k1, "b": b, "stopwords": list(analysis.stopwords), "stem": analysis.stem}
        head = artifacts.header(KIND, "bm25", format=FORMAT_VERSION, key=key, settings=settings, files=files,
                                complete=True)  # fmt: skip
        artifacts.write(
            tmp, head, {"stats": stats, "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        )
    return open_index(path, analysis)


def index_for(
    corpus: str | Path,
    *,
    index: str | Path | None = None,
    analysis: Analysis,
    k1: float,
    b: float,
    progress: Progress | None = None,
) -> BM25Index:
    """The index of a corpus file for these settings: opened from ``index`` (default: in dense-pt's
    cache, see ``default_index_path``; ``index_folder`` when the cache may be off) when its key
    matches, else built there."""
    corpus = resolve_beir(corpus, "corpus")
    if not corpus.is_file():
        raise not_found(corpus, f"{corpus}: no such corpus file")
    key = index_key(corpus, analysis, k1, b)
    if index is None:
        index = default_index_path(corpus)
        if index is None:
            raise InvalidArgumentError(CACHE_OFF)
    path = Path(index)
    manifest = _manifest(path, rebuild=True)
    if manifest is not None and manifest["key"] == key:
        try:
            return open_index(path, analysis, key)
        except (FormatError, MismatchError) as e:
            logs.status(f"bm25: rebuilding the index at {path}: {e}")
    elif manifest is not None:
        logs.status(
            f"bm25: rebuilding the index at {path}: it was built for {_differences(manifest['key'], key)}"
        )
    else:
        logs.status(f"bm25: building the index at {path}")
    return build_index(corpus_texts(corpus), path, analysis=analysis, k1=k1, b=b, key=key, progress=progress)
