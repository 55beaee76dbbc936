"""``dense-pt beir`` (``dense_pt.beir.evaluate_beir``): one model evaluated on BEIR
folders in one go. Its settings are those of the commands it chains, by the same names and with
the same defaults and checks (``encode``'s, ``search``'s, ``bm25``'s, ``fuse``'s method and
``evaluate``'s measures), plus the split, one length per side and which rows to add."""

from __future__ import annotations

from pydantic import Field, model_validator

from dense_pt.config.choices import FUSION_METHODS, one_of
from dense_pt.config.evaluation import BEIR_MEASURES, EvalMeasures
from dense_pt.config.fusion import FusionMethod
from dense_pt.config.retrieval import BM25Settings, EncodeOptions, SearchSettings

BEIR_FUSION = "rrf"  # a BEIR folder has no training queries to tune an interpolation weight on


class BeirSettings(EncodeOptions, SearchSettings, BM25Settings, FusionMethod, EvalMeasures):
    """Encode each folder's corpus and the queries judged in its split, search, evaluate; ``k`` is
    the depth of every run (dense, BM25, fused)."""

    split: str | None = Field(
        None,
        description="The qrels/<split>.tsv to evaluate on (default: test if the folder has it, else its only split).",
    )
    query_max_length: int | None = Field(
        None,
        ge=3,
        description="Query tokens, [CLS] and [SEP] included (default: the model's, from its retriever.json, "
        "else its sentence-transformers max_seq_length, else SimLM's).",
    )
    passage_max_length: int | None = Field(
        None, ge=3, description="Passage tokens, [CLS] and [SEP] included (default: the model's, as queries)."
    )
    bm25: bool = Field(
        False, description="Add a BM25 row (dense-pt bm25's Lucene variant, the settings below)."
    )
    fuse: bool = Field(
        False, description="Add the hybrid row: BM25 fused with the dense run (implies --bm25; see --method)."
    )
    method: str = Field(
        BEIR_FUSION,
        json_schema_extra=one_of(FUSION_METHODS),
        description="--fuse: 'rrf' (reciprocal rank fusion, k = --rrf-k) or 'interpolation' (needs --weight).",
    )
    weight: float | None = Field(
        None, ge=0, le=1, description="--fuse interpolation: the dense run's weight in [0, 1]."
    )
    measures: list[str] = Field(
        default_factory=lambda: list(BEIR_MEASURES),
        description="ir-measures names, repeatable or comma-separated: -m nDCG@10,RR@10 -m R@100.",
    )
    drop_self_hits: bool = Field(
        False,
        description="Drop hits whose docid equals the query id (BEIR's habit; off as in dense-pt evaluate).",
    )

    @model_validator(mode="after")
    def check_fusion(self) -> BeirSettings:
        if self.method == "interpolation" and self.fuse and self.weight is None:
            raise ValueError(
                "fuse with method interpolation needs a weight (no training queries to tune it on)"
            )
        if self.weight is not None and self.method != "interpolation":
            raise ValueError("weight is for method interpolation, not rrf")
        return self
