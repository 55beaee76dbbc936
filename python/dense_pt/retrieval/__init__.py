"""First-stage retrieval: BM25, dense encoding, faiss search, hard-negative mining."""
