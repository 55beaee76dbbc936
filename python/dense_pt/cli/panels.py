"""The help panels of the generated options: where each setting is listed in a long ``--help``.

One table, ``PANELS``: for each settings model, the panel its fields go to and the fields of it that
go elsewhere. A field is placed by the model that declares it (``BeirSettings`` inherits its
encoding options from ``EncodeOptions``: they are listed under "Encoding"), so a new field lands in
its model's panel without an entry here. A command with few options keeps one box
(``PANELLED_FROM``): panels help a person scan 60 options, not 8.
"""

from __future__ import annotations

import inspect

from dense_pt.config.base import Model
from dense_pt.config.beir import BeirSettings
from dense_pt.config.evaluation import EvalMeasures
from dense_pt.config.expand import ExpandSettings, SamplingSettings
from dense_pt.config.finetune import (
    DistillSettings,
    RerankerSettings,
    RetrieverCommand,
    RetrieverSettings,
)
from dense_pt.config.fusion import FusionMethod
from dense_pt.config.options import MaskOptions, MethodOptions
from dense_pt.config.pretrain import PretrainSettings
from dense_pt.config.retrieval import BM25Settings, EncodeOptions, MineSettings, SearchSettings
from dense_pt.config.train import STEP_SWITCHES, TrainConfig

PANELLED_FROM = 21  # options (hand-written ones included); fewer: one "Options" box

OBJECTIVE, MODEL, DATA, OUTPUT = "Objective", "Model", "Data", "Output"
OPTIMISATION, GPU, LOADING = "Optimisation", "GPU switches", "Data loading"
REFRESH, MINING = "ANCE refresh", "Mining: candidates"
LENGTHS = {"query_max_length": DATA, "passage_max_length": DATA, "max_length": DATA, "epochs": OPTIMISATION}

# model -> (the panel of its fields, {field: another panel})
PANELS: dict[type[Model], tuple[str, dict[str, str]]] = {
    PretrainSettings: (
        OPTIMISATION,  # curriculum and stages
        {
            "method": OBJECTIVE,
            "paper": OBJECTIVE,
            "model": MODEL,
            "corpus": DATA,
            "queries": DATA,
            "out": OUTPUT,
            "max_length": DATA,
            "pad_to_multiple_of": DATA,
            "max_query_tokens": DATA,
        },
    ),
    MaskOptions: ("Masking", {}),
    MethodOptions: (OBJECTIVE, {}),
    TrainConfig: (
        OPTIMISATION,
        {
            **dict.fromkeys(STEP_SWITCHES, GPU),
            "precision": GPU,
            "find_unused_parameters": GPU,
            "num_workers": LOADING,
            "prefetch_factor": LOADING,
            "threads": LOADING,
            "save_every": OUTPUT,
            "keep_checkpoints": OUTPUT,
            "log_every": OUTPUT,
            "report_to": OUTPUT,
        },
    ),
    RetrieverSettings: (OBJECTIVE, {**LENGTHS, "refresh_every": REFRESH}),
    RetrieverCommand: (REFRESH, {"pooling": MODEL}),
    RerankerSettings: (OBJECTIVE, LENGTHS),
    DistillSettings: (OBJECTIVE, LENGTHS),
    MineSettings: (MINING, dict.fromkeys(MineSettings.FILTERS, "Mining: filters")),
    EncodeOptions: ("Encoding", {}),
    SearchSettings: ("Search", {}),
    BM25Settings: ("BM25", {}),
    FusionMethod: ("Fusion", {}),
    EvalMeasures: ("Evaluation", {}),
    BeirSettings: (
        "Retrieval",
        {
            "measures": "Evaluation",
            "split": DATA,
            "query_max_length": "Encoding",
            "passage_max_length": "Encoding",
        },
    ),
    SamplingSettings: ("Generation", {}),
    ExpandSettings: (
        "Generation",
        {
            "limit": DATA,
            "sample": DATA,
            "max_passage_words": DATA,
            "batch_size": "Devices",
            "shard_size": OUTPUT,
            "device": "Devices",
            "dtype": "Devices",
            "endpoint": "Endpoint",
            "timeout": "Endpoint",
            "retries": "Endpoint",
        },
    ),
}


def panel(model: type[Model], name: str) -> str | None:
    """The panel of ``model``'s field ``name``: its declaring model's entry (a model without one: the
    plain "Options" box, None)."""
    owner = next((c for c in model.__mro__ if name in inspect.get_annotations(c)), model)
    for cls in owner.__mro__:  # a model without an entry: its nearest base's
        if cls in PANELS:
            default, fields = PANELS[cls]
            return fields.get(name, default)
    return None
