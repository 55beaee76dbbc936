"""The pre-training data path: corpus-store rows -> the native collator (masking, views, padding in
Rust) -> numpy batches, produced in DataLoader workers by ``IndexedBatchSource``.

The collator is deterministic in (seed, row, epoch), so the trainer's data position is enough to
resume exactly. Which views a method needs is the collator's business; this module only checks
that the batch carries the keys the objective reads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives import METHOD_KEYS, MethodOptions

MakeBatch = Callable[[np.ndarray, int], dict[str, Any]]


def make_collate_fn(
    store, method: str, opts: MethodOptions, max_length: int, seed: int, pad_to_multiple_of: int | None = None
) -> MakeBatch:
    """``rows, epoch -> batch`` through the native collator, checked against the objective's keys
    (``pad_to_multiple_of``: the padded length rounded up to it, None: the collator's default)."""
    from dense_pt.collate import Collator

    if method == "cdmae" and not store.has_column("importance"):
        raise InvalidArgumentError(
            f"cdmae masks the decoder by importance, but the store {store.path} has no 'importance' "
            "column: run `dense-pt pmi score` on it first"
        )
    # the options passed whole: the collator reads p_enc, p_dec, sigma, ... under their own names
    collator = Collator(store, method, opts, max_length=max_length, seed=seed, **padding(pad_to_multiple_of))
    return CheckedCollate(collator, METHOD_KEYS[method])


def padding(pad_to_multiple_of: int | None) -> dict[str, int]:
    """The collator's keyword for a pre-training run's ``pad_to_multiple_of`` (none when unset)."""
    return {} if pad_to_multiple_of is None else {"pad_to_multiple_of": pad_to_multiple_of}


class CheckedCollate:
    """Calls the collator and verifies the first batch has every key the objective reads."""

    def __init__(self, collator, keys: tuple[str, ...]):
        self.collator, self.keys, self.checked = collator, keys, False

    def __call__(self, rows: np.ndarray, epoch: int) -> dict[str, Any]:
        batch = self.collator(rows, epoch=epoch)
        if not self.checked:
            missing = [k for k in self.keys if k not in batch]
            if missing:
                raise InvalidArgumentError(f"the collator's batch lacks {missing} (has {sorted(batch)})")
            self.checked = True
        return batch
