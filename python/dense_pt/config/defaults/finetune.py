"""The fine-tuning defaults, each in one place: SimLM's Table 13 (fine-tuning hyper-parameters),
checked against the authors' released scripts (``microsoft/unilm`` ``simlm/scripts/``), which agree
with the table. The command line, the stage functions and the pipeline's ``paper`` profile read
them from here; the pipeline's ``cpu`` profile (``dense_pt.config.pipeline.PROFILES``) shrinks the
group sizes, depths and steps, never the lengths.
"""

from __future__ import annotations

# Lengths in tokens, [CLS] and [SEP] included, the same at training and at encoding.
QUERY_MAX_LENGTH = 32  # Table 13 "query length"; train_biencoder_marco.sh --q_max_len 32
PASSAGE_MAX_LENGTH = 144  # Table 13 "passage length"; --p_max_len 144, also in encode_marco.sh
# The re-ranker reads "[CLS] query [SEP] passage [SEP]" cut to 192 tokens (Table 13; --rerank_max_length
# 192 for training, re-ranking and the teacher scores). The authors' tokenizer truncates the longer
# side first; we cap the query at QUERY_MAX_LENGTH and give the passage the rest, which is the same
# whenever a query has at most 32 tokens (MS MARCO queries nearly always do).
RERANKER_MAX_LENGTH = 192

# Group = 1 positive + n - 1 negatives (Table 13 "# of negatives" 15 / 63 / 23; --train_n_passages).
RETRIEVER_GROUP_SIZE = 16
RERANKER_GROUP_SIZE = 64
DISTILL_GROUP_SIZE = 24

TAU = 0.02  # Table 13 temperature of the contrastive loss
ALPHA = 0.2  # Table 13 weight of the contrastive term in distillation (SimLM eq. 5)
TRIPLET_MARGIN = 1.0  # SEED-Encoder's hinge: max(0, 1 - q.d+ + q.d-)

# Negatives come from the previous retriever's top 200 (Table 13 "negatives depth"); the re-ranker
# re-ranks the top 200 (rerank_marco.sh --rerank_depth 200).
NEGATIVES_DEPTH = 200
RERANK_DEPTH = 200

# Initial checkpoints (Figure 2, Table 13 "PLM"): every bi-encoder (R1, R2 and the distilled one)
# starts from the pre-trained model; the re-ranker from an ELECTRA-base discriminator (Table 5: a
# SimLM-initialised re-ranker does worse).
RERANKER_INIT = "google/electra-base-discriminator"

# The re-ranker as the authors train it (train_reranker_marco.sh --rerank_forward_factor 4
# --rerank_use_rdrop True; src/models/cross_encoder_model.py): the group of 64 is scored without
# gradients (dropout off), the positive and the 15 highest-scoring negatives are kept (64 // 4), and
# those 16 go through the model twice with dropout: mean cross-entropy of the two passes plus their
# symmetric KL, 0.5 (KL(p1 || p2) + KL(p2 || p1)), weight 1. The paper's text (eq. 4) trains
# listwise cross-entropy on the whole group: the named option loss = "listwise".
RERANKER_LOSS = "simlm"
RERANKER_FORWARD_FACTOR = 4

# Optimisation per stage (Table 13): peak learning rate, warm-up steps, batch (queries per step),
# epochs. Weight decay: the authors' scripts (train_biencoder_marco.sh, train_reranker_marco.sh,
# train_kd_biencoder.sh) set none, so the Hugging Face Trainer's default 0 applies (dense-pt's
# TrainConfig default, 0.01, is for runs without a paper).
WEIGHT_DECAY = 0.0
RETRIEVER_TRAIN = {"lr": 2e-5, "warmup": 1000, "batch_size": 64, "weight_decay": WEIGHT_DECAY}
RERANKER_TRAIN = {"lr": 3e-5, "warmup": 1000, "batch_size": 64, "weight_decay": WEIGHT_DECAY}
DISTILL_TRAIN = {"lr": 3e-5, "warmup": 1000, "batch_size": 64, "weight_decay": WEIGHT_DECAY}
RETRIEVER_EPOCHS = 3
RERANKER_EPOCHS = 3
DISTILL_EPOCHS = 6
