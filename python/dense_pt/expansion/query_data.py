"""LLM queries as token ids aligned with a corpus store, for the pre-training methods that read them.

:class:`QueryTokens` tokenizes every passage's queries with the store's own tokenizer (no [CLS] or
[SEP]; each query cut to ``max_query_tokens``) and keeps them as a two-level ragged array:
``row_offsets`` (store row -> its queries) and ``query_offsets`` (query -> its tokens). It builds

- the query-generation decoder's batch (:meth:`QueryTokens.decoder_batch`): input
  ``[slot, q_1 tokens, SEP, q_2 tokens, SEP, ..., q_N tokens, SEP]`` where position 0 is a slot the
  model fills with the encoder's h_cls, and causal LM labels: position t is trained to predict the
  token at t + 1 (the slot predicts q_1's first token; the last SEP predicts nothing);
- one query per passage as a contrastive context (:meth:`QueryTokens.context_batch`), chosen from
  (seed, passage id, epoch) by :func:`dense_pt.expansion.curriculum.pick_query`.

numpy only: it runs inside DataLoader workers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dense_pt.config.pretrain import MAX_QUERY_TOKENS
from dense_pt.errors import InvalidArgumentError
from dense_pt.expansion.curriculum import pick_query

IGNORE = -100


class QueryTokens:
    def __init__(
        self,
        ids: Sequence[str],
        row_offsets: np.ndarray,
        query_offsets: np.ndarray,
        values: np.ndarray,
        texts: list[str],
    ):
        self.ids = list(ids)
        self.row_offsets, self.query_offsets, self.values = row_offsets, query_offsets, values
        self.texts = texts  # the query strings, in the order of query_offsets

    @classmethod
    def build(
        cls, store, queries: Mapping[str, Sequence[str]], max_query_tokens: int = MAX_QUERY_TOKENS
    ) -> QueryTokens:
        """Tokenize ``queries`` ({passage id: [query, ...]}, e.g. ``load_queries(folder)``) for ``store``.

        Passage ids not in the store are an error (the queries belong to another corpus)."""
        if max_query_tokens < 1:
            raise InvalidArgumentError(f"max_query_tokens must be >= 1, got {max_query_tokens}")
        ids = store.ids.to_pylist()
        known = set(ids)
        unknown = [pid for pid in queries if pid not in known]
        if unknown:
            raise InvalidArgumentError(
                f"{len(unknown)} passage id(s) of the queries are not in the store {store.path} "
                f"(e.g. {unknown[0]!r}): were the queries generated for another corpus?"
            )
        tok = store.tokenizer()
        texts: list[str] = []
        counts = np.zeros(len(ids), dtype=np.int64)
        for i, pid in enumerate(ids):
            qs = list(queries.get(pid, ()))
            counts[i] = len(qs)
            texts.extend(qs)
        encoded = tok.encode_batch(texts, add_special_tokens=False) if texts else []
        lens = np.array([min(len(e.ids), max_query_tokens) for e in encoded], dtype=np.int64)
        values = np.fromiter(
            (t for e, n in zip(encoded, lens, strict=True) for t in e.ids[:n]),
            dtype=np.int64,
            count=int(lens.sum()),
        )
        row_offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        query_offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        return cls(ids, row_offsets, query_offsets, values, texts)

    def __len__(self) -> int:
        return len(self.ids)

    def num_queries(self, row: int) -> int:
        return int(self.row_offsets[row + 1] - self.row_offsets[row])

    def rows_with_queries(self) -> np.ndarray:
        return np.flatnonzero(np.diff(self.row_offsets) > 0)

    def query(self, q: int) -> np.ndarray:
        return self.values[self.query_offsets[q] : self.query_offsets[q + 1]]

    def queries_of(self, row: int) -> list[np.ndarray]:
        return [self.query(q) for q in range(self.row_offsets[row], self.row_offsets[row + 1])]

    def decoder_batch(
        self, rows: Sequence[int], sep: int, pad: int, max_length: int
    ) -> dict[str, np.ndarray]:
        """``dec_input_ids`` [B, T] (position 0 = the h_cls slot, holding ``pad``), ``dec_labels``
        [B, T] (next token, -100 where there is none) and ``dec_attention_mask`` [B, T]; sequences
        longer than ``max_length`` are cut. A passage without queries gets only the slot."""
        if max_length < 2:
            raise InvalidArgumentError(f"the decoder's max_length must be >= 2, got {max_length}")
        seqs = []
        for r in rows:
            parts = [np.array([pad])]
            for q in self.queries_of(int(r)):
                parts += [q, np.array([sep])]
            seqs.append(np.concatenate(parts)[:max_length])
        t = max(len(s) for s in seqs)
        inp = np.full((len(seqs), t), pad, dtype=np.int64)
        labels = np.full((len(seqs), t), IGNORE, dtype=np.int64)
        mask = np.zeros((len(seqs), t), dtype=np.int64)
        for b, s in enumerate(seqs):
            inp[b, : len(s)] = s
            mask[b, : len(s)] = 1
            labels[b, : len(s) - 1] = s[1:]
        return {"dec_input_ids": inp, "dec_labels": labels, "dec_attention_mask": mask}

    def context_batch(
        self, rows: Sequence[int], seed: int, epoch: int, cls: int, sep: int, pad: int, max_length: int
    ) -> dict[str, np.ndarray]:
        """One query per passage as ``[CLS] query [SEP]`` (``ctx_input_ids``, ``ctx_attention_mask``)."""
        seqs = []
        for r in rows:
            r = int(r)
            n = self.num_queries(r)
            if n == 0:
                raise InvalidArgumentError(f"passage {self.ids[r]!r} has no query to use as a context")
            first = int(self.row_offsets[r])
            # choose among the row's query indices through their texts, deterministically
            choice = pick_query(list(range(first, first + n)), seed, self.ids[r], epoch)
            q = self.query(choice)[: max_length - 2]
            seqs.append(np.concatenate([[cls], q, [sep]]))
        t = max(len(s) for s in seqs)
        inp = np.full((len(seqs), t), pad, dtype=np.int64)
        mask = np.zeros((len(seqs), t), dtype=np.int64)
        for b, s in enumerate(seqs):
            inp[b, : len(s)] = s
            mask[b, : len(s)] = 1
        return {"ctx_input_ids": inp, "ctx_attention_mask": mask}
