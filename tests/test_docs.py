"""The README and the documentation site (issue 25 item 4): a README read in five minutes whose
first block holds the two commands CI runs, over a MkDocs site whose every page is in the nav and
whose build is strict (scripts/dev.sh test builds it). The documented commands are checked against
the command line itself: a renamed command or option fails here, not in a reader's shell."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import typer.main
import yaml

from dense_pt.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mkdocs_config() -> dict[str, Any]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert isinstance(config, dict)
    return config


def _nav_pages(nav: Any) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    raise AssertionError(f"unexpected nav entry {nav!r}")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move the detail to a docs/ page"


def test_the_readmes_first_block_is_the_two_commands_ci_runs():
    lang, body = _fenced_blocks(README.read_text(encoding="utf-8"))[0]
    commands = [line.split("#", 1)[0].rstrip() for line in body.splitlines()]
    assert (lang, commands) == ("bash", ["bash scripts/dev.sh demo", "bash scripts/dev.sh test"])
    assert "exec bash scripts/dev.sh test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_readme_has_one_example_per_paper_and_links_every_page():
    text = README.read_text(encoding="utf-8")
    for paper in ("SimLM", "CDMAE", "SEED-Encoder", "LLM document expansion", "The fine-tuning pipeline"):
        assert f"**{paper}**" in text, paper
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", text))
    assert linked == {p.name for p in DOCS.glob("*.md")}, "a docs page the README does not point to"


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists():
    config = _mkdocs_config()
    nav = _nav_pages(config["nav"])
    root_pages = _hooks().ROOT_PAGES
    assert len(nav) == len(set(nav)), "a page twice in the nav"
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert set(nav) == pages | set(root_pages.values())
    assert all((ROOT / name).is_file() for name in root_pages)
    assert not pages & set(root_pages.values()), "a docs page that shadows a root document's page"


def test_the_build_is_strict_about_links_anchors_and_the_nav():
    config = _mkdocs_config()
    assert config["strict"] is True and config["site_dir"] == "site"
    levels = config["validation"]
    assert levels["nav"]["omitted_files"] == "warn"
    assert all(level == "warn" for level in levels["links"].values())
    assert {"not_found", "anchors", "unrecognized_links"} <= set(levels["links"])
    assert "/site/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    build = [line for line in (ROOT / "scripts" / "dev.sh").read_text(encoding="utf-8").splitlines()
             if 'mkdocs" build --strict' in line]  # fmt: skip
    assert len(build) == 1
    # --quiet (-q) hides the warnings from the count that --strict fails on: a broken link passed
    assert not {"--quiet", "-q"} & set(build[0].split()), build[0]


@pytest.mark.parametrize(
    ("target", "at_root", "site"),
    [
        ("docs/cli.md", True, "cli.md"),  # README -> a docs page
        ("docs/pretrain.md#defaults-each-from-its-paper", True, "pretrain.md#defaults-each-from-its-paper"),
        ("BENCHMARKS.md", True, "benchmarks.md"),  # README -> another root document
        ("docs/img/pretrain-scifact-minilm.png", True, "img/pretrain-scifact-minilm.png"),  # BENCHMARKS.md's
        ("../ARCHITECTURE.md", False, "architecture.md"),  # a docs page -> a root document
        ("../README.md#quick-start", False, "index.md#quick-start"),
        ("pmi.md#commands", False, "pmi.md#commands"),  # docs page to docs page: as written
        ("docs/cli.md", False, "docs/cli.md"),  # not rebased from a docs page: the build then fails
    ],
)
def test_github_links_map_onto_the_site(target, at_root, site):
    assert _hooks()._site_target(target, at_root) == site


def _documented_commands() -> list[tuple[str, list[str]]]:
    """Every `dense-pt ...` line of a bash block of the README and the docs, continuations joined."""
    found = []
    for page in [README, *sorted(DOCS.glob("*.md"))]:
        for lang, body in _fenced_blocks(page.read_text(encoding="utf-8")):
            if lang not in ("bash", ""):  # "": a block of command synopses
                continue
            for line in body.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("nice ")
                if line.startswith("dense-pt "):
                    line = line.split("#", 1)[0].split("&&", 1)[0]  # a comment; a second command
                    found.append((page.name, shlex.split(line.replace("[", " ").replace("]", " "))))
    return found


def test_every_documented_command_and_option_exists():
    root = typer.main.get_command(app)
    documented = _documented_commands()
    assert len(documented) >= 40
    wrong = []
    for page, argv in documented:
        cmd: Any = root
        words = argv[1:]
        while getattr(cmd, "commands", None) is not None and words and words[0] in cmd.commands:
            cmd, words = cmd.commands[words[0]], words[1:]
        if getattr(cmd, "commands", None) is not None:
            wrong.append(f"{page}: {' '.join(argv)}: no command {words[:1]}")
            continue
        options = {o for p in cmd.params for o in [*p.opts, *p.secondary_opts]} | {"--help"}
        for word in words:
            for alternative in word.split("|"):  # `--loss simlm|infonce`, `--epochs 3 | --max-steps N`
                flag = alternative.split("=", 1)[0]
                if flag.startswith("-") and not re.fullmatch(r"-?\d[\w.]*", flag) and flag not in options:
                    wrong.append(f"{page}: {' '.join(argv[:3])}: no option {flag}")
    assert wrong == []
