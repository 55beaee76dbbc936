"""`dense-pt study` and the pipeline's fusion stage, end to end on the demo corpus with a tiny random
model at a budget of seconds: every cell runs, the table is the cells' mean and std, an interrupted
or extended study reruns only what changed, and bad study files are refused before any work."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from typer.testing import CliRunner  # noqa: E402

from dense_pt.cli import app  # noqa: E402
from dense_pt.errors import FormatError  # noqa: E402
from dense_pt.pipeline import load_study, run_study  # noqa: E402
from dense_pt.pipeline.study import mean_std  # noqa: E402
from pipeline_fixtures import synthetic_corpus, tiny_model, write_beir  # noqa: E402

TRAIN = '{ max_steps = 2, batch_size = 8, lr = 5e-4, warmup = 0.1, save_every = 2, log_every = 1, precision = "fp32" }'
RETRIEVER = (
    f'group_size = 4\nquery_max_length = 16\npassage_max_length = 64\nloss = "infonce"\ntrain = {TRAIN}\n'
)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    docs, queries, qrels = synthetic_corpus(n_per_topic=6, queries_per_topic=3)
    beir = write_beir(root / "data", docs, queries, qrels)
    model = tiny_model(root / "model", [t for _, t in docs] + list(queries.values()))
    (root / "pipeline.toml").write_text(
        f'out = "unused"\nseed = 13\n'
        f'[data]\ncorpus = "{beir}/corpus.jsonl"\nqueries = "{beir}/queries.jsonl"\n'
        f'qrels = "{beir}/qrels/train.tsv"\ndev_fraction = 0.25\nmax_length = 64\n'
        f'[model]\ninit = "{model}"\n'
        '[eval]\nk = 20\nmeasures = ["nDCG@10", "R@20"]\n'
        "[mine]\ndepth = 20\nnum = 8\nbm25_depth = 20\n"
        f"[r1]\n{RETRIEVER}[r2]\n{RETRIEVER}"
        "[reranker]\nenabled = false\nmax_length = 64\n"
        "[distill]\nenabled = false\npassage_max_length = 64\n"
        '[fusion]\nenabled = true\nmethod = "interpolation"\n'
    )
    return root


def write_study(root: Path, name: str, **extra) -> Path:
    body = {
        "out": f'"{root / name}"',
        "pipeline": '"pipeline.toml"',
        "objectives": '["none", "cdmae"]',
        "seeds": "[1, 2]",
        **extra,
    }
    text = "\n".join(f"{k} = {v}" for k, v in body.items())
    text += f"\n[pretrain]\nmax_length = 64\ntrain = {TRAIN}\n"
    path = root / f"{name}.toml"
    path.write_text(text)
    return path


def test_mean_and_sample_std():
    assert mean_std([0.5]) == (0.5, 0.0)
    m, s = mean_std([0.2, 0.4, 0.9])
    assert m == pytest.approx(0.5) and s == pytest.approx(0.3605551275463989)


def test_study_runs_every_cell_tabulates_and_resumes(demo):
    path = write_study(demo, "s1")
    lines: list[str] = []
    res = run_study(path, log=lines.append)
    cells = res["cells"]
    assert sorted(cells) == ["cdmae-seed1", "cdmae-seed2", "none-seed1", "none-seed2"]
    # the table is the mean and sample std of the cells' dev metrics
    for objective in ("none", "cdmae"):
        for stage in ("zeroshot", "r1", "r2", "fusion"):
            vals = [cells[f"{objective}-seed{s}"]["metrics"][stage]["nDCG@10"] for s in (1, 2)]
            got = res["table"][objective][stage]["nDCG@10"]
            assert (got["mean"], got["std"], got["n"]) == pytest.approx((*mean_std(vals), 2))
    # seeds vary the training, not the dev split: BM25 (no training) is the same in every cell
    assert len({json.dumps(c["metrics"]["bm25"], sort_keys=True) for c in cells.values()}) == 1
    assert "pretrain" in cells["cdmae-seed1"] and "pretrain" not in cells["none-seed1"]
    out = demo / "s1"
    assert (out / "study.png").stat().st_size > 0
    assert json.loads((out / "results.json").read_text())["table"] == json.loads(json.dumps(res["table"]))
    report = (out / "report.md").read_text()
    assert "| cdmae |" in report and "±" in report and "BM25 on the same dev split" in report
    # the fusion stage: BM25 + R2, weight tuned on the training split, both fusions on dev
    fusion = json.loads((out / "cells" / "none-seed1" / "fusion" / "manifest.json").read_text())
    assert fusion["dense_stage"] == "r2" and fusion["tuning"]["on"] == "train split"
    assert 0 <= fusion["weight"] <= 1 and set(fusion["other_methods"]) == {"rrf"}

    # everything done: a re-run trains nothing
    lines.clear()
    run_study(path, log=lines.append)
    assert not any(line.endswith("] running") for line in lines)
    # a new seed: only its cells run
    lines.clear()
    res3 = run_study(load_study(path, ["seeds=[1, 2, 3]"]), log=lines.append)
    ran = {line.split()[0] for line in lines if line.endswith("] running")}
    assert ran == {"cdmae-seed3", "none-seed3"}
    assert res3["table"]["none"]["r1"]["nDCG@10"]["n"] == 3


def test_bad_study_files_are_refused_before_any_work(demo):
    cases = [
        ({"objectives": '["none", "banana"]'}, "unknown method 'banana'"),
        ({"seeds": "[1, 1]"}, "must not repeat"),
        ({"objectives": "[]"}, "non-empty"),
        ({"set": '["fusion.weight=2"]', "objectives": '["none"]'}, r"fusion: weight"),
        ({"options": "{ simlm = { generator = 'joint' } }"}, "does not run"),
        ({"set": '["r1.group_size=-4"]', "objectives": '["none"]'}, r"r1\.group_size"),
        ({"objectives": '["simlm"]'}, "simlm-seed1.*generator"),  # the pipeline's own check, naming the cell
        # the study file is a model (config/study.py): unknown keys and wrong types name the dotted key
        ({"bogus": "1"}, r"bad\.toml: bogus: unknown key"),
        ({"seeds": '["one"]'}, r"bad\.toml: seeds\.0: "),
        ({"split_seed": '"13"'}, r"bad\.toml: split_seed: "),
        ({"options": "{ cdmae = 3 }"}, r"bad\.toml: options.*got 3"),
    ]
    for extra, message in cases:
        path = write_study(demo, "bad", **extra)
        with pytest.raises(FormatError, match=message):
            load_study(path)
        assert not (demo / "bad").exists()


def test_cli_study(demo):
    path = write_study(demo, "s2", objectives='["none"]', seeds="[5]")
    r = CliRunner().invoke(app, ["study", "run", str(path), "--quiet"])
    assert r.exit_code == 0, r.output
    assert "| none |" in r.stdout and (demo / "s2" / "report.md").is_file()
    # again (done: nothing runs), the file as --config and the results as JSON, as results.json holds them
    r = CliRunner().invoke(app, ["study", "run", "--config", str(path), "--quiet", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == json.loads((demo / "s2" / "results.json").read_text())


def test_model_cards_carry_the_story(demo):
    """Every trained model folder of a cell has a Hugging Face model card: method, paper, data, config,
    and the stage's dev metrics once the pipeline has evaluated it (the pre-trained encoder: zero-shot)."""
    from huggingface_hub import ModelCard

    from dense_pt import __version__

    path = write_study(demo, "s1")  # finished by the first test, or run now
    run_study(path, log=lambda m: None)
    cell = demo / "s1" / "cells" / "cdmae-seed1"
    for folder, stage, library in (
        (cell / "r1" / "train" / "model", "r1", "sentence-transformers"),
        (cell / "r2" / "train" / "model", "r2", "sentence-transformers"),
        (cell / "pretrain" / "run" / "encoder", "zeroshot", "transformers"),
    ):
        card = ModelCard.load(folder / "README.md")
        assert card.data.library_name == library and "dense-pt" in card.data.tags
        text = card.text
        metrics = json.loads((cell / stage / "manifest.json").read_text())["metrics"]
        assert f"| nDCG@10 | {metrics['nDCG@10']:.4f} |" in text, text
        assert __version__ in text and "## Configuration" in text
    enc = (cell / "pretrain" / "run" / "encoder" / "README.md").read_text()
    assert "cdmae" in enc and "CDMAE" in enc and "corpus store" in enc
    r1 = (cell / "r1" / "train" / "model" / "README.md").read_text()
    assert "infonce" in r1 and "negatives" in r1


