# Hand-written stubs for the native module built from rust/py (keep in sync with rust/py/src).
import numpy as np
import numpy.typing as npt

__version__: str

def _raise_core_error(kind: str, message: str) -> None: ...

# negatives (rust/py/src/negatives.rs)

def negatives_write(
    path: str,
    query_ids: list[str],
    passage_ids: list[str],
    offsets: npt.NDArray[np.uint64],
    negatives: npt.NDArray[np.uint32],
    scores: npt.NDArray[np.float32] | None = None,
) -> None: ...
def negatives_read(
    path: str,
) -> tuple[
    list[str],
    list[str],
    npt.NDArray[np.uint64],
    npt.NDArray[np.uint32],
    npt.NDArray[np.float32] | None,
]: ...
def negatives_to_text(path: str) -> str: ...
