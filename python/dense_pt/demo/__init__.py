"""`dense-pt demo`: the whole pipeline on a generated, fictional corpus with tiny models.

- :mod:`.corpus` + :mod:`.vocab`: the demo corpus (written by code, no data files, labelled DEMO DATA);
- :mod:`.tiny`: the tiny models (the BERT config pre-training starts from, random LMs);
- :mod:`.context`: ``DemoContext``, what the stages share;
- :mod:`.stages`: data, tokenizer, store, pmi, pretrain, finetune (``STAGES``), with the work of the
  last three in :mod:`.pmi`, :mod:`.pretrain`, :mod:`.finetune`; :mod:`.expansion`: the
  ``--with-expansion`` stages;
- :mod:`.run`: ``run_demo`` runs the stages, names each as it starts and times it.

Nothing else in dense_pt imports this package (it sits on top, beside the CLI).
"""

from dense_pt.demo.context import DEMO_SEED, DEMO_VOCAB_SIZE, DemoContext, Stage
from dense_pt.demo.corpus import DEMO_LABEL, SPLITS, DemoData, generate_demo, write_demo_beir
from dense_pt.demo.run import print_report, run_demo
from dense_pt.demo.stages import (
    STAGES,
    stage_data,
    stage_finetune,
    stage_pmi,
    stage_pretrain,
    stage_store,
    stage_tokenizer,
)

__all__ = [
    "DEMO_LABEL",
    "DEMO_SEED",
    "DEMO_VOCAB_SIZE",
    "SPLITS",
    "STAGES",
    "DemoContext",
    "DemoData",
    "Stage",
    "generate_demo",
    "print_report",
    "run_demo",
    "stage_data",
    "stage_finetune",
    "stage_pmi",
    "stage_pretrain",
    "stage_store",
    "stage_tokenizer",
    "write_demo_beir",
]
