"""Import optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from dense_pt.errors import MissingExtraError


def require(module: str, extra: str = "train") -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised in the no-torch wheel test
        raise MissingExtraError(module, extra) from exc
