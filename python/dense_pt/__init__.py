"""dense-pt: pre-train and fine-tune dense passage retrievers.

The pipeline, module by module: ``data`` (readers, corpus store) -> ``pmi`` (n-gram statistics,
token importance) -> ``masking`` / ``collate`` (native maskers and batches) -> ``models`` /
``objectives`` -> ``training`` -> ``retrieval`` -> ``evaluation``. Importing this package does not
import torch; only the training-side modules do.
"""

from dense_pt._native import __version__
from dense_pt.errors import DensePtError

__all__ = ["DensePtError", "__version__"]