def test_variants_and_until(demo):
    """A labelled variant runs its method with its options; ``until`` stops every cell after a stage
    (a re-run with the same ``until`` does not go further), and raising it continues the cells."""
    opts = '{ cdmae-cls = { method = "cdmae", pooling = "cls" } }'
    path = write_study(
        demo, "s3", objectives='["none", "cdmae-cls"]', seeds="[1]", until='"zeroshot"', options=opts
    )
    res = run_study(path, log=lambda m: None)
    assert set(res["table"]["cdmae-cls"]) == {"zeroshot"}
    cell = demo / "s3" / "cells" / "cdmae-cls-seed1"
    run_config = json.loads((cell / "pretrain" / "run" / "run_config.json").read_text())
    assert run_config["method"] == "cdmae" and run_config["options"]["pooling"] == "cls"
    assert not (cell / "r1").exists()
    lines: list[str] = []
    run_study(path, log=lines.append)
    assert not (cell / "r1").exists() and not any(x.endswith("] running") for x in lines)
    res = run_study(load_study(path, ['until="r1"']), log=lambda m: None)
    assert set(res["table"]["cdmae-cls"]) == {"zeroshot", "r1"}
    with pytest.raises(FormatError, match="until must be a pipeline stage"):
        load_study(path, ['until="banana"'])


