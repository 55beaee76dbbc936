"""``dense-pt corpus build``: how a corpus is tokenized into a store
(``dense_pt.data.build.build_corpus_store`` checks its settings through the same model)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from dense_pt.config.base import Model

CorpusFormat = Literal["jsonl", "tsv", "parquet", "arrow"]
TITLE_SEP = " "  # between a passage's title and its text
BATCH_SIZE = 2048  # passages per encode_batch call
MAX_RECORD_HELP = (
    "Largest record (a line, or a Parquet/Arrow row) to accept, in MB; longer ones are an error "
    "naming the line (default 64, or $DENSE_PT_MAX_RECORD_BYTES)."
)


class CorpusSettings(Model):
    """``dense-pt corpus build``'s settings (the paths and ``--force`` are the command's own)."""

    max_length: int | None = Field(
        None,
        ge=0,
        description="Sequence length incl. [CLS]/[SEP]; longer passages are truncated to max_length-2 tokens. "
        "Default: the model's or tokenizer's limit when known (tokenizer_config.json, config.json), else "
        "none; 0 keeps whole passages.",
    )
    format: CorpusFormat | None = Field(None, description="jsonl | tsv | parquet | arrow (default: detect).")
    title_sep: str = Field(TITLE_SEP, description="Separator between title and text when both are present.")
    threads: int | None = Field(None, ge=1, description="Tokenizer threads (default: all cores).")
    batch_size: int = Field(BATCH_SIZE, ge=1, description="Passages per encode_batch call.")
    allow_empty: bool = Field(False, description="Build a store even when the corpus has no passages.")
    max_record_mb: float | None = Field(None, gt=0, description=MAX_RECORD_HELP)
