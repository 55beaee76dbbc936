"""``dense-pt hub export``: a retriever folder made ready for the Hugging Face Hub, and uploaded.

The folder written (atomically: the old one or none if interrupted) holds the retriever's files as
fine-tuning wrote them — the weights and tokenizer, sentence-transformers' own configs
(``modules.json``, ``sentence_bert_config.json`` with the passage length and, for
sentence-transformers >= 6, the query length, ``1_Pooling/config.json``,
``config_sentence_transformers.json``), dense-pt's sidecar ``retriever.json`` — plus a model card
(``README.md``, the Hub's YAML front matter: ``library_name: sentence-transformers``,
``pipeline_tag: sentence-similarity``, the licence, tags) with the training recipe and the
evaluation tables the folder's records hold (its ``dense_pt_card.json``; ``dense-pt beir``
results given with ``--results``), and the licence's text (``LICENSE``).

``push_folder`` uploads it with ``huggingface_hub.upload_folder``; everything before that call
(the token, offline mode, the repository id) is checked here first, so a missing token is one line
and the prepared folder stays.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dense_pt import __version__, logs
from dense_pt.config.hub import DEFAULT_LICENSE, HubSettings
from dense_pt.errors import DensePtError, FormatError, already_exists, not_found
from dense_pt.model_card import is_local_model

CARD = "README.md"
CARD_DATA = "dense_pt_card.json"
LICENSE_NAMES = ("LICENSE", "LICENSE.txt", "LICENSE.md")
NOT_UPLOADED = (".dense-pt.json",)  # dense-pt's owner mark of a folder


@dataclass
class HubExport:
    """What ``export_hub`` wrote: the folder, the card's licence and where its text came from
    (None: no text found), and the repository's address once uploaded."""

    out: Path
    license: str
    license_file: str | None
    evaluation_rows: int
    url: str | None = None


def check_retriever(folder: Path) -> dict[str, Any]:
    """``folder`` as a sentence-transformers retriever folder: its pooling, normalisation and the
    two lengths (``retriever.json``, else sentence-transformers' files), or one line naming what
    is missing."""
    from dense_pt.retrieval.encode import check_model_folder, default_max_length
    from dense_pt.retrieval.encoder import detect_spec

    if not folder.exists():
        raise not_found(folder, "no such retriever folder")
    check_model_folder(folder)
    if not (folder / "modules.json").is_file():
        raise FormatError(
            "not a sentence-transformers folder (no modules.json): export a retriever's model folder, "
            "as `dense-pt train retriever` or `train distill` writes it (OUT/model)",
            folder,
        )
    if not any(folder.glob("*.safetensors")):
        raise FormatError("the folder has no weights (*.safetensors)", folder)
    spec = detect_spec(folder)
    return {"pooling": spec.pooling, "normalize": spec.normalize,
            "query_max_length": default_max_length(folder, "queries"),
            "passage_max_length": default_max_length(folder, "passages")}  # fmt: skip


