"""Issue 25's hallways: a pre-training setting travels as one object under one name from the
command line to the Rust masker, with its default written once.

- one spelling: ``enc_p`` / ``dec_p`` (the collator's old names of ``p_enc`` / ``p_dec``) are gone
  from python/ and rust/ but for the deprecated-alias table; the core's ``CollateSettings``, the
  binding that reads it and ``CollatorSettings`` name their fields alike;
- one default: the papers' rates are written only in ``config/defaults`` (no ``p_dec = 0.5`` in a
  docstring, no ``sigma=1.0`` in a native signature);
- one model: a dummy field added to ``PretrainSettings``' source, and nothing else, is an option
  of ``dense-pt pretrain``, a key of the file and of ``--set``, and reaches ``run_pretrain``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [
    p for d in ("python", "rust") for p in sorted((ROOT / d).rglob("*")) if p.suffix in (".py", ".pyi", ".rs")
]
ALIASES = "python/dense_pt/config/collate.py"  # RENAMED: the deprecated spellings, mapped to the names
MASK_RATES = ("p_enc", "p_dec", "sigma", "mask_prob", "random_prob")


def _rel(p: Path) -> str:
    return p.relative_to(ROOT).as_posix()


def _non_test_rust(text: str) -> str:
    """A Rust file without its ``#[cfg(test)]`` module (tests set numbers of their own)."""
    return text.split("#[cfg(test)]")[0]


def _group1(pattern: str, text: str) -> str:
    """The first group of ``pattern``'s first match (DOTALL) in ``text``; the match must exist."""
    m = re.search(pattern, text, re.S)
    assert m is not None, f"no match for {pattern!r}"
    return m.group(1)


def test_the_old_spellings_are_gone():
    hits = {
        f"{_rel(p)}:{i}": line.strip()
        for p in SOURCES
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\b(enc_p|dec_p)\b", line)
    }
    assert hits and all(k.startswith(ALIASES + ":") for k in hits), hits
    from dense_pt.config.collate import RENAMED

    assert RENAMED == {"enc_p": "p_enc", "dec_p": "p_dec"}


def test_python_the_binding_and_the_core_name_the_settings_alike():
    """The core's ``CollateSettings`` fields, the names the binding reads (``read_fields!``) and
    ``CollatorSettings``' fields: one list of names (a rename on one side fails here)."""
    from dense_pt.config.collate import CollatorSettings
    from dense_pt.config.options import MaskOptions, MethodOptions

    core = (ROOT / "rust/core/src/collate/method.rs").read_text(encoding="utf-8")
    body = _group1(r"pub struct CollateSettings \{(.*?)\n\}", core)
    core_fields = re.findall(r"^\s*pub (\w+):", body, re.M)
    binding = (ROOT / "rust/py/src/collate.rs").read_text(encoding="utf-8")
    read = _group1(r"read_fields!\(\s*obj,\s*CollateSettings \{(.*?)\}", binding)
    read_fields = re.findall(r"\w+", read)
    assert core_fields == read_fields
    assert set(core_fields) <= set(CollatorSettings.model_fields)
    assert set(MaskOptions.model_fields) <= set(core_fields)  # every shared mask setting crosses
    # each mask field written once: both models inherit it
    assert issubclass(CollatorSettings, MaskOptions) and issubclass(MethodOptions, MaskOptions)


