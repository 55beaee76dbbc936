"""Each pre-training method's defaults are declared once (``dense_pt.config.defaults.objectives``), each
with the paper section or released code it comes from, and every consumer reads them: the
objectives' options, the collator presets, the pre-training config and the CLI help."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import numpy as np
import pytest

from dense_pt.collate import Collator, paper_settings
from dense_pt.config.defaults.objectives import REQUIRED
from dense_pt.errors import InvalidArgumentError
from dense_pt.objectives import (
    DEFAULT_PAPER,
    METHODS,
    PROFILES,
    MethodOptions,
    profile,
    resolve_options,
    resolve_pooling,
)

ROOT = Path(__file__).resolve().parents[1]
TRAIN_KEYS = {
    "lr",
    "warmup",
    "schedule",
    "weight_decay",
    "adam_eps",
    "adam_beta1",
    "adam_beta2",
    "max_grad_norm",
}
ALL_PROFILES = [(m, p) for m, papers in PROFILES.items() for p in papers]


def test_every_method_declares_its_defaults_with_sources():
    assert set(PROFILES) == set(METHODS)
    for method, papers in PROFILES.items():
        assert DEFAULT_PAPER[method] in papers
        for prof in papers.values():
            assert "max_length" in prof.top and TRAIN_KEYS <= set(prof.train)
            for name, _value, source in prof.rows():
                assert len(source) > 10, (method, prof.paper, name)
    with pytest.raises(InvalidArgumentError, match="no defaults from paper 'bert'"):
        profile("condenser", "bert")


@pytest.mark.parametrize("method, paper", ALL_PROFILES)
def test_options_and_config_take_the_declared_values(tmp_path_factory, method, paper):
    prof = profile(method, paper)
    given = MethodOptions(generator="joint") if "generator" in prof.options else None
    opts = resolve_options(method, given, paper)
    for f in MethodOptions.model_fields:
        if f in prof.options and prof.options[f].value != REQUIRED:
            assert getattr(opts, f) == prof.options[f].value, f
        elif f not in prof.options:
            assert getattr(opts, f) is None, f  # an option the method does not have
    # the pre-training config: the paper's length, options and optimiser settings
    from pretrain_helpers import synthetic_texts, tiny_config_file, tiny_store, write_queries

    base = tmp_path_factory.getbasetemp() / "defaults-setup"
    if not base.is_dir():
        base.mkdir()
        store = tiny_store(base / "store")
        tiny_config_file(base / "tiny.json", store)
        write_queries(base / "queries", synthetic_texts(len(store)))
    from dense_pt.pretrain import build_config

    top = {"method": method, "paper": paper, "model": str(base / "tiny.json"), "corpus": str(base / "store"),
           "out": str(tmp_path_factory.mktemp("o")), "queries": str(base / "queries")}  # fmt: skip
    if method not in ("querygen", "contrastive"):
        del top["queries"]
    cfg = build_config(top=top, options={"generator": "joint"} if given else None, train={"max_steps": 10**6})
    assert cfg.paper == paper and cfg.max_length == prof.top["max_length"].value
    # "auto" pooling is resolved against the checkpoint: a bare config.json reads [CLS], the papers'
    assert cfg.options == resolve_pooling(opts, str(base / "tiny.json"))
    assert cfg.options.pooling == (None if opts.pooling is None else "cls")
    for key in TRAIN_KEYS:
        assert getattr(cfg.train, key) == prof.train[key].value, key


@pytest.mark.parametrize("method", [m for m in METHODS if m not in ("querygen",)])
def test_collator_presets_read_the_declared_values(method):
    prof = profile(method)
    s = paper_settings(method)
    assert s["max_length"] == prof.top["max_length"].value
    # one name for each: the collator takes the objective's options under their own names
    shared = ("p_enc", "p_dec", "sigma", "whole_word", "crop", "mask_prob", "random_prob", "generator_fill")
    for name in shared:
        assert s.get(name) == (prof.options[name].value if name in prof.options else None), name


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from pretrain_helpers import tiny_store

    return tiny_store(tmp_path_factory.mktemp("store") / "s", with_importance=False)


def test_condenser_defaults_from_either_paper(store):
    """Condenser's own 15% mask, or the 30% of SimLM's Table 7 row (section 5.1) with --paper simlm:
    through the real collator, each masks exactly floor(n * p) tokens."""
    rows = list(range(16))
    counts = {}
    for paper, p in (("condenser", 0.15), ("simlm", 0.3)):
        c = Collator(store, "condenser", paper=paper, whole_word=False, crop="head")
        b = c(rows)
        n = ((b["attention_mask"] == 1) & ~b["special_tokens_mask"]).sum(1)
        assert np.array_equal(b["enc_mask"].sum(1), np.floor(n * p).astype(np.int64)), paper
        counts[paper] = int(b["enc_mask"].sum())
    assert counts["simlm"] > 1.5 * counts["condenser"]
    assert resolve_options("condenser").p_enc == 0.15
    assert resolve_options("condenser", paper="simlm").p_enc == 0.3
    assert paper_settings("condenser", "simlm")["crop"] == "head"  # SimLM's collator


def test_cli_help_lists_each_default_with_its_source():
    from typer.testing import CliRunner

    from dense_pt.cli import app

    runner = CliRunner()
    for method in ("simlm", "condenser"):
        res = runner.invoke(app, ["pretrain", "--method", method, "--help"], env={"COLUMNS": "500"})
        assert res.exit_code == 0, res.output
        for prof in PROFILES[method].values():
            # this profile's table: from its title to the next table's
            section = res.output.split(f"defaults from {prof.title}")[1].split("defaults from")[0]
            for name, value, source in prof.rows():
                line = next((ln for ln in section.splitlines() if f" {name} " in ln), None)
                assert line is not None, name
                assert repr(value) in line and source in line, (name, line)
    assert "--paper simlm" in res.output  # condenser's second profile
    res = runner.invoke(app, ["pretrain", "--help"], env={"COLUMNS": "500"})
    assert "Put --method M before --help" in res.output


# The consumers of the defaults hold no paper number of their own.
CONSUMERS = [
    "collate.py",
    "cli/pretrain.py",
    "pretrain/config.py",
    "pretrain/data.py",
    "pretrain/context_data.py",
    "pretrain/run.py",
    "objectives/options.py",
    *(f"objectives/{m.replace('-', '_')}.py" for m in METHODS),
]
PAPER_NUMBERS = {
    0.3,
    0.15,
    0.5,
    0.2,
    3e-4,
    1e-4,
    1e-6,
    1e-8,
    0.01,
    50.0,
    144,
    512,
    2048,
    4000,
    10_000,
    80_000,
}


@pytest.mark.parametrize("module", CONSUMERS)
def test_paper_numbers_live_only_in_the_defaults(module):
    tree = ast.parse((ROOT / "python" / "dense_pt" / module).read_text(encoding="utf-8"))
    numbers = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, int | float) and not isinstance(n.value, bool)
    }
    assert not numbers & PAPER_NUMBERS, (module, numbers & PAPER_NUMBERS)


def test_defaults_need_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, dense_pt.objectives as o; o.resolve_options('cdmae'); assert 'torch' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})