def read_results(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The rows of ``dense-pt beir`` results (its ``--json`` document, or the ``results.json`` it
    keeps with ``--runs``): dataset, system, measures, queries."""
    rows: list[dict[str, Any]] = []
    for path in paths:
        if not path.is_file():
            raise not_found(path, "no such results file")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FormatError(f"invalid JSON ({exc})", path) from None
        found = doc.get("rows") if isinstance(doc, dict) else None
        keys = ("dataset", "system", "measures")
        if not isinstance(found, list) or not all(
            isinstance(r, dict) and all(k in r for k in keys) for r in found
        ):
            raise FormatError(
                "not dense-pt beir results (expected 'rows' of dataset, system, measures)", path
            )
        rows += found
    return rows


def export_hub(
    folder: str | Path,
    out: str | Path,
    settings: HubSettings | None = None,
    results: Sequence[str | Path] = (),
    *,
    force: bool = False,
) -> HubExport:
    """Write the Hub-ready copy of retriever ``folder`` to ``out`` (``force``: replace an existing
    ``out``), then upload it when ``settings.push_to_hub`` names a repository."""
    from dense_pt.artifacts.replace import atomic_dir

    s = HubSettings() if settings is None else settings
    folder, out = Path(folder), Path(out)
    if os.path.lexists(out) and not force:  # before any work (atomic_dir checks again at the end)
        raise already_exists(out, f"{out} already exists (use --force to replace it)")
    model = check_retriever(folder)
    facts = _card_facts(folder)
    rows = read_results([Path(p) for p in results])
    base = _local_base(facts)
    license = s.license or _base_license(base) or DEFAULT_LICENSE
    title = s.title or (s.push_to_hub or out.resolve().name).split("/")[-1]
    with atomic_dir(out, force) as tmp:
        shutil.copytree(folder, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns(CARD, *NOT_UPLOADED))
        license_file = _copy_license(tmp, license, [folder, *([base] if base else [])])
        card = render_card(title, s.push_to_hub, (license, license_file is not None), model, facts, rows)
        (tmp / CARD).write_text(card, encoding="utf-8")
    if license_file is None:
        logs.log.warning(
            f"hub export: no text of the {license} licence found; the card names it, add a LICENSE"
        )
    done = HubExport(out, license, license_file, len(rows))
    if s.push_to_hub is not None:
        done.url = push_folder(out, s.push_to_hub, s.private)
    return done


def _card_facts(folder: Path) -> dict[str, Any]:
    """What dense-pt recorded about the checkpoint (``model_card.write_model_card``), if anything."""
    path = folder / CARD_DATA
    if not path.is_file():
        return {}
    try:
        facts = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"invalid JSON ({exc})", path) from None
    return facts if isinstance(facts, dict) else {}


def _local_base(facts: dict[str, Any]) -> Path | None:
    """The base model's folder when it is on this machine (``pkg:`` and the local Hub cache
    resolved; nothing is downloaded)."""
    from dense_pt.finetune.checkpoints import resolve_checkpoint

    base = facts.get("base_model")
    if not isinstance(base, str):
        return None
    try:
        path = resolve_checkpoint(base, must_exist=False)
    except DensePtError:
        return None
    return path if path.is_dir() else None


def _base_license(base: Path | None) -> str | None:
    """The ``license:`` of the base model's card front matter, if it says one."""
    card = base / CARD if base is not None else None
    if card is None or not card.is_file():
        return None
    text = card.read_text(encoding="utf-8", errors="replace")
    front = text.split("---", 2)[1] if text.startswith("---") and text.count("---") >= 2 else ""
    found = re.search(r"^license:\s*['\"]?([\w.+-]+)", front, flags=re.M)
    return found.group(1).lower() if found else None


def _copy_license(out: Path, license: str, folders: list[Path]) -> str | None:
    """The licence's text into ``out/LICENSE``: the retriever's or its base model's own file, else,
    for dense-pt's licence, dense-pt's file. Where it came from, or None."""
    candidates = [f / name for f in folders for name in LICENSE_NAMES]
    if license == DEFAULT_LICENSE:
        candidates += dense_pt_license_files()
    for path in candidates:
        if path.is_file():
            shutil.copyfile(path, out / "LICENSE")
            return str(path)
    return None


def dense_pt_license_files() -> list[Path]:
    """Where dense-pt's own Apache-2.0 text may be: the installed distribution's files, then the
    source tree (a checkout)."""
    from importlib import metadata

    found: list[Path] = []
    try:
        files = metadata.distribution("dense-pt").files or []
        found += [Path(str(f.locate())) for f in files if f.name in LICENSE_NAMES]
    except metadata.PackageNotFoundError:
        pass
    return [*found, Path(__file__).resolve().parents[2] / "LICENSE"]


def render_card(
    title: str, repo: str | None, license: tuple[str, bool], model: dict[str, Any], facts: dict[str, Any],
    rows: list[dict[str, Any]],
) -> str:  # fmt: skip
    """The model card: the Hub's front matter, how to use it, the recipe, the evaluation.
    ``license``: its identifier, and whether its text is in the folder's ``LICENSE``."""
    method = facts.get("method")
    base = facts.get("base_model")
    front = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
             f"license: {license[0]}"]  # fmt: skip
    if isinstance(base, str) and not is_local_model(base):
        front.append(f"base_model: {json.dumps(base)}")
    tags = [
        "sentence-transformers",
        "sentence-similarity",
        "feature-extraction",
        "dense-retrieval",
        "dense-pt",
    ]
    front += ["tags:", *[f"- {t}" for t in tags + ([str(method)] if method else [])], "---", ""]
    body = [f"# {title}", "", f"A dense passage retriever written by [dense-pt](https://pypi.org/project/dense-pt/) "
            f"{facts.get('dense_pt_version', __version__)}.", ""]  # fmt: skip
    body += _usage(repo, model)
    body += _recipe(facts)
    body += _evaluation(facts, rows)
    body += [
        "## Licence",
        "",
        f"`{license[0]}`" + (" (the text is in `LICENSE`)." if license[1] else "."),
        "",
    ]
    return "\n".join(front + body)


