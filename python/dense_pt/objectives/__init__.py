"""Pre-training objectives, one module per method.

This package's top level needs no torch: the options (``MethodOptions``, ``resolve_options``), the
declared per-paper defaults (``dense_pt.config.defaults.objectives``) and the batch keys are read by the
collator of the base install too. The objective classes live in their own modules (torch);
``build_objective`` imports them when called (``dense_pt.objectives.registry``).
"""

from __future__ import annotations

from dense_pt.config.defaults.objectives import DEFAULT_PAPER, PROFILES, describe_method, profile
from dense_pt.objectives.options import (
    METHOD_KEYS,
    METHODS,
    MethodOptions,
    SpecialIds,
    check_method,
    resolve_options,
    resolve_pooling,
    uses_generator,
)


def build_objective(method: str, encoder, special: SpecialIds, opts: MethodOptions):
    """Assemble the objective around ``encoder`` (options already resolved); see ``registry``."""
    from dense_pt.objectives.registry import build_objective as build

    return build(method, encoder, special, opts)


describe = describe_method  # the old name (expansion's describe_generator describes an LLM backend)


__all__ = [
    "DEFAULT_PAPER",
    "METHODS",
    "METHOD_KEYS",
    "PROFILES",
    "MethodOptions",
    "SpecialIds",
    "build_objective",
    "check_method",
    "describe_method",
    "profile",
    "resolve_options",
    "resolve_pooling",
    "uses_generator",
]