def test_the_example_study_file_is_valid():
    root = Path(__file__).resolve().parents[1] / "examples"
    study = load_study(root / "study-scifact.toml")
    assert [c.name for c in study.cells] == [
        "none-seed13",
        "cdmae-cls-seed13",
        "cdmae-seed13",
        "contrastive-seed13",
    ]
    pre = {c.objective: c.config.pretrain for c in study.cells}
    cdmae, cls = pre["cdmae"], pre["cdmae-cls"]
    assert (
        pre["none"] is None
        and cls is not None
        and cls.options.model_dump(exclude_none=True) == {"pooling": "cls"}
    )
    assert cdmae is not None and cdmae.method == cls.method == "cdmae"


def _by_hand(run: dict[str, dict[str, float]], qrels: dict[str, dict[str, int]], q: str) -> dict[str, float]:
    """nDCG@10 and R@20 of one query in plain Python (ties: passage id descending, as trec_eval)."""
    import math

    ranked = [d for d, _ in sorted(run.get(q, {}).items(), key=lambda x: (x[1], x[0]), reverse=True)]
    rel = qrels[q]
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sum(g / math.log2(i + 2) for i, g in enumerate(sorted(rel.values(), reverse=True)[:10]))
    relevant = {d for d, g in rel.items() if g > 0}
    return {"nDCG@10": dcg / ideal, "R@20": len(relevant & set(ranked[:20])) / len(relevant)}


def test_shared_pretraining_paired_comparison_and_reuse(demo):
    """``share_pretraining``: one pre-training per objective, in its first seed's cell, whose encoder
    the other seeds fine-tune; the cells of one seed copy each other's data stages; every objective
    is compared with none over the dev queries, per-query values averaged over the seeds (checked
    against a count by hand)."""
    from dense_pt.data import load_qrels
    from dense_pt.evaluation.significance import compare_per_query
    from dense_pt.runs import load_run

    path = write_study(demo, "s4", until='"r1"', share_pretraining="true")
    study = load_study(path)
    assert [c.name for c in study.cells] == ["none-seed1", "cdmae-seed1", "none-seed2", "cdmae-seed2"]
    later = study.cells[3]
    assert later.pretrained_by == "cdmae-seed1" and later.config.pretrain is None
    assert later.config.model.init == demo / "s4" / "cells" / "cdmae-seed1" / "pretrain" / "run" / "encoder"
    res = run_study(study, log=lambda m: None)
    cells = demo / "s4" / "cells"
    assert (cells / "cdmae-seed1" / "pretrain").is_dir() and not (cells / "cdmae-seed2" / "pretrain").exists()
    store = json.loads((cells / "cdmae-seed1" / "store" / "manifest.json").read_text())
    assert store["copied_from"] == "none-seed1" and "store" not in res["cells"]["cdmae-seed1"]["stage_wall_s"]
    assert not (cells / "none-seed2" / "store" / "manifest.json").read_text().count("copied_from")
    dev = load_qrels(cells / "none-seed1" / "split" / "dev.qrels")
    per = {c: load_run(cells / c / "r1" / "run.arrow") for c in res["cells"]}
    versus = res["versus_none"]
    assert versus["stage"] == "r1" and versus["objectives"]["cdmae"]["seeds"] == [1, 2]
    for m in ("nDCG@10", "R@20"):
        mine = {q: sum(_by_hand(per[f"cdmae-seed{s}"], dev, q)[m] for s in (1, 2)) / 2 for q in dev}
        base = {q: sum(_by_hand(per[f"none-seed{s}"], dev, q)[m] for s in (1, 2)) / 2 for q in dev}
        want = compare_per_query(mine, base).to_json()
        got = versus["objectives"]["cdmae"][m]
        assert got["delta"] == pytest.approx(want["delta"], abs=1e-12) and got["p_value"] == want["p_value"]
        assert got["delta"] == pytest.approx(sum(mine.values()) / len(dev) - sum(base.values()) / len(dev))
    report = (demo / "s4" / "report.md").read_text()
    assert "## Against none, R1" in report and "| cdmae | 1, 2 |" in report and "## Wall time" in report


def test_budget_skips_cells_and_says_so(demo):
    """A cell starts only while the longest cell of its kind so far would end within the budget;
    the cells it skips (and those fine-tuning a skipped pre-training) are listed, and run nothing."""
    from dense_pt.pipeline.study import _Budget

    path = write_study(demo, "s5", until='"r1"', share_pretraining="true")
    study = load_study(path)
    res = run_study(study, log=lambda m: None, budget_s=0)
    assert sorted(res["skipped"]) == sorted(c.name for c in study.cells) and not res["cells"]
    assert "cdmae-seed1" in res["skipped"]["cdmae-seed2"] and not (demo / "s5" / "cells").exists()
    assert (
        "- cdmae-seed2: skipped (its pre-training cell cdmae-seed1 did not run)"
        in (demo / "s5" / "report.md").read_text()
    )
    clock = _Budget(10.0)
    clock.start -= 5  # 5 s used
    none, cdmae = study.cells[0], study.cells[1]
    assert clock.refuses(none) is None  # nothing of its kind seen yet
    clock.longest[False] = 6.0
    assert clock.refuses(none) is not None and clock.refuses(cdmae) is None
    clock.longest[True] = 4.0
    assert clock.refuses(cdmae) is None
