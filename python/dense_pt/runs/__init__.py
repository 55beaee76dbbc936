"""Run files: a run lists each query's retrieved passages with their scores and ranks.

Every command writes a run through ``RunWriter`` and reads one through ``read_run``, a
``RunChunk`` of whole queries at a time, so no stage holds a run as Python objects; ``load_run`` /
``write_run`` give and take the ``{qid: {docid: score}}`` dict of a small run (a test, a notebook).

Two formats, decided by ``run_format`` only: **Arrow IPC** (written for names ending ``.arrow``,
``.feather`` or ``.ipc``; read whenever a file starts with Arrow's magic bytes): columns
``query_id, doc_id, score, rank`` (ir-measures' names: ``runs.arrow``), one zstd record batch per
written chunk, each with its checksum (``runs.checksum``). Chosen over Parquet by measurement
(BENCHMARKS.md, "Run files"): on 10M rows zstd Arrow writes 6x and reads 2x faster than zstd
Parquet and reads one chunk at random 3x faster, for 35% more bytes. **TREC text**
``qid Q0 docid rank score tag`` (any other name; ``runs.trec``), the export every evaluation tool
reads. Readers keep the file's order and ranks and refuse a query listed in two places, a passage
listed twice for one query, a missing, empty or null id, a score that is not a finite number and a
negative rank, naming the line (TREC) or row (Arrow).

Modules, each one job: ``chunk`` (``RunChunk``), ``rank`` (the tie rule), ``trec`` and ``arrow``
(the formats), ``checksum``, ``read``, ``write`` (and ``convert_run``), ``index`` (queries by
random access; runs aligned by query, for fusion) and ``merge`` (``dense-pt runs merge``).
"""

from dense_pt.runs.chunk import RunChunk
from dense_pt.runs.index import AlignedRuns
from dense_pt.runs.merge import merge_runs
from dense_pt.runs.rank import rank_hits, rank_order
from dense_pt.runs.read import RunSource, load_run, read_run, run_format
from dense_pt.runs.trec import format_score
from dense_pt.runs.write import RunWriter, convert_run, write_run

__all__ = [
    "AlignedRuns",
    "RunChunk",
    "RunSource",
    "RunWriter",
    "convert_run",
    "format_score",
    "load_run",
    "merge_runs",
    "rank_hits",
    "rank_order",
    "read_run",
    "run_format",
    "write_run",
]
