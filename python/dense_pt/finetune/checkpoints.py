"""Where a fine-tuning stage starts from: a local model folder, a ``config.json`` (random init),
``pkg:PACKAGE/sub/path`` (a folder shipped inside an installed Python package), or a Hugging Face
hub name that is already in the local cache. Nothing is ever downloaded: a hub name that is not
cached is an error that says how to get it."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from dense_pt.errors import InvalidArgumentError


def _looks_like_hub_name(value: str) -> bool:
    parts = value.split("/")
    return (
        not value.startswith((".", "/", "~"))
        and len(parts) <= 2
        and all(p and p not in (".", "..") for p in parts)
        and not value.endswith(".json")
    )


def cached_hub_model(name: str) -> Path | None:
    """The local snapshot folder of hub model ``name``, or None when it is not cached."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:  # pragma: no cover - huggingface_hub comes with transformers
        return None
    try:
        return Path(snapshot_download(name, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), or not a valid repo id
        return None


def resolve_checkpoint(
    value: str, base: Path | None = None, what: str = "model", must_exist: bool = True
) -> Path:
    """``value`` as a local path: ``pkg:`` resolved, a relative path against ``base``, a hub name from
    the local cache. Raises ``InvalidArgumentError`` naming ``what`` when nothing is found (with
    ``must_exist=False`` a missing path is returned as it is, for a later stage to report)."""
    if value.startswith("pkg:"):
        pkg, _, sub = value[4:].partition("/")
        try:
            root = importlib.resources.files(pkg)
        except ModuleNotFoundError:
            raise InvalidArgumentError(f"{what} {value!r}: package {pkg!r} is not installed") from None
        return Path(str(root / sub))
    p = Path(value).expanduser()
    local = p if p.is_absolute() or base is None else base / p
    if local.exists():
        return local
    if _looks_like_hub_name(value):
        cached = cached_hub_model(value)
        if cached is not None:
            return cached
        if not must_exist:
            return local
        raise InvalidArgumentError(
            f"{what} {value!r} is neither a local path nor a model in the local Hugging Face cache "
            f"(nothing is downloaded at run time): fetch it first, e.g. `hf download {value}`"
        )
    if not must_exist:
        return local
    raise InvalidArgumentError(f"{what} {value!r}: {local} does not exist")
