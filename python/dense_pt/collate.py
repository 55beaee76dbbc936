"""The batch collator: corpus-store rows in, a ready pre-training batch (numpy) out, in one native
call per batch. Use it as a PyTorch ``collate_fn`` over a dataset of row indices::

    store = CorpusStore.open("corpus/")
    collator = Collator(store, "cdmae", max_length=144, seed=0)
    loader = DataLoader(range(len(store)), batch_size=128, shuffle=True, collate_fn=collator,
                        num_workers=4)
    for epoch in range(epochs):
        collator.set_epoch(epoch)  # or pass epoch= to collator(rows, epoch=...)
        for batch in loader:
            batch = {k: torch.from_numpy(v) for k, v in batch.items()}

It needs neither torch nor a thread pool: each call is single-threaded (the DataLoader workers are
the parallelism) and safe in forked workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dense_pt import _native
from dense_pt.config.choices import COLLATOR_METHODS
from dense_pt.config.collate import CollatorSettings
from dense_pt.config.options import MaskOptions
from dense_pt.errors import InvalidArgumentError

# The methods whose batches the collator makes (``config.choices.COLLATOR_METHODS``, where the
# command line reads them without importing numpy). Each one's batch (its views and how each is
# masked, filled and labelled) is the core's ``Method::shape`` (rust/core/src/collate/method.rs);
# the numbers (rates, lengths, whole words, crop, the generator's fill) are the paper's, declared
# once in ``dense_pt.config.defaults.objectives`` and read by ``paper_settings``. For simlm /
# enc-dec-rtd the two views are the generator's inputs (filled as ``generator_fill``), and
# ``original_ids`` comes with the batch: the device samples the replacements (SimLM eq. 1).
METHODS = COLLATOR_METHODS


def paper_settings(method: str, paper: str | None = None) -> dict[str, Any]:
    """The collator settings ``method`` takes from its paper (``dense_pt.config.defaults.objectives``),
    under their own names: the objective's options the collator shares, and ``max_length``."""
    from dense_pt.config.defaults.objectives import profile

    _check_method(method)
    prof = profile(method, paper)
    shared = {k: v for k, v in prof.values("options").items() if k in MaskOptions.model_fields}
    return {"max_length": prof.top["max_length"].value, **shared}


