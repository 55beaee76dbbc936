"""store: the corpus tokenized once with the model's tokenizer into a corpus store, which every
later stage reads passages from by row."""

from __future__ import annotations

from pathlib import Path

from dense_pt.errors import DensePtError
from dense_pt.pipeline import common as C
from dense_pt.pipeline.runner import Stage


def inputs(ctx: C.Ctx) -> dict:
    return {"corpus": ctx.file_hash(ctx.cfg.data.corpus), "model": C.init_fingerprint(ctx)}


def params(ctx: C.Ctx) -> dict:
    return {"max_length": ctx.cfg.data.max_length, "store_version": 2}


def run(ctx: C.Ctx, folder: Path) -> dict:
    from dense_pt.data import corpus_texts
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import load_tokenizer

    init = C.init_model(ctx)
    tok_file = init / "tokenizer.json" if init.is_dir() else None
    if not init.exists():
        raise DensePtError(
            f"[model] init {init} does not exist (a hub name is looked up in the local Hugging Face cache "
            "only: fetch it first, e.g. `hf download NAME`)"
        )
    if tok_file is None or not tok_file.exists():
        raise DensePtError(f"{init}: the pipeline needs a model folder with tokenizer.json")
    tok = load_tokenizer(tok_file)  # padding and truncation off (MiniLM's pads to 128)
    s = build_store_from_texts(folder / "store", corpus_texts(ctx.cfg.data.corpus), tok,
                               max_length=ctx.cfg.data.max_length, force=True)  # fmt: skip
    return {"rows": len(s)}


STAGE = Stage(
    name="store",
    doc="tokenize the corpus once into a corpus store",
    reads=(),
    config=("data", "model"),
    outputs=("store",),
    inputs=inputs,
    params=params,
    run=run,
)
