"""LLM document expansion: pseudo-queries for passages (`dense-pt expand`).

Pipeline: passages (:mod:`.corpus`) -> selection (:mod:`.select`) -> prompt (:mod:`.prompts`) ->
LLM (:mod:`.generate`) -> parsed queries (:mod:`.parse`) -> Parquet shards (:mod:`.writer`).
Nothing here imports torch at module level.
"""

from dense_pt.expansion.generate import (
    EndpointGenerator,
    HFGenerator,
    QueryGenerator,
    SamplingParams,
    open_generator,
)
from dense_pt.expansion.parse import is_copy, parse_queries
from dense_pt.expansion.pipeline import ExpandResult, expand
from dense_pt.expansion.prompts import Prompt, load_prompt
from dense_pt.expansion.select import in_sample, passage_seed
from dense_pt.expansion.writer import (
    load_pseudo_queries,
    load_queries,
    open_queries,
    read_queries_table,
)

__all__ = [
    "EndpointGenerator",
    "ExpandResult",
    "HFGenerator",
    "Prompt",
    "QueryGenerator",
    "SamplingParams",
    "expand",
    "in_sample",
    "is_copy",
    "load_prompt",
    "load_pseudo_queries",
    "load_queries",
    "open_generator",
    "open_queries",
    "parse_queries",
    "passage_seed",
    "read_queries_table",
]
