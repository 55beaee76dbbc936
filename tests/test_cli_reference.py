"""Help a person can scan (issue 32 item 4): the long commands' options in help panels, placed by
the one table of ``dense_pt.cli.panels``; the generated command reference (docs/reference/cli.md)
equal to what the command line gives now; help texts that name today's commands and formats."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import Field
from typer.testing import CliRunner

from cli_helpers import leaf_commands
from dense_pt.cli import ALIASES, app
from dense_pt.cli.panels import PANELLED_FROM, panel
from dense_pt.config.beir import BeirSettings
from dense_pt.config.train import STEP_SWITCHES, TrainConfig

ROOT = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", ROOT / "scripts" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "option"]


# ---- panels ---------------------------------------------------------------------------------------
def test_every_long_command_lists_its_settings_in_panels():
    """A command of PANELLED_FROM options or more: every generated option (a setting) sits in a
    named panel, two at least; a shorter command keeps one box."""
    long = {p: c for p, c in leaf_commands().items() if len(_options(c)) >= PANELLED_FROM}
    assert {("pretrain",), ("train", "retriever"), ("train", "reranker"), ("beir",)} <= set(long)
    for path, cmd in leaf_commands().items():
        panels = {p.rich_help_panel for p in _options(cmd)}
        if path in long:
            assert len(panels - {None}) >= 2, path
        else:
            assert panels == {None}, path


def test_train_retriever_help_shows_its_panels():
    res = CliRunner().invoke(
        app, ["train", "retriever", "--help"], terminal_width=160, env={"COLUMNS": "160"}
    )
    assert res.exit_code == 0, res.output
    boxes = re.findall(r"╭─ (.+?) ─", res.output)
    assert boxes[:2] == ["Arguments", "Options"]  # the command's own inputs first
    assert {"Objective", "Optimisation", "GPU switches", "Mining: candidates", "Mining: filters"} <= set(
        boxes
    )
    where = {o: p.rich_help_panel for p in _options(leaf_commands()[("train", "retriever")]) for o in p.opts}
    assert where["--tf32"] == where["--cache-chunk"] == "GPU switches"
    assert where["--lr"] == "Optimisation" and where["--loss"] == "Objective"
    assert where["--depth"] == "Mining: candidates" and where["--absolute-margin"] == "Mining: filters"
    assert where["--corpus"] is None  # hand-written: the "Options" box


def test_every_step_switch_is_a_gpu_switch():
    assert {panel(TrainConfig, name) for name in STEP_SWITCHES} == {"GPU switches"}


def test_a_new_field_lands_in_its_models_panel():
    """No entry needed: a field is placed by the model that declares it (a subclass without an
    entry: its nearest base's), an inherited field by the model it comes from."""

    class Wider(TrainConfig):
        new_knob: int = Field(1, description="A setting added later.")

    assert panel(Wider, "new_knob") == panel(TrainConfig, "lr") == "Optimisation"
    assert panel(Wider, "tf32") == "GPU switches"
    assert panel(BeirSettings, "batch_size") == "Encoding"  # from EncodeOptions
    assert panel(BeirSettings, "k1") == "BM25"


# ---- help texts -----------------------------------------------------------------------------------
def _help_texts() -> list[tuple[str, str]]:
    out = []
    for path, cmd in leaf_commands(hidden=True).items():
        if path[0] in ALIASES:
            continue  # an alias's epilog names its old name on purpose
        out += [(" ".join(path), cmd.help or ""), *((" ".join(path), p.help or "") for p in cmd.params)]
    return out


def test_no_help_text_names_an_old_command():
    stale = [(where, text) for where, text in _help_texts() for old in ALIASES
             if re.search(rf"(?<![\w-]){re.escape(old)}(?![\w-])", text)]  # fmt: skip
    assert stale == []


@pytest.mark.parametrize("path", [("bm25",), ("search",), ("fuse",), ("runs", "merge")])
def test_every_run_writer_says_which_format_its_out_writes(path):
    out = next(p for p in _options(leaf_commands()[path]) if "--out" in p.opts)
    assert "Arrow" in out.help and "TREC" in out.help, out.help


# ---- the command reference ------------------------------------------------------------------------
def test_the_command_reference_is_what_the_command_line_gives_now():
    """docs/reference/cli.md is generated: a changed option fails here until the page is rewritten
    (`python scripts/cli_reference.py`)."""
    import typer.core

    if not hasattr(typer.core.TyperArgument, "display_type_rich"):  # the lower bound's typer
        pytest.skip("the page is generated with the dev group's typer; an older one words types otherwise")
    script = _script()
    assert script.PAGE.read_text(encoding="utf-8") == script.render()


def test_the_command_reference_lists_every_command_and_option():
    text = _script().render()
    sections = dict(re.findall(r"^## (dense-pt[^\n]*)\n(.*?)(?=^## |\Z)", text, flags=re.S | re.M))
    for path, cmd in leaf_commands().items():
        body = sections[" ".join(("dense-pt", *path))]
        for p in _options(cmd):
            assert f"| {p.opts[0]}" in body, (path, p.opts)
    assert not any(" ".join(("dense-pt", old)) in sections for old in ALIASES)  # hidden: not listed
