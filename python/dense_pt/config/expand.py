"""``dense-pt expand``: LLM pseudo-queries per passage. ``SamplingSettings`` holds the paper's
nucleus sampling (``dense_pt.expansion.SamplingParams`` reads its defaults and checks through it);
``ExpandSettings`` the rest of the command: ``dense_pt.expansion.expand`` takes it whole."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from dense_pt.config.base import Model

# Nucleus sampling as in the paper: temperature 0.7, top_p 0.95, top_k 50.
TEMPERATURE = 0.7
TOP_P = 0.95
TOP_K = 50
MAX_NEW_TOKENS = 256
NUM_QUERIES = 10
BATCH_SIZE = 8
SHARD_SIZE = 256
MAX_PASSAGE_WORDS = 256
TIMEOUT = 120.0
RETRIES = 4
Chat = Literal["auto", "on", "off"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]


class SamplingSettings(Model):
    """How each passage's queries are sampled."""

    max_new_tokens: int = Field(MAX_NEW_TOKENS, ge=1, description="Tokens generated per passage at most.")
    temperature: float = Field(TEMPERATURE, gt=0, description="Sampling temperature.")
    top_p: float = Field(
        TOP_P, gt=0, le=1, description="Nucleus sampling: the smallest set of tokens with this mass."
    )
    top_k: int = Field(TOP_K, ge=0, description="0 disables top-k.")


class ExpandSettings(SamplingSettings):
    """``dense-pt expand``'s settings (the model, corpus and output folder are its arguments)."""

    num_queries: int = Field(NUM_QUERIES, ge=1, description="Queries asked for and kept per passage.")
    prompt: str = Field("alpaca", description="alpaca | tk-instruct | a template FILE ({passage}, ...).")
    limit: int | None = Field(None, ge=0, description="Only the first N passages.")
    sample: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Only a deterministic FRACTION of passages, chosen from (seed, passage id).",
    )
    seed: int = Field(0, description="Seed of the sample and of sampling.")
    batch_size: int = Field(
        BATCH_SIZE, ge=1, description="Prompts per generate() call (requests in flight with --endpoint)."
    )
    shard_size: int = Field(
        SHARD_SIZE, ge=1, description="Passages per Parquet shard (the unit of resumption)."
    )
    max_passage_words: int = Field(
        MAX_PASSAGE_WORDS, ge=1, description="Passages are cut to this many words in the prompt."
    )
    chat: Chat = Field(
        "auto",
        description="auto | on | off: wrap the prompt in the model's chat template (auto: when it has one; "
        "with --endpoint: on = /chat/completions).",
    )
    endpoint: str | None = Field(
        None,
        description="OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (API key from $DENSE_PT_API_KEY).",
    )
    timeout: float = Field(TIMEOUT, gt=0, description="Seconds per HTTP request (--endpoint).")
    retries: int = Field(
        RETRIES, ge=0, description="Retries per HTTP request on network errors, 429 and 5xx."
    )
    device: str | None = Field(None, description="cpu, cuda, cuda:1 ... (default: cuda when available).")
    dtype: Dtype = Field("auto", description="auto | float32 | bfloat16 | float16.")

    @model_validator(mode="before")
    @classmethod
    def one_selection(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("limit") is not None and data.get("sample") is not None:
            raise ValueError("limit and sample are exclusive: give one of them")
        return data
