"""`dense-pt pretrain` end to end on a tiny store and a tiny random BERT: every method runs, the
outputs load with Hugging Face, configuration errors are clear, and a SIGKILLed run resumes to the
same weights as an uninterrupted one."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)  # the CI machine is shared: idle-spinning thread pools cost far more than they give
pytest.importorskip("dense_pt.collate")

from typer.testing import CliRunner  # noqa: E402

from dense_pt.cli import app  # noqa: E402
from dense_pt.errors import FormatError, InvalidArgumentError, MismatchError  # noqa: E402
from dense_pt.objectives import METHODS  # noqa: E402
from dense_pt.pretrain import build_config, load_objective, run_pretrain  # noqa: E402
from dense_pt.pretrain.context_data import CONTEXT_METHODS  # noqa: E402
from pretrain_helpers import (  # noqa: E402
    synthetic_texts,
    tiny_config_file,
    tiny_generator,
    tiny_store,
    write_queries,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    base = tmp_path_factory.mktemp("pretrain")
    store = tiny_store(base / "store")
    config = tiny_config_file(base / "tiny.json", store)
    return base, store, config


def frozen_generator(setup) -> str:
    """A tiny random masked LM over the store's vocabulary: simlm's frozen generator here."""
    base, store, _ = setup
    folder = base / "generator"
    if not folder.is_dir():
        tiny_generator(folder, vocab_size=store.vocab_size, pad=store.special_tokens["pad"])
    return str(folder)


# simlm: the paper's frozen generator; enc-dec-rtd: a joint one (exported beside the encoder)
def _generator(setup, method):
    return {"simlm": frozen_generator(setup), "enc-dec-rtd": "joint"}.get(method)


def _cfg(setup, out, method="cdmae", options=None, **train):
    base, store, config = setup
    t = {"max_steps": 4, "batch_size": 4, "lr": 1e-3, "save_every": 2, "log_every": 1, "warmup": 1}
    t.update(train)
    top = {"method": method, "model": config, "corpus": str(store.path), "out": str(out), "max_length": 48}
    if method in CONTEXT_METHODS:  # querygen / contrastive read LLM queries (test_expand_pretrain.py)
        folder = base / "queries"
        if not folder.is_dir():
            write_queries(folder, synthetic_texts(len(store)))
        top["queries"] = str(folder)
    options = {"generator": _generator(setup, method), **(options or {})}
    return build_config(top=top, options=options, train=t)


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_runs_and_exports(setup, tmp_path, method):
    from transformers import AutoModel, AutoTokenizer

    summary = run_pretrain(_cfg(setup, tmp_path / method, method, max_steps=3), progress=False)
    assert summary["steps"] == 3
    out = tmp_path / method
    recs = [json.loads(line) for line in open(out / "log.jsonl")]
    assert [r["step"] for r in recs] == [1, 2, 3] and all(np.isfinite(r["loss"]) for r in recs)
    enc = AutoModel.from_pretrained(out / "encoder")
    tok = AutoTokenizer.from_pretrained(out / "encoder")
    ids = tok("protein binding receptor", return_tensors="pt")
    assert enc(**ids).last_hidden_state.shape[-1] == 32
    assert (out / "decoder" / "model.safetensors").is_file()
    assert json.loads((out / "decoder" / "config.json").read_text())["method"] == method
    assert (out / "generator").is_dir() == (method == "enc-dec-rtd")  # the joint one only
    rebuilt = load_objective(out)
    assert rebuilt.method == method


def test_exported_weights_are_the_trained_ones(setup, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModel

    run_pretrain(_cfg(setup, tmp_path / "r", "cdmae", max_steps=2), progress=False)
    ckpt = load_file(str(tmp_path / "r" / "checkpoints" / "checkpoint-00000002" / "model.safetensors"))
    enc = AutoModel.from_pretrained(tmp_path / "r" / "encoder").state_dict()
    for k, v in enc.items():
        torch.testing.assert_close(v, ckpt["encoder." + k])
    obj = load_objective(tmp_path / "r")
    torch.testing.assert_close(
        obj.decoder.layers[0].output.dense.weight, ckpt["decoder.layers.0.output.dense.weight"]
    )


def test_refuses_to_overwrite_and_checks_resumed_settings(setup, tmp_path):
    run_pretrain(_cfg(setup, tmp_path / "r", max_steps=2), progress=False)
    with pytest.raises(FileExistsError, match="--resume"):
        run_pretrain(_cfg(setup, tmp_path / "r", max_steps=2), progress=False)
    with pytest.raises(MismatchError, match="lr"):
        run_pretrain(_cfg(setup, tmp_path / "r", max_steps=4, lr=5e-4), resume=True, progress=False)
    # Extending a finished run is allowed.
    assert run_pretrain(_cfg(setup, tmp_path / "r", max_steps=3), resume=True, progress=False)["steps"] == 3


def test_a_run_that_failed_before_its_first_step_leaves_no_record(setup, tmp_path):
    """A run refused while building (too long for the model's positions; a generator with another
    vocabulary) or stopped before its first checkpoint holds nothing to continue: the corrected
    command starts without --resume, and is then recorded with its own settings."""
    _, store, _ = setup
    out = tmp_path / "r"
    too_long = _cfg(setup, out, max_steps=2)
    too_long.max_length = 200  # the tiny model has 160 positions: found once the model is loaded
    with pytest.raises(InvalidArgumentError, match="160 positions"):
        run_pretrain(too_long, progress=False)
    assert not (out / "run_config.json").exists()
    gen = tmp_path / "gen"
    from dense_pt.data.tokenizer import train_wordpiece

    tiny_generator(gen, vocab_size=store.vocab_size, pad=store.special_tokens["pad"])
    train_wordpiece(["other words entirely"] * 20, vocab_size=60, min_frequency=1).save(
        str(gen / "tokenizer.json")
    )
    with pytest.raises(MismatchError, match="another vocabulary"):
        run_pretrain(_cfg(setup, out, "simlm", options={"generator": str(gen)}, max_steps=2), progress=False)
    assert not (out / "run_config.json").exists()

    def fail_at_first_step(trainer, step, record):
        raise RuntimeError("out of memory (simulated)")

    with pytest.raises(RuntimeError, match="simulated"):
        run_pretrain(_cfg(setup, out, max_steps=2, lr=5e-4), callbacks=[fail_at_first_step], progress=False)
    assert (out / "run_config.json").exists() and not (out / "checkpoints").exists()
    # the corrected command (other settings), without --resume
    assert run_pretrain(_cfg(setup, out, max_steps=2), progress=False)["steps"] == 2
    assert json.loads((out / "run_config.json").read_text())["train"]["lr"] == 1e-3


def test_cdmae_needs_importance(tmp_path):
    store = tiny_store(tmp_path / "plain", with_importance=False)
    config = tiny_config_file(tmp_path / "c.json", store)
    top = {
        "method": "cdmae",
        "model": config,
        "corpus": str(store.path),
        "out": str(tmp_path / "o"),
        "max_length": 48,
    }
    cfg = build_config(top=top)
    with pytest.raises(InvalidArgumentError, match="pmi score"):
        run_pretrain(cfg, progress=False)


def test_toml_config_and_cli_overrides(setup, tmp_path):
    _base, store, config = setup
    toml = tmp_path / "pt.toml"
    toml.write_text(
        textwrap.dedent(
            f"""
            method = "seed"
            model = "{config}"
            corpus = "{store.path}"
            out = "run"
            max_length = 40
            [options]
            attention_span = 3
            [train]
            max_steps = 7
            batch_size = 4
            warmup = 1
            lr = 2e-4
            """
        )
    )
    cfg = build_config(toml, train={"max_steps": 2, "lr": 5e-5})
    assert cfg.method == "seed" and cfg.options.attention_span == 3 and cfg.train.max_steps == 2
    assert cfg.out == str(tmp_path / "run") and cfg.max_length == 40
    # layers: the paper's defaults, then the file, then the command line
    assert cfg.train.lr == 5e-5 and cfg.train.warmup == 1  # CLI, then TOML
    assert cfg.train.adam_eps == 1e-6 and cfg.train.weight_decay == 0.01  # SEED-Encoder's
    assert cfg.options.p_enc == 0.15 and cfg.options.decoder_layers == 3 and cfg.paper == "seed"
    toml.write_text(toml.read_text().replace("attention_span", "atention_span"))
    with pytest.raises(FormatError, match=r"pt.toml: options\.atention_span: unknown key"):
        build_config(toml)
    toml.write_text('method = "seed"\n[train]\ngrad_accum = "two"\n')
    with pytest.raises(FormatError, match=r"train\.grad_accum"):
        build_config(toml)


def test_cli_pretrain_and_plot(setup, tmp_path):
    _base, store, config = setup
    runner = CliRunner()
    out = tmp_path / "cli"
    args = [
        "pretrain",
        "--method",
        "simlm",
        "--generator",
        "joint",
        "--model",
        config,
        "--corpus",
        str(store.path),
    ]
    # SimLM's 4,000 warm-up steps (Table 11) do not fit a 3-step run: refused, naming the source
    res = runner.invoke(app, [*args, "--out", str(tmp_path / "w"), "--max-steps", "3", "--quiet"])
    assert res.exit_code != 0 and "SimLM Table 11" in str(res.exception) and "--warmup" in str(res.exception)
    args += ["--warmup", "1"]
    args += [
        "--out",
        str(out),
        "--max-steps",
        "3",
        "--batch-size",
        "4",
        "--log-every",
        "1",
        "--max-length",
        "48",
        "--quiet",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (out / "encoder" / "model.safetensors").is_file()
    png = tmp_path / "curve.png"
    res = runner.invoke(
        app, ["plot", str(out / "log.jsonl"), "--out", str(png), "--key", "loss", "--key", "loss_enc"]
    )
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_errors_exit_nonzero(setup, tmp_path):
    _base, store, config = setup
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dense_pt",
            "pretrain",
            "--method",
            "bert",
            "--model",
            config,
            "--corpus",
            str(store.path),
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
    )
    said = " ".join(re.sub("[│╭╮╰╯─]", " ", proc.stderr).split())  # click's usage error, in a rich panel
    assert proc.returncode == 2 and "'bert' is not one of 'simlm', 'cdmae'" in said, proc.stderr
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "dense_pt",
            "pretrain",
            "--method",
            "cdmae",
            "--model",
            config,
            "--corpus",
            str(store.path),
            "--out",
            str(tmp_path / "x"),
            "--generator",
            "joint",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "uses no generator" in proc.stderr


KILL_SCRIPT = """
import os, signal, sys
from dense_pt.pretrain import build_config, run_pretrain
top = dict(method="simlm", model=sys.argv[1], corpus=sys.argv[2], out=sys.argv[3], max_length=48)
train = dict(max_steps=8, batch_size=4, lr=1e-3, save_every=3, log_every=1, warmup=2, num_workers=int(sys.argv[5]), threads=1)
options = dict(generator="joint")
kill_at = int(sys.argv[4])

