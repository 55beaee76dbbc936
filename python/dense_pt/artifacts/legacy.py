"""Outputs written before the one manifest schema, read as if they had it.

Three older layouts exist: (1) a command's own ``manifest.json`` without the header (a BM25 index,
embeddings, a corpus store, a fine-tuned model, a pipeline stage), translated field by field;
(2) the ownership mark ``.dense-pt.json`` naming the command that claimed a folder; (3) for folders
written before the marks, a file only that command writes (``PROOF``). dense-pt reads them all,
resumes them, and replaces a mark by a manifest when it writes into the folder again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OLD_MARK = ".dense-pt.json"  # the ownership mark of folders written before this layer

# The kind of output each command writes (the marks named commands).
KIND_OF_COMMAND = {
    "encode": "embeddings",
    "pretrain": "pretraining run",
    "expand": "pseudo-queries",
    "train retriever": "retriever",
    "train reranker": "reranker",
    "train distill": "distilled retriever",
    "pipeline": "pipeline",
    "study": "study",
    "demo": "demo",
    "beir": "beir evaluation",
}
# Files that prove a folder written before the marks is the kind's (one of them is enough; an
# older manifest.json of the kind, ``translate``d, proves it too).
PROOF = {
    "pretraining run": ("run_config.json",),
    "pseudo-queries": ("expansion.json",),
    "retriever": ("checkpoints",),
    "reranker": ("checkpoints",),
    "distilled retriever": ("checkpoints",),
    "study": ("results.json",),
    "demo": ("summary.json", "data.json"),
    "pipeline report": ("report.md", "stages.png"),
}
# Manifests of another name (a folder has one or the other).
OLD_FILES = ("expansion.json",)
_TRAINED = {"retriever": "retriever", "reranker": "reranker", "distill": "distilled retriever"}
_OLD_INDEX = "dense-pt bm25 index"


def kind_of_command(command: str) -> str:
    """The kind of output a command's mark stands for (a pipeline's stage: "pipeline <stage>")."""
    if command == "pipeline report":
        return "pipeline report"
    if command.startswith("pipeline "):
        return "pipeline stage"
    return KIND_OF_COMMAND.get(command, command)


def old_mark(folder: Path) -> str | None:
    """The command named by an old ownership mark in ``folder`` (``kind_of_command`` gives its
    kind), or None (no mark, or not ours)."""
    mark = folder / OLD_MARK
    try:
        if mark.is_symlink() or mark.stat().st_size > 4096:
            return None
        data = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if (
        isinstance(data, dict)
        and data.get("written_by") == "dense-pt"
        and isinstance(data.get("command"), str)
    ):
        return str(data["command"])
    return None


def _version(data: dict[str, Any]) -> str:
    v = data.get("code_version") or data.get("dense_pt_version")
    return v if isinstance(v, str) else "unknown"


def _head(kind: str, command: str, data: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"kind": kind, "format": 1, "written_by": {"command": command, "version": _version(data)},
            "key": None, "settings": {}, "files": {}, "complete": True, **fields}  # fmt: skip


def _old_kind(data: dict[str, Any]) -> str | None:
    if data.get("kind") == _OLD_INDEX:
        return "bm25 index"
    if isinstance(data.get("fingerprint"), str):  # the oldest stage manifests name no stage
        return "pipeline stage"
    if isinstance(data.get("shards"), list) and isinstance(data.get("settings"), dict):
        return "embeddings"
    if "special_tokens" in data and "columns" in data:
        return "corpus store"
    if data.get("stage") in _TRAINED and "steps" in data:
        return _TRAINED[data["stage"]]
    if data.get("format") == "dense-pt-queries":
        return "pseudo-queries"
    return None


def translate(data: Any, folder: Path) -> dict[str, Any] | None:
    """An older ``manifest.json`` of ``folder`` in the schema's shape (its own fields kept), or None
    when it is none of dense-pt's."""
    if not isinstance(data, dict):
        return None
    kind = _old_kind(data)
    if kind is None:
        return None
    rest = {k: v for k, v in data.items() if k not in ("kind", "key", "files", "settings", "complete")}
    if kind == "bm25 index":
        key = data.get("key")
        fmt = key.get("format") if isinstance(key, dict) else None
        head = _head(kind, "bm25", data, key=key, files=data.get("files") or {},
                     format=fmt if isinstance(fmt, int) else 0)  # fmt: skip
    elif kind == "pipeline stage":
        head = _head(kind, "pipeline run", data, key=data["fingerprint"], settings=data.get("params") or {},
                     complete=data.get("status") == "done")  # fmt: skip
    elif kind == "embeddings":
        rest.pop("format_version", None)
        head = _head(kind, "encode", data, key=data["settings"].get("source_hash"), settings=data["settings"],
                     complete=data.get("complete") is True, format=data.get("format_version", 1))  # fmt: skip
    elif kind == "pseudo-queries":
        rest.pop("format_version", None)
        rest.pop("format", None)
        head = _head(kind, "expand", data, format=data.get("format_version", 1), complete=False)
    elif kind == "corpus store":
        head = _head(kind, "corpus build", data, files=data.get("files") or {},
                     format=data.get("format_version", 1))  # fmt: skip
    else:
        head = _head(kind, f"train {data['stage']}", data, settings=data.get("settings") or {})
    return {**head, **rest}
