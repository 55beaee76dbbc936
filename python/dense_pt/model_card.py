"""Model cards: every encoder and retriever folder dense-pt writes gets a ``README.md`` in the
Hugging Face format (YAML front matter + markdown), so a checkpoint found later explains itself:
what it started from, the method and its paper, the data, the configuration, the dev metrics of
its stage (added by the pipeline once it has evaluated the stage) and the dense-pt version.

The card's facts are also kept as JSON in ``dense_pt_card.json`` beside it, so a later step (the
pipeline adding metrics) rewrites the card from data instead of parsing markdown.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dense_pt import __version__

CARD_DATA = "dense_pt_card.json"
KINDS = {
    "encoder": ("transformers", "feature-extraction"),
    "retriever": ("sentence-transformers", "sentence-similarity"),
    "reranker": ("transformers", "text-classification"),
}


def is_local_model(name: str) -> bool:
    """A folder or file here, not a Hub id (the Hub's ``base_model`` field takes ids only)."""
    return Path(name).expanduser().exists() or name.startswith(("/", ".", "pkg:"))


def write_model_card(
    folder: str | Path,
    kind: str,
    title: str,
    base_model: str | Path,
    method: str,
    paper: str,
    data: dict[str, Any],
    config: dict[str, Any],
    metrics: dict[str, Any] | None = None,
) -> Path:
    """Write (or rewrite) ``folder/README.md``. ``kind``: encoder, retriever or reranker;
    ``metrics``: {"split": ..., "values": {measure: value}, "settings": {...}}."""
    facts = {"kind": kind, "title": title, "base_model": str(base_model), "method": method, "paper": paper,
             "data": data, "config": config, "metrics": metrics, "dense_pt_version": __version__}  # fmt: skip
    return _render(Path(folder), facts)


def add_metrics(folder: str | Path, metrics: dict[str, Any]) -> Path | None:
    """Add the stage's dev metrics to an existing card (None when the folder has none)."""
    folder = Path(folder)
    data = folder / CARD_DATA
    if not data.is_file():
        return None
    facts = json.loads(data.read_text(encoding="utf-8"))
    facts["metrics"] = metrics
    return _render(folder, facts)


def _render(folder: Path, facts: dict[str, Any]) -> Path:
    from dense_pt.fsutil import atomic_file, write_json_atomic

    library, task = KINDS[facts["kind"]]
    base = facts["base_model"]
    front = ["---", f"library_name: {library}", f"pipeline_tag: {task}"]
    if not is_local_model(base):  # the hub's base_model field takes hub ids only
        front.append(f"base_model: {json.dumps(base)}")
    front += ["tags:", "- dense-pt", "- dense-retrieval", f"- {facts['method']}", "---", ""]
    body = [
        f"# {facts['title']}",
        "",
        f"Written by [dense-pt](https://pypi.org/project/dense-pt/) {facts['dense_pt_version']}.",
        "",
        "## Method",
        "",
        f"`{facts['method']}`: {facts['paper']}.",
        "",
        "## Starting checkpoint",
        "",
        f"`{base}`",
        "",
        "## Data",
        "",
        *[f"- {k}: `{v}`" for k, v in facts["data"].items()],
        "",
    ]
    m = facts.get("metrics")
    if m:
        body += [f"## Dev metrics ({m.get('split', 'dev split')})", "", "| measure | value |", "|---|---:|"]
        body += [f"| {k} | {v:.4f} |" for k, v in m["values"].items()]
        if m.get("settings"):
            body += ["", "Evaluation: " + ", ".join(f"{k} {v}" for k, v in m["settings"].items()) + "."]
        body.append("")
    body += ["## Configuration", "", "```json", json.dumps(facts["config"], indent=2, default=str), "```", ""]
    write_json_atomic(folder / CARD_DATA, facts)
    with atomic_file(folder / "README.md", "w", encoding="utf-8") as f:
        f.write("\n".join(front + body))
    return folder / "README.md"
