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
from dense_pt.config.collate import CollatorSettings
from dense_pt.errors import InvalidArgumentError

METHODS = (
    "mlm",
    "cdmae",
    "simlm",
    "enc-dec-mlm",
    "enc-dec-rtd",
    "seed",
    "condenser",
    "autoencoder",
    "contrastive",
)

# Per method, the structure of its batch: encoder mask kind, encoder fill, encoder labels, decoder
# view and its settings. "bert" = 80/10/10 (mask_prob/random_prob), "mask" = all [MASK], "keep" =
# original ids. The numbers (rates, lengths, whole words, crop) are the paper's, declared once in
# ``dense_pt.config.defaults.objectives`` and read by ``paper_settings``. For simlm / enc-dec-rtd the two
# views are the generator's inputs (fill = the option ``generator_fill``), and ``original_ids``
# comes with the batch: the device samples the replacements (SimLM eq. 1).
PRESETS: dict[str, dict[str, Any]] = {
    "mlm": {"enc": "random", "enc_fill": "bert", "enc_labels": "masked", "decoder": "none"},
    "cdmae": {
        "enc": "random",
        "enc_fill": "bert",
        "enc_labels": "masked",
        "decoder": "independent",
        "dec": "importance",
        "dec_fill": "bert",
        "dec_labels": "masked",
    },
    "simlm": {
        "enc": "random",
        "enc_fill": "mask",
        "enc_labels": "content",
        "decoder": "nested",
        "dec": "random",
        "dec_fill": "mask",
        "dec_labels": "content",
        "original": True,
    },
    "enc-dec-mlm": {
        "enc": "random",
        "enc_fill": "bert",
        "enc_labels": "masked",
        "decoder": "nested",
        "dec": "random",
        "dec_fill": "bert",
        "dec_labels": "masked",
    },
    "enc-dec-rtd": {
        "enc": "random",
        "enc_fill": "mask",
        "enc_labels": "masked",
        "decoder": "nested",
        "dec": "random",
        "dec_fill": "mask",
        "dec_labels": "masked",
        "original": True,
    },
    "seed": {
        "enc": "random",
        "enc_fill": "bert",
        "enc_labels": "masked",
        "decoder": "clean",
        "dec_labels": "content",
    },
    "condenser": {"enc": "random", "enc_fill": "bert", "enc_labels": "masked", "decoder": "none"},
    "autoencoder": {
        "enc": None,
        "enc_fill": "keep",
        "enc_labels": "none",
        "decoder": "all_mask",
        "dec_labels": "content",
    },
    "contrastive": {
        "enc": "random",
        "enc_fill": "bert",
        "enc_labels": "masked",
        "decoder": "none",
        "spans": True,
    },
}

# collator setting <- the objective option it reads its paper default from
SETTINGS_FROM_OPTIONS = {
    "enc_p": "p_enc",
    "dec_p": "p_dec",
    "sigma": "sigma",
    "mask_prob": "mask_prob",
    "random_prob": "random_prob",
    "whole_word": "whole_word",
    "crop": "crop",
    "enc_fill": "generator_fill",
    "dec_fill": "generator_fill",
}


def paper_settings(method: str, paper: str | None = None) -> dict[str, Any]:
    """The collator settings ``method`` takes from its paper (``dense_pt.config.defaults.objectives``)."""
    from dense_pt.config.defaults.objectives import profile

    _preset(method)
    prof = profile(method, paper)
    out: dict[str, Any] = {"max_length": prof.top["max_length"].value}
    for ours, theirs in SETTINGS_FROM_OPTIONS.items():
        if theirs in prof.options:
            out[ours] = prof.options[theirs].value
    return out