def _usage(repo: str | None, model: dict[str, Any]) -> list[str]:
    q, p = model["query_max_length"], model["passage_max_length"]
    name = repo or "path/to/this/folder"
    fetch = [f"hf download {repo} --local-dir retriever"] if repo else []
    similarity = "cosine" if model["normalize"] else "dot product"
    return [
        "## Usage", "",
        f"Queries are read up to {q} tokens and passages up to {p} ([CLS] and [SEP] included), "
        f"{model['pooling']} pooling, {similarity} similarity.",
        "sentence-transformers 6 applies both lengths (`encode_query`, `encode_document`); older versions "
        f"truncate everything at the passage length ({p}).", "",
        "```python", "from sentence_transformers import SentenceTransformer", "",
        f'model = SentenceTransformer("{name}")',
        'queries = model.encode_query(["what causes the seasons?"])',
        'passages = model.encode_document(["The tilt of the Earth\'s axis ..."])',
        "print(model.similarity(queries, passages))", "```", "",
        "With dense-pt, which reads the lengths from `retriever.json` (a local folder):", "",
        "```bash", *fetch, f"dense-pt beir {'retriever' if repo else name} path/to/beir/scifact --bm25 --fuse",
        "```", "",
    ]  # fmt: skip


def _recipe(facts: dict[str, Any]) -> list[str]:
    if not facts:
        return ["## Training", "", "Not recorded (the folder has no dense_pt_card.json).", ""]
    out = ["## Training recipe", "", f"- method: `{facts.get('method')}` ({facts.get('paper')})",
           f"- starting checkpoint: `{facts.get('base_model')}`"]  # fmt: skip
    out += [f"- {k}: `{v}`" for k, v in (facts.get("data") or {}).items()]
    out += ["", "```json", json.dumps(facts.get("config") or {}, indent=2, default=str), "```", ""]
    return out


def _evaluation(facts: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    m = facts.get("metrics")
    if m:
        out += [f"## Dev metrics ({m.get('split', 'dev split')})", "", "| measure | value |", "|---|---:|"]
        out += [f"| {k} | {v:.4f} |" for k, v in m["values"].items()] + [""]
    if rows:
        names = list(dict.fromkeys(k for r in rows for k in r["measures"]))
        out += ["## Evaluation (`dense-pt beir`)", "", "| dataset | system | " + " | ".join(names) + " |",
                "|---|---|" + "---:|" * len(names)]  # fmt: skip
        for r in rows:
            values = [f"{r['measures'][n]:.4f}" if n in r["measures"] else "" for n in names]
            out.append(f"| {r['dataset']} | {r['system']} | " + " | ".join(values) + " |")
        out.append("")
    return out


def push_folder(out: Path, repo: str, private: bool = False) -> str:
    """Upload ``out`` to the Hub repository ``repo`` (created if missing) with
    ``huggingface_hub.upload_folder``; its address. Checked first, each as one line: huggingface_hub
    installed, a token (``hf auth login`` or $HF_TOKEN), not in offline mode."""
    from dense_pt._extras import require

    hub = require("huggingface_hub", "retrieval")
    token = hub.get_token()
    ready = f"the folder is ready at {out}"
    if not token:
        raise DensePtError(f"no Hugging Face token: log in with `hf auth login` or set HF_TOKEN ({ready})")
    if hub.constants.HF_HUB_OFFLINE:
        raise DensePtError(f"HF_HUB_OFFLINE is set: cannot upload to {repo} ({ready})")
    api = hub.HfApi(token=token)
    try:
        api.create_repo(repo, private=private, exist_ok=True, repo_type="model")
        api.upload_folder(repo_id=repo, folder_path=str(out), repo_type="model",
                          commit_message=f"dense-pt {__version__}: hub export", ignore_patterns=list(NOT_UPLOADED))  # fmt: skip
    except Exception as exc:  # the network library's own errors, as one line
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DensePtError(f"upload to {repo} failed: {first} ({ready})") from exc
    return f"https://huggingface.co/{repo}"
