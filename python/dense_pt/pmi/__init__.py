"""Corpus-scale n-gram statistics and PMI/AMI token importance (the CDMAE masking signal).

Definitions: a passage is its content token ids; n-grams never cross passages. ``c(g)`` counts
occurrences, ``N_n = sum_p max(0, len_p - n + 1)`` (before pruning), ``p(g) = c(g) / N_|g|``,
``PMI(w_1..w_n) = ln p(w_1..w_n) - sum_k ln p(w_k)`` (n >= 2) and
``AMI(x_i) = 1/(L-1) sum_{j=1}^{L-1} PMI(x_{i-j..i}) + 1/(L-1) sum_{j=1}^{L-1} PMI(x_{i..i+j})``
where a term past the passage ends or pruned contributes 0.
"""

from dense_pt.pmi.build import build, build_arrays, count_arrays, merge, parse_shard, score
from dense_pt.pmi.table import NgramTable

__all__ = [
    "NgramTable",
    "build",
    "build_arrays",
    "count_arrays",
    "merge",
    "parse_shard",
    "score",
]
