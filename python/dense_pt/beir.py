"""``dense-pt beir``: a model evaluated on BEIR folders in one call, as the four commands do it.

For each folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) the steps are the
library's own, with the same defaults as the commands: a corpus store built with the model's
tokenizer (``data.build.build_corpus_store``, ``dense-pt corpus build``), the passages and the
split's judged queries encoded with the model's own lengths and pooling (``retrieval.encode``:
its ``retriever.json``, else its sentence-transformers files, else SimLM's), an exact search
(``retrieval.search.search_file``) and the measures (``evaluation.evaluate_run``); with ``bm25``
the BM25 run (``retrieval.bm25``), with ``fuse`` the hybrid (``retrieval.fusion.fuse_files``).
So a row equals what ``corpus build``, ``encode`` (twice), ``search`` and ``evaluate`` give.

Only the queries judged in the split are encoded and searched (BEIR's own loader does the same):
the others could not change a measure. The work goes to a temporary folder, or, with ``runs``, to
``runs/<dataset>/`` (the runs as TREC text, the store, the embeddings, ``results.json``), where a
second call resumes the encoding and rebuilds nothing that is up to date.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from dense_pt import logs
from dense_pt.config.base import Model
from dense_pt.config.beir import BeirSettings
from dense_pt.errors import FormatError, InvalidArgumentError, not_found

M = TypeVar("M", bound=Model)

DEFAULT_SPLIT = "test"
COMMAND = "beir"
SYSTEMS = ("dense", "bm25", "fused")  # the rows of each dataset, in this order


@dataclass
class BeirRow:
    """One system on one dataset: its measures over the split's judged queries."""

    dataset: str
    system: str
    measures: dict[str, float]
    queries: int  # judged queries of the split
    run: Path | None = None  # kept with ``runs``

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "system": self.system, "measures": self.measures,
                "queries": self.queries, "run": None if self.run is None else str(self.run)}  # fmt: skip


@dataclass
class BeirResult:
    rows: list[BeirRow]
    settings: dict[str, Any]
    datasets: dict[str, dict[str, Any]] = field(default_factory=dict)  # split, lengths, pooling

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [r.to_json() for r in self.rows],
            "datasets": self.datasets,
            "settings": self.settings,
        }


@dataclass
class Dataset:
    """A BEIR folder, checked: its name (the row label), files and the split's qrels."""

    name: str
    folder: Path
    split: str

    @property
    def qrels(self) -> Path:
        return self.folder / "qrels" / f"{self.split}.tsv"


def open_dataset(folder: str | Path, split: str | None) -> Dataset:
    """``folder`` as a BEIR dataset: corpus.jsonl, queries.jsonl and the qrels of ``split`` (None:
    ``test`` if there, else the folder's only split), or one line saying what is missing."""
    folder = Path(folder)
    if not folder.exists():
        raise not_found(folder, "no such BEIR folder")
    if not folder.is_dir():
        raise FormatError(
            "expected a BEIR folder (corpus.jsonl, queries.jsonl, qrels/), found a file", folder
        )
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / name).is_file():
            raise FormatError(f"not a BEIR folder: it has no {name}", folder)
    splits = sorted(p.stem for p in (folder / "qrels").glob("*.tsv")) if (folder / "qrels").is_dir() else []
    if not splits:
        raise FormatError("not a BEIR folder: it has no qrels/<split>.tsv", folder)
    if split is None:
        if DEFAULT_SPLIT not in splits and len(splits) > 1:
            raise InvalidArgumentError(
                f"{folder}: no {DEFAULT_SPLIT} split and several others ({', '.join(splits)}): choose one with --split"
            )
        split = DEFAULT_SPLIT if DEFAULT_SPLIT in splits else splits[0]
    elif split not in splits:
        raise InvalidArgumentError(f"{folder}: no qrels/{split}.tsv (its splits: {', '.join(splits)})")
    return Dataset(folder.resolve().name, folder, split)


def open_datasets(folders: Sequence[str | Path], split: str | None) -> list[Dataset]:
    """Every folder checked before any work starts; two folders of the same name are refused (the
    name labels their rows and their ``runs`` folder)."""
    if not folders:
        raise InvalidArgumentError("give at least one BEIR folder")
    found = [open_dataset(f, split) for f in folders]
    names = [d.name for d in found]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidArgumentError(f"two BEIR folders are named {', '.join(twice)}: their rows would mix")
    return found


def evaluate_beir(
    model: str | Path,
    folders: Sequence[str | Path],
    settings: BeirSettings | None = None,
    runs: str | Path | None = None,
    *,
    force: bool = False,
    progress: bool = True,
) -> BeirResult:
    """``model`` (a local model folder) on each BEIR folder of ``folders``: the dense row, and the
    BM25 and fused rows when ``settings`` asks for them. ``runs``: a folder to keep each
    dataset's runs, store and embeddings in (``runs/<dataset>/``), claimed as ``dense-pt beir``'s
    (``force``: write into a folder dense-pt did not mark)."""
    from dense_pt.retrieval.encode import check_model_folder

    s = BeirSettings() if settings is None else settings
    model = Path(model)
    check_model_folder(model)
    datasets = open_datasets(folders, s.split)
    rows: list[BeirRow] = []
    info: dict[str, dict[str, Any]] = {}
    with _work_root(runs, force) as root:
        for d in datasets:
            logs.status(f"beir: {d.name} ({d.split})")
            found, info[d.name] = _evaluate_one(model, d, root / d.name, s, progress)
            if runs is None:  # the temporary folder goes: no run to point at
                found = [BeirRow(r.dataset, r.system, r.measures, r.queries) for r in found]
            else:
                _write_results(root / d.name, found, info[d.name])
            rows += found
    return BeirResult(rows, {"model": str(model), **s.model_dump()}, info)


