"""What the reliability guarantees cost, side by side in one run (issue 14):

  head vs whole   one huge passage tokenized with max_length 512: the head only (what
                  encode_texts does) vs the whole text cut afterwards (what it did); wall time and
                  peak memory of each in a fresh process
  store open      opening a corpus store: first open of a copy (hashes its files), again (the
                  cache: a stat), verify="full", verify="none"
  pmi budget      `pmi build` at the least budget it accepts vs a roomy one: passes and time

Usage:
  nice python benches/bench_reliability.py --corpus ../shared/data/beir-scifact/corpus.jsonl \
      [--passage-mb 40] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dense_pt.config.corpus import CorpusSettings
from dense_pt.config.pmi import PmiBuild

TOKENIZE = """
import json, sys, time
from dense_pt.data.tokenizer import encode_texts, load_tokenizer
tok = load_tokenizer(sys.argv[1])
unit = "electricity conducts copper river floods mill "
size = int(sys.argv[3]) << 20
text = (unit * (size // len(unit) + 1))[:size]
t0 = time.perf_counter()
if sys.argv[2] == "head":
    ids = encode_texts(tok, [text], 510)[0][0].tolist()
else:
    ids = tok.encode(text, add_special_tokens=False).ids[:510]
seconds = time.perf_counter() - t0
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_mb": hwm / 1024, "tokens": len(ids), "first": ids[:5]}))
"""


def tokenize(tok: Path, how: str, mb: int) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", TOKENIZE, str(tok), how, str(mb)], capture_output=True, text=True
    )
    if r.returncode:
        raise SystemExit(r.stderr)
    return json.loads(r.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/beir-scifact/corpus.jsonl"))
    ap.add_argument("--passage-mb", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    from dense_pt.artifacts.checksums import _verified
    from dense_pt.data.build import build_corpus_store, train_tokenizer_on_corpus
    from dense_pt.data.store import CorpusStore
    from dense_pt.pmi import build

    work = Path(tempfile.mkdtemp(prefix="bench-reliability-"))
    try:
        tok = work / "tok.json"
        train_tokenizer_on_corpus(args.corpus, tok, vocab_size=8000)

        print(f"## one {args.passage_mb} MB passage, max_length 512 (fresh process each)")
        print("| candidate | s | peak RSS MB | tokens |")
        print("|---|---:|---:|---:|")
        rows = {how: tokenize(tok, how, args.passage_mb) for how in ("head", "whole")}
        assert rows["head"]["first"] == rows["whole"]["first"] and rows["head"]["tokens"] == 510
        for how, r in rows.items():
            print(f"| {how} | {r['seconds']:.2f} | {r['peak_mb']:.0f} | {r['tokens']} |")
        print(
            f"whole / head: {rows['whole']['seconds'] / rows['head']['seconds']:.0f}x time, "
            f"{rows['whole']['peak_mb'] / rows['head']['peak_mb']:.1f}x peak memory\n"
        )

        store = build_corpus_store(
            args.corpus, tok, work / "store", CorpusSettings(threads=args.threads)
        ).store
        size = sum(p.stat().st_size for p in store.path.iterdir())
        shutil.copytree(store.path, work / "copy")  # new inodes: not verified yet
        print(f"## opening the store ({size / 1e6:.1f} MB of files)")
        print("| open | ms |")
        print("|---|---:|")
        for label, verify in [
            ("first open of a copy (hashes)", "cached"),
            ("again (cached)", "cached"),
            ('verify="full"', "full"),
            ('verify="none"', "none"),
        ]:
            t0 = time.perf_counter()
            CorpusStore.open(work / "copy", verify=verify)
            print(f"| {label} | {1e3 * (time.perf_counter() - t0):.1f} |")
        _verified.clear()
        t0 = time.perf_counter()
        CorpusStore.open(work / "copy")
        print(f"| a new process (the cache folder) | {1e3 * (time.perf_counter() - t0):.1f} |\n")

        print(f"## pmi build, --threads {args.threads}")
        try:
            build(store, work / "x.pmi", PmiBuild(memory_gb=0.001, threads=args.threads))
            raise SystemExit("a 1 MB budget was accepted")
        except ValueError as exc:
            said = re.search(r"needs at least ([0-9.]+) GB", str(exc))
            if said is None:
                raise SystemExit(f"the refusal does not say the budget it needs: {exc}") from exc
            least = float(said.group(1))
        print("| budget GB | passes | spilled runs | s |")
        print("|---:|---:|---:|---:|")
        out = {}
        for gb in (least, 8.0):
            s = build(store, work / f"t{gb}.pmi", PmiBuild(memory_gb=gb, threads=args.threads))
            out[gb] = s["seconds"]
            print(f"| {gb} | {s['passes']} | {s['spilled_runs']} | {s['seconds']:.2f} |")
        assert (work / f"t{least}.pmi").read_bytes() == (work / "t8.0.pmi").read_bytes()
        print(f"least / roomy: {out[least] / out[8.0]:.1f}x time, same bytes; 0.001 GB refused")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