def test_the_rates_defaults_are_written_only_in_config_defaults():
    """No module of python/ or rust/ (tests and benchmarks apart) writes a paper's value of a mask
    rate next to its name (a default, a keyword value, an example): the papers' values live in
    ``config/defaults`` alone (this found ``p_dec = 0.5`` in pretrain/config.py's docstring and the
    native maskers' ``sigma=1.0``)."""
    from dense_pt.config.defaults.objectives import PROFILES

    paper: dict[str, set[float]] = {name: set() for name in MASK_RATES}
    for papers in PROFILES.values():
        for prof in papers.values():
            for name in MASK_RATES:
                if name in prof.options:
                    paper[name].add(float(prof.options[name].value))
    assert all(paper.values()), paper
    written = re.compile(
        rf"""(?x)\b({"|".join(MASK_RATES)})\b["']?\s*(?::\s*[\w\[\]|. ]+?)?\s*(?:=|:)\s*(?:Some\()?(\d[\d.]*)"""
    )
    found = []
    for p in SOURCES:
        rel = _rel(p)
        if "config/defaults/" in rel or "/benches/" in rel or "/tests/" in rel or p.name == "tests.rs":
            continue
        text = p.read_text(encoding="utf-8")
        text = _non_test_rust(text) if p.suffix == ".rs" else text
        found += [
            f"{rel}: {m.group(0)}" for m in written.finditer(text) if float(m.group(2)) in paper[m.group(1)]
        ]
    assert not found, found


def test_p_dec_is_spelled_one_way_from_the_option_to_the_masker():
    """``p_dec`` is the option's field, the paper's entry, the name the binding reads and the core's
    field (the Python collator and the pre-training path pass the settings whole, unrenamed)."""
    users = {_rel(p) for p in SOURCES if re.search(r"\bp_dec\b", p.read_text(encoding="utf-8"))}
    assert {
        "python/dense_pt/config/options.py",
        "python/dense_pt/config/defaults/objectives.py",
        "rust/py/src/collate.rs",
        "rust/core/src/collate/method.rs",
    } <= users


# A dummy field written into PretrainSettings' source (an import hook inserts the line when the
# module is imported), and nothing else: the command line, a file, --set and Python all reach the job.
PROBE = textwrap.dedent(
    """
    import importlib.abc, importlib.util, json, sys
    from pathlib import Path

    TARGET = "dense_pt.config.pretrain"
    FIELD = '    probe: int = Field(0, ge=0, description="A dummy setting (tests/test_one_name.py).")\\n'

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
            anchor = "    train: TrainConfig = Field(default_factory=TrainConfig)\\n"
            assert anchor in src
            exec(compile(src.replace(anchor, anchor + FIELD), self.origin, "exec"), module.__dict__)

    sys.meta_path.insert(0, WithProbe())
    sys.path.insert(0, sys.argv[2])
    from typer.testing import CliRunner

    import dense_pt.pretrain.run as run
    from dense_pt.cli import app
    from dense_pt.pretrain import build_config, run_record
    from pretrain_helpers import tiny_config_file, tiny_store

    base = Path(sys.argv[1])
    store = tiny_store(base / "store")
    model = tiny_config_file(base / "tiny.json", store)
    seen = []

    def job_sees(cfg, store):  # the first step of the job: the objective, built from the settings
        seen.append((cfg.probe, run_record(cfg)["probe"]))
        raise KeyboardInterrupt

    run._build_objective = job_sees
    (base / "pt.toml").write_text('method = "cdmae"\\nprobe = 5\\n[train]\\nbatch_size = 2\\n')
    common = ["pretrain", "--model", model, "--corpus", str(store.path), "--out", str(base / "o")]
    for extra in ([], ["--probe", "3"], ["--set", "probe=4"]):
        CliRunner().invoke(app, [*common, "--config", str(base / "pt.toml"), *extra])
    bad = CliRunner().invoke(app, [*common, "--method", "cdmae", "--probe", "-1"])
    top = {"method": "cdmae", "model": model, "corpus": str(store.path), "out": str(base / "p"), "probe": 2}
    print(json.dumps({"seen": seen, "python": build_config(top=top).probe, "bad": str(bad.exception)}))
    """
)


@pytest.mark.slow  # a fresh interpreter (torch, the CLI) and a tiny store: ~12 s
def test_a_new_setting_is_one_field_in_one_model(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(ROOT / "tests")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    import json

    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["seen"] == [[5, 5], [3, 3], [4, 4]]  # the file, an option over it, --set over it
    assert got["python"] == 2
    assert "probe: must be >= 0, got -1" in got["bad"]
