"""The configuration models: one pydantic model per stage, the single place of every default and
every check. TOML files, ``--set`` overrides, the commands' options (``dense_pt.cli.options``) and the Python
functions are all validated by them; an error names the file and the dotted key.

- ``base``: the ``Model`` base (unknown keys refused, strict types) and ``ConfigError``, with the
  one formatter of pydantic's errors;
- ``toml``: reading a file, ``--set dotted.key=VALUE`` overrides;
- ``train``: ``TrainConfig``, the optimiser and schedule of every training stage;
- ``options``: ``MethodOptions``, the pre-training objectives' knobs;
- ``pretrain``: ``PretrainSettings``, a pre-training file / ``dense-pt pretrain``;
- ``pipeline``: the pipeline file and its tables, the ``cpu`` / ``paper`` profiles;
- ``finetune``: ``train retriever / reranker / distill`` (shared with the pipeline's stage tables);
- ``retrieval``: ``negatives mine`` (shared with ``[mine]``), ``encode``, ``search``, ``bm25``;
- ``shard``: ``"I/N"``, the slice of ``pmi build --shard`` and ``bm25 --query-shard``;
- ``pmi``: ``pmi build`` and ``[pretrain.pmi]``; ``corpus``: ``corpus build``; ``expand``: ``expand``;
- ``defaults``: the papers' numbers, each with its source: ``defaults.finetune`` (SimLM Table 13)
  and ``defaults.objectives`` (pre-training, per method and paper);
- ``choices``: the names the models check values against (methods, losses and their default tau,
  mining pools, fusion methods, tie-breaks).

A leaf: it imports only ``dense_pt.errors`` and itself, and no torch; the modules that implement
the choices import them from here."""

from dense_pt.config.base import ConfigError, Model, config_error
from dense_pt.config.options import MethodOptions
from dense_pt.config.pretrain import PretrainSettings
from dense_pt.config.toml import apply_overrides, read_toml
from dense_pt.config.train import TrainConfig, TrainTable

__all__ = [
    "ConfigError",
    "MethodOptions",
    "Model",
    "PretrainSettings",
    "TrainConfig",
    "TrainTable",
    "apply_overrides",
    "config_error",
    "read_toml",
]