class Collator:
    """Collate corpus-store rows into a pre-training batch for ``method`` (one of ``METHODS``).

    ``collator(rows, epoch=None) -> dict[str, np.ndarray]``; ``rows`` are corpus row indices.

    Batch contract (all numpy; ids and labels int64 so ``torch.from_numpy`` feeds embeddings and
    cross-entropy directly; masks bool; ``B`` rows, ``L`` = longest row + 2, or ``max_length`` with
    ``pad_to="max_length"``, rounded up to ``pad_to_multiple_of``):

    - ``input_ids`` [B, L]: the encoder input: ``[CLS] content [SEP] [PAD]...``; after masking and
      replacement for MLM views; for ``simlm`` / ``enc-dec-rtd`` the generator's input for the
      encoder's view (``enc_mask`` filled as ``generator_fill`` says, all [MASK] by default): the
      device samples the replacements.
    - ``attention_mask`` [B, L] int64; ``special_tokens_mask`` [B, L] bool ([CLS], [SEP]).
    - ``labels`` [B, L] int64: the original id where the encoder predicts, -100 elsewhere
      (masked positions; every content position for ``simlm``; none for ``autoencoder``).
    - ``enc_mask`` [B, L] bool: the encoder's masked positions (every method but ``autoencoder``).
    - ``dec_input_ids``, ``dec_labels`` [B, L]: the decoder view, where there is one:
      ``cdmae``: its own ``importance_mask`` (``p_dec``, ``sigma``, the store's importance column) with
      80/10/10 (``dec_fill="mask"`` for all-[MASK]), labels where masked; ``enc-dec-mlm``: nested
      masks 0.3/0.5, 80/10/10 on each view; ``simlm``/``enc-dec-rtd``: the generator's input for
      the decoder's view (``dec_mask`` filled, independently of the encoder's view; labels at every
      content position for simlm, at ``dec_mask`` for rtd); ``seed``: the clean input,
      labels at every content position; ``autoencoder``: every content position [MASK] ([CLS] and
      [SEP] kept), labels at every content position.
    - ``dec_mask`` [B, L] bool: the decoder's masked positions (cdmae, simlm, enc-dec-*); for the
      nested methods ``enc_mask`` is a subset of ``dec_mask``.
    - ``original_ids`` [B, L] int64 (``simlm``, ``enc-dec-rtd``, or ``return_original=True``): the
      clean, cropped input.
    - ``span_input_ids``, ``span_attention_mask`` [B * num_spans, Ls] (``contrastive``): random
      spans of each (uncropped) passage as [CLS] span [SEP]; span j of row b is row b*num_spans+j.

    The settings are the fields of ``dense_pt.config.collate.CollatorSettings`` (each default and
    range written there; a bad or unknown one is a ``ConfigError`` naming it), given as a model
    (``settings``: a ``CollatorSettings``, or the objective's ``MethodOptions``, whose masking
    fields are the collator's under the same names) and/or as keywords over it. A setting left
    ``None`` takes the method's paper default (``paper_settings(method, paper)``, declared in
    ``dense_pt.config.defaults.objectives``: ``max_length``, the rates, whole words, crop, the
    generator's fill); every setting can be overridden: ``p_enc``, ``p_dec``, ``sigma``
    (importance noise), ``enc_fill``/``dec_fill`` ("bert", "mask", "keep"; over the method's and
    ``generator_fill``), ``mask_prob``/``random_prob`` (the 80/10 of "bert"), ``whole_word`` (mask
    whole words using the store's ``word_ids``), ``crop`` ("random" window or "head"), ``pad_to``,
    ``pad_to_multiple_of``, ``importance_column``, ``num_spans``, ``span_min_len``,
    ``span_max_len``; ``paper`` picks another paper's defaults (``condenser``: "simlm").
    The old keyword names of ``p_enc`` and ``p_dec`` are still accepted, deprecated
    (``config.collate.RENAMED``).

    Randomness: row ``r`` of epoch ``e`` depends only on (seed, e, r) and its content, never on the
    rest of the batch; each view equals the standalone masker in ``dense_pt.masking`` called with
    ``seed=Collator.view_seed(seed, e, view)`` and ``row_keys=rows``.
    """

    def __init__(
        self,
        store,
        method: str = "mlm",
        settings: MaskOptions | None = None,
        **overrides: Any,
    ) -> None:
        self.method = method
        self.settings = resolve_settings(method, settings, overrides)
        self._store_path: Path | None = None
        self._setup(self._arrays_from_store(store))

    # ---- construction ------------------------------------------------------------------------
    @classmethod
    def from_arrays(
        cls,
        values: np.ndarray,
        offsets: np.ndarray,
        *,
        vocab_size: int,
        special_tokens: Mapping[str, int],
        importance: np.ndarray | None = None,
        word_ids: np.ndarray | None = None,
        method: str = "mlm",
        settings: MaskOptions | None = None,
        **overrides: Any,
    ) -> Collator:
        """A collator over raw ragged arrays (the layout of ``CorpusStore.ragged``):
        ``special_tokens`` maps cls/sep/pad/mask (and optionally unk) to ids."""
        self = cls.__new__(cls)
        self.method = method
        self.settings = resolve_settings(method, settings, overrides)
        if self.settings.whole_word and word_ids is None:
            raise InvalidArgumentError(
                f"{method} masks whole words (its paper's default): pass word_ids=, or whole_word=False"
            )
        self._store_path = None
        self._setup(
            {
                "values": values,
                "offsets": offsets,
                "importance": importance,
                "word_ids": word_ids,
                "vocab_size": int(vocab_size),
                "special_tokens": dict(special_tokens),
            }
        )
        return self

    def _arrays_from_store(self, store) -> dict:
        """The store's columns the settings' views read (importance and word ids only if used)."""
        from dense_pt.data.store import CorpusStore

        if isinstance(store, str | Path):
            store = CorpusStore.open(store)
        self._store_path = Path(store.path)
        values, offsets = store.ragged("input_ids")
        special_tokens = dict(store.special_tokens)
        native = self._native_collator(store.vocab_size, special_tokens)
        column = self.settings.importance_column
        importance = None
        if native.needs_importance:
            if not store.has_column(column):
                raise InvalidArgumentError(
                    f"method {self.method!r} masks by importance but the store {store.path} has no "
                    f"{column!r} column (columns: {store.column_names}); compute it with "
                    "`dense-pt pmi` first"
                )
            importance = store.ragged(column)[0]
        word_ids = store.ragged("word_ids")[0] if native.needs_word_ids else None
        return {
            "values": values,
            "offsets": offsets,
            "importance": importance,
            "word_ids": word_ids,
            "vocab_size": store.vocab_size,
            "special_tokens": special_tokens,
        }

    def _native_collator(self, vocab_size: int, special_tokens: Mapping[str, int]) -> Any:
        """The core's collator of ``self.method``: it reads each setting by its field name."""
        missing = [r for r in ("cls", "sep", "pad", "mask") if r not in special_tokens]
        if missing:
            raise InvalidArgumentError(f"special_tokens lacks {missing}")
        return _native.Collator(
            self.method, self.settings, vocab_size=int(vocab_size), special_tokens=special_tokens
        )

    def _setup(self, arrays: dict) -> None:
        self.vocab_size = int(arrays["vocab_size"])
        self.special_tokens = {k: int(v) for k, v in arrays["special_tokens"].items()}
        self._native = self._native_collator(self.vocab_size, self.special_tokens)
        self.max_length = int(self.settings.max_length)  # type: ignore[arg-type]  # resolved: the paper's
        self.seed = self.settings.seed
        self.epoch = 0
        self._values = np.ascontiguousarray(arrays["values"])
        self._offsets = np.ascontiguousarray(arrays["offsets"], dtype=np.int64)
        imp = arrays["importance"]
        if imp is not None:
            imp = np.ascontiguousarray(imp)
            if imp.dtype == np.float16:
                imp = imp.view(np.uint16)
        self._importance = imp
        self._word_ids = None if arrays["word_ids"] is None else np.ascontiguousarray(arrays["word_ids"])
        self._arrays_meta = {k: arrays[k] for k in ("vocab_size", "special_tokens")}

    # ---- use ---------------------------------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Draw the crops and masks of another epoch (DataLoader workers see it at their next
        iterator, as with ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)

    @staticmethod
    def view_seed(seed: int, epoch: int, view: int) -> int:
        """The seed of a view (1 enc, 2 dec, 3 nested, 4 crop, 5 span) in an epoch."""
        return _native.Collator.view_seed(seed, epoch, view)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __call__(self, rows: Sequence[int] | np.ndarray, epoch: int | None = None) -> dict[str, np.ndarray]:
        rows_arr = np.asarray(rows)
        if rows_arr.ndim != 1:
            raise InvalidArgumentError(
                f"rows must be a 1-d sequence of row indices, got shape {rows_arr.shape}"
            )
        if rows_arr.size and rows_arr.dtype.kind not in "iu":
            raise InvalidArgumentError(f"rows must be integers, got dtype {rows_arr.dtype}")
        return self._native.collate(
            self._values,
            self._offsets,
            np.ascontiguousarray(rows_arr, dtype=np.int64),
            int(self.epoch if epoch is None else epoch),
            importance=self._importance,
            word_ids=self._word_ids,
        )

    # ---- pickling (spawned DataLoader workers) -------------------------------------------------
    def __getstate__(self) -> dict:
        state = {"method": self.method, "settings": self.settings, "epoch": self.epoch,
                 "store_path": self._store_path}  # fmt: skip
        if self._store_path is None:
            imp = self._importance
            state["arrays"] = {
                "values": self._values,
                "offsets": self._offsets,
                "importance": imp.view(np.float16) if imp is not None and imp.dtype == np.uint16 else imp,
                "word_ids": self._word_ids,
                **self._arrays_meta,
            }
        return state

    def __setstate__(self, state: dict) -> None:
        self.method, self.settings = state["method"], state["settings"]
        self._store_path = state["store_path"]
        if self._store_path is not None:
            arrays = self._arrays_from_store(self._store_path)
        else:
            arrays = state["arrays"]
        self._setup(arrays)
        self.epoch = state["epoch"]