def killer(trainer, step, record):
    if step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

run_pretrain(build_config(top=top, options=options, train=train), resume=True, callbacks=[killer], progress=False)
"""


def test_resume_after_sigkill_matches_uninterrupted_run(setup, tmp_path):
    """Killed (SIGKILL) at step 5, after the checkpoint at 3: steps 4-5 are redone on resume with
    the same data, masks, dropout and generator samples, and the final weights match."""
    from safetensors.torch import load_file

    _base, store, config = setup
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}

    def run(out, kill_at, workers=1):
        return subprocess.run(
            [sys.executable, str(script), config, str(store.path), str(out), str(kill_at), str(workers)],
            env=env,
            capture_output=True,
            text=True,
        )

    full = run(tmp_path / "full", kill_at=-1)
    assert full.returncode == 0, full.stderr
    cut = run(tmp_path / "cut", kill_at=5)
    assert cut.returncode == -signal.SIGKILL, cut.stderr
    assert not (tmp_path / "cut" / "encoder").exists()
    resumed = run(tmp_path / "cut", kill_at=-1)
    assert resumed.returncode == 0, resumed.stderr
    a = load_file(str(tmp_path / "full" / "checkpoints" / "checkpoint-00000008" / "model.safetensors"))
    b = load_file(str(tmp_path / "cut" / "checkpoints" / "checkpoint-00000008" / "model.safetensors"))
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6)
    sa = json.loads((tmp_path / "full" / "pretrain.json").read_text())
    sb = json.loads((tmp_path / "cut" / "pretrain.json").read_text())
    assert sa["steps"] == sb["steps"] == 8 and sb["resumed_from"] == 3
    steps = [json.loads(line)["step"] for line in open(tmp_path / "cut" / "log.jsonl")]
    assert steps == list(range(1, 9))


def test_demo_stage_runs_then_is_up_to_date(setup, tmp_path):
    from dense_pt.demo.pretrain import demo_stage

    _, store, _ = setup
    first = demo_stage(store.path, tmp_path / "demo", max_steps=4, batch_size=4)
    assert first["status"] == "ran" and first["method"] == "cdmae" and first["steps"] == 4
    assert (Path(first["encoder"]) / "model.safetensors").is_file()
    again = demo_stage(store.path, tmp_path / "demo", max_steps=4, batch_size=4)
    assert again["status"] == "up to date" and again["final loss"] == first["final loss"]


def test_cdmae_decoder_masks_come_from_importance(setup):
    """Through the real data path with sigma = 0, the decoder predicts exactly the floor(n/2) most
    important tokens of each passage, while the encoder's mask is random."""
    from dense_pt.objectives import MethodOptions, resolve_options
    from dense_pt.pretrain.data import make_collate_fn

    _, store, _ = setup
    opts = resolve_options("cdmae", MethodOptions(sigma=0.0, crop="head"))
    collate = make_collate_fn(store, "cdmae", opts, max_length=144, seed=0)
    rows = np.arange(16)
    batch = collate(rows, 0)
    overlap = []
    for b, r in enumerate(rows):
        imp = store.row(int(r), "importance")
        n = len(imp)
        assert n <= 142  # no truncation: positions are content index + 1
        expected = np.zeros(batch["dec_labels"].shape[1], dtype=bool)
        expected[np.argsort(-imp, kind="stable")[: n // 2] + 1] = True
        np.testing.assert_array_equal(batch["dec_labels"][b] != -100, expected)
        enc = batch["labels"][b] != -100
        overlap.append((enc & expected).sum() / max(1, enc.sum()))
    assert 0.2 < np.mean(overlap) < 0.8  # the encoder's mask ignores importance


@pytest.mark.parametrize("whole_word", [False, True])
def test_simlm_samples_twice_from_the_real_collator(setup, whole_word):
    """Through the real data path (collator -> objective): the generator runs on the encoder's view
    with floor(n * 0.3) [MASK] and on the decoder's with floor(n * 0.5) (whole words: at most that,
    whole words only), positions nested; x_enc and x_dec differ at most encoder positions."""
    from dense_pt.models.encoder import load_encoder
    from dense_pt.objectives import MethodOptions, SpecialIds, build_objective, resolve_options
    from dense_pt.pretrain.data import make_collate_fn
    from dense_pt.training import to_device

    _, store, config = setup
    opts = resolve_options("simlm", MethodOptions(generator=frozen_generator(setup), whole_word=whole_word))
    rows = np.arange(32)
    batch = to_device(make_collate_fn(store, "simlm", opts, 144, seed=0)(rows, 0), torch.device("cpu"))
    model = build_objective("simlm", load_encoder(config), SpecialIds.from_store(store), opts)
    calls = []
    model.generator.mlm.register_forward_pre_hook(
        lambda m, a, kw: calls.append(kw["input_ids"].clone()), with_kwargs=True
    )
    with torch.no_grad():
        original, x_enc, x_dec, _ = model.make_views(batch)
    assert len(calls) == 2
    mask_id = store.special_tokens["mask"]
    enc, dec = calls[0] == mask_id, calls[1] == mask_id
    assert torch.equal(enc, batch["enc_mask"]) and torch.equal(dec, batch["dec_mask"])
    assert not (enc & ~dec).any()  # nested
    content = batch["attention_mask"].bool() & ~batch["special_tokens_mask"]
    n = content.sum(1)
    want_enc, want_dec = (n * 0.3).floor().long(), (n * 0.5).floor().long()
    if whole_word:
        assert (enc.sum(1) <= want_enc).all() and (dec.sum(1) <= want_dec).all()
        assert (dec.sum(1) >= want_dec - 3).all()  # words are short: close to the quota
        for b, r in enumerate(rows):  # a word is masked entirely or not at all
            words = store.row(int(r), "word_ids")
            for view in (enc, dec):
                m = view[b, 1 : len(words) + 1].numpy()
                for w in np.unique(words):
                    assert len(set(m[words == w])) == 1
    else:
        assert torch.equal(enc.sum(1), want_enc) and torch.equal(dec.sum(1), want_dec)
    assert not ((x_enc != original) & ~enc).any() and not ((x_dec != original) & ~dec).any()
    assert (x_enc != x_dec)[enc].float().mean() > 0.5
    special = torch.tensor(list(store.special_tokens.values()))
    assert not torch.isin(x_dec[dec], special).any() and not torch.isin(x_enc[enc], special).any()


def test_generator_with_another_vocabulary_is_refused(setup, tmp_path):
    from dense_pt.data.tokenizer import train_wordpiece

    _, store, _ = setup
    folder = tmp_path / "gen"
    tiny_generator(folder, vocab_size=store.vocab_size, pad=store.special_tokens["pad"])
    train_wordpiece(["other words entirely"] * 20, vocab_size=60, min_frequency=1).save(
        str(folder / "tokenizer.json")
    )
    cfg = _cfg(setup, tmp_path / "r", "simlm", options={"generator": str(folder)})
    with pytest.raises(MismatchError, match="another vocabulary"):
        run_pretrain(cfg, progress=False)
    with pytest.raises(FileNotFoundError, match="local Hugging Face cache"):
        _cfg(setup, tmp_path / "r2", "simlm", options={"generator": "no-org/no-such-generator"})


def test_a_config_built_by_hand_takes_its_length_from_the_paper(setup, tmp_path):
    """``PretrainSettings(...)`` without ``build_config`` leaves max_length (and the train keys not
    given) unset: ``run_pretrain`` resolves them from the method's paper (144 for cdmae; its lr
    schedule) instead of comparing None with the model's positions (found by mypy, issue 13).
    ``PretrainConfig``, the old name of the resolved settings, is the same model (deprecated)."""
    from dense_pt.config import PretrainSettings, TrainConfig

    _, store, config = setup
    train = TrainConfig(max_steps=1, batch_size=4, lr=1e-3, save_every=1, log_every=1, warmup=1)
    top = {"method": "cdmae", "model": config, "corpus": str(store.path), "out": str(tmp_path / "o")}
    cfg = PretrainSettings(**top, train=train)
    assert cfg.max_length is None
    assert run_pretrain(cfg, progress=False)["steps"] == 1
    recorded = json.loads((tmp_path / "o" / "run_config.json").read_text())
    assert recorded["max_length"] == 144 and recorded["train"]["lr"] == 1e-3
    assert recorded["train"]["weight_decay"] == 0.01 and recorded["options"]["p_dec"] == 0.5  # CDMAE's
    with pytest.raises(InvalidArgumentError, match="max_length is unset"):
        PretrainSettings(**top).length()  # the typed accessor of a resolved config
    with pytest.warns(DeprecationWarning, match="PretrainConfig is now"):
        from dense_pt.pretrain import PretrainConfig
    assert PretrainConfig is PretrainSettings
