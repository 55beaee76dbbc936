"""Import optional dependencies with an error that names the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from dense_pt.errors import MissingExtraError, is_out_of_memory


def require(module: str, extra: str = "train") -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - exercised in the no-torch wheel test
        if is_out_of_memory(exc):  # installed, but its libraries could not be mapped: not missing
            raise
        raise MissingExtraError(module, extra) from exc