def resolve_settings(
    method: str, settings: MaskOptions | None = None, overrides: Mapping[str, Any] | None = None
) -> CollatorSettings:
    """``settings`` (a ``CollatorSettings``, or ``MethodOptions``: the masking fields, by name) with
    ``overrides`` over it, each setting left ``None`` taken from the method's paper."""
    _check_method(method)
    if settings is not None and not isinstance(settings, MaskOptions):
        raise InvalidArgumentError(
            f"settings must be a CollatorSettings or MethodOptions, got {type(settings).__name__} "
            "(give max_length= and the others by name)"
        )
    own = CollatorSettings.model_fields
    given = {} if settings is None else settings.model_dump(exclude_none=True, include=set(own))
    merged = CollatorSettings(**{**given, **(overrides or {})})
    paper = paper_settings(method, merged.paper)
    return merged.model_copy(update={k: v for k, v in paper.items() if getattr(merged, k) is None})


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise InvalidArgumentError(f"unknown method {method!r}; expected one of {list(METHODS)}")
    return method


def preview(
    store, method: str = "cdmae", rows: Sequence[int] = (0,), epoch: int = 0, **settings: Any
) -> list[dict]:
    """What the collator makes of some rows, as tokens: one dict per row with the passage id and,
    per view, the token strings (``[MASK]`` visible; a predicted position shows ``token→label``).
    For people checking a method's masking by eye (``dense-pt mask preview``)."""
    from dense_pt.data.store import CorpusStore

    if isinstance(store, str | Path):
        store = CorpusStore.open(store)
    collator = Collator(store, method, **settings)
    batch = collator(list(rows), epoch=epoch)
    tok = store.tokenizer()
    ids_col = store.ids
    pad = store.special_tokens["pad"]

    def render(ids: np.ndarray, labels: np.ndarray | None, att: np.ndarray) -> str:
        out = []
        for j in range(len(ids)):
            if not att[j]:
                continue
            t = tok.id_to_token(int(ids[j])) or f"<{int(ids[j])}>"
            if labels is not None and labels[j] != -100:
                t = f"{t}→{tok.id_to_token(int(labels[j]))}" if labels[j] != ids[j] else f"{t}✓"
            out.append(t)
        return " ".join(out)

    result = []
    for b, r in enumerate(rows):
        att = batch["attention_mask"][b]
        views: dict[str, str | list[int] | list[str]] = {
            "encoder": render(batch["input_ids"][b], batch["labels"][b], att)
        }
        if "dec_input_ids" in batch:
            views["decoder"] = render(batch["dec_input_ids"][b], batch["dec_labels"][b], att)
        for name in ("enc_mask", "dec_mask"):
            if name in batch:
                views[name] = [int(j) for j in np.flatnonzero(batch[name][b])]
        if "span_input_ids" in batch:
            n = batch["span_input_ids"].shape[0] // len(rows)
            views["spans"] = [render(s, None, s != pad) for s in batch["span_input_ids"][b * n : (b + 1) * n]]
        result.append({"row": int(r), "id": ids_col[int(r)].as_py(), **views})
    return result


__all__ = ["METHODS", "Collator", "paper_settings", "preview", "resolve_settings"]