class Collator:
    """Collate corpus-store rows into a pre-training batch for ``method`` (one of ``METHODS``).

    ``collator(rows, epoch=None) -> dict[str, np.ndarray]``; ``rows`` are corpus row indices.

    Batch contract (all numpy; ids and labels int64 so ``torch.from_numpy`` feeds embeddings and
    cross-entropy directly; masks bool; ``B`` rows, ``L`` = longest row + 2, or ``max_length`` with
    ``pad_to="max_length"``, rounded up to ``pad_to_multiple_of``):

    - ``input_ids`` [B, L]: the encoder input: [CLS] content [SEP] [PAD]...; after masking and
      replacement for MLM views; for ``simlm`` / ``enc-dec-rtd`` the generator's input for the
      encoder's view (``enc_mask`` filled as ``generator_fill`` says, all [MASK] by default): the
      device samples the replacements.
    - ``attention_mask`` [B, L] int64; ``special_tokens_mask`` [B, L] bool ([CLS], [SEP]).
    - ``labels`` [B, L] int64: the original id where the encoder predicts, -100 elsewhere
      (masked positions; every content position for ``simlm``; none for ``autoencoder``).
    - ``enc_mask`` [B, L] bool: the encoder's masked positions (every method but ``autoencoder``).
    - ``dec_input_ids``, ``dec_labels`` [B, L]: the decoder view, where there is one:
      ``cdmae``: its own ``importance_mask`` (p=0.5, sigma=1, the store's importance column) with
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
    range written there; a bad or unknown one is a ``ConfigError`` naming it). A setting left
    ``None`` takes the method's paper default (``paper_settings(method, paper)``,
    declared in ``dense_pt.config.defaults.objectives``: ``max_length``, the rates, whole words, crop, the
    generator's fill); every setting can be overridden: ``enc_p``, ``dec_p``, ``sigma``
    (importance noise), ``enc_fill``/``dec_fill`` ("bert", "mask", "keep"),
    ``mask_prob``/``random_prob`` (the 80/10 of "bert"), ``whole_word`` (mask whole words using
    the store's ``word_ids``), ``crop`` ("random" window or "head"), ``pad_to``,
    ``pad_to_multiple_of``, ``importance_column``, ``num_spans``, ``span_min_len``,
    ``span_max_len``; ``paper`` picks another paper's defaults (``condenser``: "simlm").

    Randomness: row ``r`` of epoch ``e`` depends only on (seed, e, r) and its content, never on the
    rest of the batch; each view equals the standalone masker in ``dense_pt.masking`` called with
    ``seed=Collator.view_seed(seed, e, view)`` and ``row_keys=rows``.
    """

    def __init__(
        self,
        store,
        method: str = "mlm",
        max_length: int | None = None,
        seed: int | None = None,
        **settings: Any,
    ) -> None:
        # Each setting's default and range are written once, in CollatorSettings.
        given = {"max_length": max_length, **({} if seed is None else {"seed": seed}), **settings}
        self.method = method
        self.settings = _resolve_settings(method, CollatorSettings(**given))
        self._store_path: Path | None = None
        arrays = self._arrays_from_store(store, method, self.settings)
        self._setup(arrays)

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
        **settings: Any,
    ) -> Collator:
        """A collator over raw ragged arrays (the layout of ``CorpusStore.ragged``):
        ``special_tokens`` maps cls/sep/pad/mask (and optionally unk) to ids."""
        self = cls.__new__(cls)
        self.method = method
        self.settings = _resolve_settings(method, CollatorSettings(**settings))
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

    def _arrays_from_store(self, store, method: str, settings: CollatorSettings) -> dict:
        from dense_pt.data.store import CorpusStore

        if isinstance(store, str | Path):
            store = CorpusStore.open(store)
        self._store_path = Path(store.path)
        values, offsets = store.ragged("input_ids")
        importance_column = settings.importance_column
        preset = _preset(method)
        wants_importance = "importance" in (preset.get("enc"), preset.get("dec"))
        importance = None
        if wants_importance:
            if not store.has_column(importance_column):
                raise InvalidArgumentError(
                    f"method {method!r} masks by importance but the store {store.path} has no "
                    f"{importance_column!r} column (columns: {store.column_names}); compute it with "
                    "`dense-pt pmi` first"
                )
            importance = store.ragged(importance_column)[0]
        word_ids = store.ragged("word_ids")[0] if settings.whole_word else None
        return {
            "values": values,
            "offsets": offsets,
            "importance": importance,
            "word_ids": word_ids,
            "vocab_size": store.vocab_size,
            "special_tokens": store.special_tokens,
        }

    def _setup(self, arrays: dict) -> None:
        s = self.settings
        method = self.method
        preset = _preset(method)
        specials = arrays["special_tokens"]
        missing = [r for r in ("cls", "sep", "pad", "mask") if r not in specials]
        if missing:
            raise InvalidArgumentError(f"special_tokens lacks {missing}")
        self.vocab_size = int(arrays["vocab_size"])
        self.special_tokens = {k: int(v) for k, v in specials.items()}
        self.max_length = int(s.max_length)  # type: ignore[arg-type]  # resolved: the paper's when not given
        self.epoch = 0

        def mask(kind, p_override):
            if kind is None:
                return None
            return (kind, float(p_override), float(s.sigma or 0.0), bool(s.whole_word))

        def fill(name: str, default: str):
            f = getattr(s, name) or default
            return {
                "bert": (float(s.mask_prob or 0.0), float(s.random_prob or 0.0)),
                "mask": (1.0, 0.0),
                "keep": None,
            }[f]

        decoder = preset["decoder"]
        enc = mask(preset.get("enc"), s.enc_p)
        dec = mask(preset.get("dec"), s.dec_p)
        spans = None
        if preset.get("spans"):
            top = self.max_length - 2 if s.span_max_len is None else s.span_max_len
            spans = (min(s.span_min_len, top), top, s.num_spans)
        self.seed = s.seed
        assert s.crop is not None  # resolved: every method's paper declares its crop
        self._native = _native.Collator(
            max_length=self.max_length,
            cls_id=self.special_tokens["cls"],
            sep_id=self.special_tokens["sep"],
            pad_id=self.special_tokens["pad"],
            mask_id=self.special_tokens["mask"],
            vocab_size=self.vocab_size,
            seed=self.seed,
            special_ids=sorted(set(self.special_tokens.values())),
            crop=s.crop,
            pad_to_max=s.pad_to == "max_length",
            pad_to_multiple_of=s.pad_to_multiple_of,
            enc_mask=enc,
            enc_fill=fill("enc_fill", preset["enc_fill"]),
            enc_labels=preset["enc_labels"],
            decoder=decoder,
            dec_mask=dec if decoder == "independent" else None,
            p_dec=dec[1] if dec is not None else 0.0,
            dec_fill=fill("dec_fill", preset.get("dec_fill", "keep")),
            dec_labels=preset.get("dec_labels", "masked"),
            spans=spans,
            return_original=bool(s.return_original or preset.get("original", False)),
        )
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
            arrays = self._arrays_from_store(self._store_path, self.method, self.settings)
        else:
            arrays = state["arrays"]
        self._setup(arrays)
        self.epoch = state["epoch"]


# Settings a method's paper does not declare (sigma outside cdmae, the fill of the auto-encoder's
# absent encoder mask, ...): unused by its views, given a neutral value.
_UNUSED = {"whole_word": False, "sigma": 0.0, "mask_prob": 1.0, "random_prob": 0.0}


def _resolve_settings(method: str, given: CollatorSettings) -> CollatorSettings:
    """``given`` with each setting left None taken from the method's paper (or ``_UNUSED``)."""
    base = {**_UNUSED, **paper_settings(method, given.paper)}
    return given.model_copy(update={k: base[k] for k, v in given if v is None and k in base})


def _preset(method: str) -> dict[str, Any]:
    try:
        return PRESETS[method]
    except KeyError:
        raise InvalidArgumentError(f"unknown method {method!r}; expected one of {list(METHODS)}") from None


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


__all__ = ["METHODS", "PRESETS", "SETTINGS_FROM_OPTIONS", "Collator", "paper_settings", "preview"]
