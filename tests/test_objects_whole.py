"""Issue 25's "objects travel whole" on the fine-tuning side: each job function takes its
validated models (what it reads and writes, its settings, the engine's ``TrainConfig``), so

- no job function takes more than 6 parameters;
- a dummy field written into ``RetrieverSettings``' and ``RerankerSettings``' source, and nothing
  else, is an option of ``dense-pt train retriever | reranker``, a key of ``--set`` and of the
  pipeline's ``[r1]`` / ``[reranker]`` tables, and reaches the job and its manifest."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _jobs() -> dict[str, object]:
    """The functions the commands and the pipeline's stages call to do a job."""
    from dense_pt.expansion import expand
    from dense_pt.finetune.stages import score_negatives, train_distill, train_reranker, train_retriever
    from dense_pt.pretrain import run_pretrain

    return {
        f.__name__: f
        for f in (train_retriever, train_distill, train_reranker, score_negatives, expand, run_pretrain)
    }


def test_no_job_function_takes_more_than_six_parameters():
    counts = {name: len(inspect.signature(f).parameters) for name, f in _jobs().items()}  # type: ignore[arg-type]
    assert all(n <= 6 for n in counts.values()), counts
    # the settings arrive as one model each, not as keywords
    from dense_pt.config.expand import ExpandSettings
    from dense_pt.config.finetune import RerankerSettings, RetrieverSettings

    hints = {name: inspect.signature(f).parameters for name, f in _jobs().items()}  # type: ignore[arg-type]
    assert "RetrieverSettings" in str(hints["train_retriever"]["settings"].annotation)
    assert "RerankerSettings" in str(hints["train_reranker"]["settings"].annotation)
    assert "ExpandSettings" in str(hints["expand"]["settings"].annotation)
    assert not set(RetrieverSettings.model_fields) & set(hints["train_retriever"])
    assert not set(RerankerSettings.model_fields) & set(hints["train_reranker"])
    assert not set(ExpandSettings.model_fields) & set(hints["expand"])


# A dummy field written into two models' source (an import hook inserts the lines when
# dense_pt.config.finetune is imported), and nothing else: the command line, --set and the
# pipeline's tables all reach the job, and the job's manifest records it.
PROBE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, json, sys
    from pathlib import Path

    TARGET = "dense_pt.config.finetune"
    FIELD = '    probe: int = Field(0, ge=0, description="A dummy setting (tests/test_objects_whole.py).")\\n\\n'

    class WithProbe(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            if name != TARGET:
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            self.origin = spec.origin
            return importlib.util.spec_from_file_location(name, spec.origin, loader=self)

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            src = Path(self.origin).read_text()
            for model in ("RetrieverSettings", "RerankerSettings"):
                anchor = f'    @model_validator(mode="after")\\n    def check_loss(self) -> {model}:\\n'
                assert src.count(anchor) == 1
                src = src.replace(anchor, FIELD + anchor)
            exec(compile(src, self.origin, "exec"), module.__dict__)

    sys.meta_path.insert(0, WithProbe())
    sys.path.insert(0, sys.argv[2])
    from typer.testing import CliRunner

    import dense_pt.finetune.stages as stages
    from dense_pt.cli import app
    from dense_pt.retrieval.negatives import NegativesTable, write_negatives
    from retrieval_fixtures import tiny_setup

    base = Path(sys.argv[1])
    beir, model, store, _queries, qrels = tiny_setup(base)
    docs = sorted({d for q in qrels.values() for d in q})
    write_negatives(base / "neg.dpneg", NegativesTable(
        {q: [(d, 1.0) for d in docs if q_docs.get(d, 0) <= 0][:4] for q, q_docs in qrels.items()}))
    files = ["--corpus", str(store), "--queries", str(beir / "queries.jsonl"), "--qrels",
             str(beir / "qrels" / "train.tsv"), "--negatives", str(base / "neg.dpneg")]
    engine = ["--max-steps", "1", "--batch-size", "2", "--warmup", "0", "--precision", "fp32"]
    got = {}
    for kind, given in (("retriever", ["--probe", "3"]), ("reranker", ["--set", "probe=5", "--loss", "listwise"])):
        out = base / kind
        res = CliRunner().invoke(app, ["train", kind, str(model), *files, "-o", str(out), "--group-size", "2",
                                       *engine, *given])
        assert res.exit_code == 0, (res.output, res.exception)
        got[kind] = json.loads((out / "manifest.json").read_text())["settings"]["probe"]

    # the pipeline: [r1] / [reranker] keys, passed whole by their stages to the jobs
    import dense_pt.pipeline.common as C
    from dense_pt.pipeline.config import validate_config
    from dense_pt.pipeline.runner import Context
    from dense_pt.pipeline.stages import reranker as reranker_stage
    from test_pipeline_fingerprints import DATA, FILES

    for rel, text in FILES.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    raw = {"out": "runs/out", "data": DATA, "model": {"init": "model"}, "r1": {"probe": 4},
           "reranker": {"init": "model", "probe": 6}}
    ctx = Context(validate_config(raw, base, "p.toml"), log=lambda _: None)

    class Seen(Exception):
        pass

    def job_sees(inputs, settings, *args, **kw):
        got["pipeline " + type(settings).__name__] = settings.probe
        raise Seen

    stages.train_retriever = stages.train_reranker = job_sees
    C.train_ids = lambda ctx: ["q1"]
    C.mine_from = lambda *a, **k: {}
    for run in (lambda: C.train_retriever_stage(ctx, base / "r1", ctx.cfg.r1, base / "model"),
                lambda: reranker_stage.run(ctx, base / "rr")):
        try:
            run()
        except Seen:
            pass
    got["bad"] = str(CliRunner().invoke(app, ["train", "retriever", str(model), *files, "-o",
                                              str(base / "bad"), "--probe", "-1"]).exception)
    print(json.dumps(got))
    """
)


@pytest.mark.slow  # a fresh interpreter (torch, the CLI), a tiny store and two 1-step trainings: ~15 s
def test_a_new_fine_tuning_setting_is_one_field_in_one_model(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["retriever"] == 3 and got["reranker"] == 5  # an option, --set: in the job's manifest
    assert got["pipeline RetrieverTable"] == 4 and got["pipeline RerankerTable"] == 6  # tables, whole
    assert "probe: must be >= 0, got -1" in got["bad"]