@contextlib.contextmanager
def _work_root(runs: str | Path | None, force: bool) -> Iterator[Path]:
    """``runs`` claimed for ``dense-pt beir``, or a temporary folder removed afterwards."""
    if runs is None:
        with tempfile.TemporaryDirectory(prefix="dense-pt-beir-") as tmp:
            yield Path(tmp)
        return
    from dense_pt.artifacts import claimed

    with claimed(runs, "beir evaluation", COMMAND, force=force) as root:
        yield root


def _evaluate_one(
    model: Path, d: Dataset, work: Path, s: BeirSettings, progress: bool
) -> tuple[list[BeirRow], dict[str, Any]]:
    """The rows of one dataset, and what was used (split, lengths, pooling, queries)."""
    from dense_pt.data import load_qrels

    work.mkdir(parents=True, exist_ok=True)
    qrels = load_qrels(d.qrels)
    queries = _judged_queries(d, qrels, work / "queries.jsonl")
    dense = _dense_run(model, d, queries, work, s, progress)
    runs = {"dense": dense}
    if s.bm25 or s.fuse:
        runs["bm25"] = _bm25_run(d, queries, work, s)
    if s.fuse:
        runs["fused"] = _fused_run(runs["bm25"], dense, work, s)
    rows = [BeirRow(d.name, system, _measures(runs[system], qrels, s), len(qrels), runs[system])
            for system in SYSTEMS if system in runs]  # fmt: skip
    return rows, {"split": d.split, "judged_queries": len(qrels), **_encoding(work)}


def _judged_queries(d: Dataset, qrels: dict[str, dict[str, int]], out: Path) -> Path:
    """The split's judged queries (those queries.jsonl holds), in its order, as a BEIR queries
    file: what is encoded, searched and run through BM25."""
    from dense_pt.data import load_queries
    from dense_pt.fsutil import atomic_file

    texts = load_queries(d.folder / "queries.jsonl")
    missing = [q for q in qrels if q not in texts]
    if missing:
        logs.log.warning(
            f"beir: {d.name}: {len(missing)} judged queries of {d.split} are not in queries.jsonl "
            f"(e.g. {missing[0]!r}); each counts as zero"
        )
    with atomic_file(out, "w", encoding="utf-8") as f:
        for q, text in texts.items():
            if q in qrels:
                f.write(json.dumps({"_id": q, "text": text}, ensure_ascii=False) + "\n")
    return out


def _dense_run(model: Path, d: Dataset, queries: Path, work: Path, s: BeirSettings, progress: bool) -> Path:
    """``corpus build`` (the model's tokenizer, its default length), ``encode`` passages and
    queries (each with its own length), ``search``: the run file."""
    from dense_pt.config.retrieval import EncodeSettings, SearchSettings
    from dense_pt.data import build_corpus_store
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.search import search_file

    build_corpus_store(d.folder / "corpus.jsonl", model, work / "store")
    passages = _part(EncodeSettings, s, max_length=s.passage_max_length)
    encode(model, work / "store", work / "passages", passages, progress=progress)
    encode(
        model, queries, work / "queries", passages.replace(max_length=s.query_max_length), progress=progress
    )
    out = work / "dense.trec"
    search_file(work / "queries", work / "passages", out, _part(SearchSettings, s))
    return out


def _part(model: type[M], s: BeirSettings, **more: Any) -> M:
    """The settings of one job ``dense-pt beir`` runs: its fields of ``s`` (BeirSettings inherits
    every job's model), plus ``more``."""
    return model.load({**s.model_dump(include=set(model.model_fields)), **more}, "dense-pt beir")


def _bm25_run(d: Dataset, queries: Path, work: Path, s: BeirSettings) -> Path:
    """``dense-pt bm25`` over the corpus, its index kept in the work folder (not beside the data)."""
    from dense_pt.config.retrieval import BM25Command
    from dense_pt.retrieval.bm25 import bm25

    out = work / "bm25.trec"
    bm25(d.folder / "corpus.jsonl", queries, out, _part(BM25Command, s), index=work / "bm25-index")
    return out


def _fused_run(sparse: Path, dense: Path, work: Path, s: BeirSettings) -> Path:
    """``dense-pt fuse`` of the BM25 and dense runs (RRF, or interpolation with the given weight)."""
    from dense_pt.config.fusion import FuseSettings
    from dense_pt.retrieval.fusion import fuse_files

    out = work / "fused.trec"
    fuse_files(sparse, dense, out, _part(FuseSettings, s))
    return out


def _measures(run: Path, qrels: dict[str, dict[str, int]], s: BeirSettings) -> dict[str, float]:
    from dense_pt.evaluation import evaluate_run

    conventions = s.model_dump(include={"tie_break", "drop_self_hits", "rel_level"})
    return evaluate_run(run, qrels, measures=s.measures, **conventions).measures


def _encoding(work: Path) -> dict[str, Any]:
    """The lengths, pooling and normalisation the embeddings were made with (their manifests)."""
    found: dict[str, Any] = {}
    for side, folder in (("query", "queries"), ("passage", "passages")):
        m = json.loads((work / folder / "manifest.json").read_text(encoding="utf-8"))
        found[f"{side}_max_length"] = m["settings"]["max_length"]
        found["pooling"], found["normalize"] = m["pooling"], m["normalize"]
    return found


def _write_results(work: Path, rows: list[BeirRow], info: dict[str, Any]) -> None:
    from dense_pt.fsutil import write_json_atomic

    write_json_atomic(work / "results.json", {"rows": [r.to_json() for r in rows], **info})
