"""Fine-tuning stages on top of the shared training engine (``dense_pt.training``): the
bi-encoder retriever, the cross-encoder re-ranker, re-ranker scoring and distillation."""
