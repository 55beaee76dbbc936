"""The project's own metadata: the licence file is the Apache 2.0 text pyproject declares, the
citation file is valid CFF 1.2.0 citing the software and the four papers implemented, and the
version is written once (Cargo.toml; maturin gives it to the package metadata)."""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path

import yaml  # PyYAML: a dependency of mkdocs (the dev group)

import dense_pt

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
CARGO = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))
# The canonical https://www.apache.org/licenses/LICENSE-2.0.txt (its widely published MD5).
APACHE_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"
PAPERS = {  # title: (first author's family name, number of authors, year)
    "SimLM: Pre-training with Representation Bottleneck for Dense Passage Retrieval": ("Wang", 8, 2023),
    "Challenging Decoder helps in Masked Auto-Encoder Pre-training for Dense Passage Retrieval": ("Li", 4, 2023),
    "Less is More: Pre-train a Strong Text Encoder for Dense Retrieval Using a Weak Decoder": ("Lu", 9, 2021),
    "Pre-training with Large Language Model-based Document Expansion for Dense Passage Retrieval": ("Ma", 5, 2023),
}  # fmt: skip


def test_license_is_the_apache_2_text_pyproject_declares():
    text = (ROOT / "LICENSE").read_bytes()
    assert hashlib.md5(text).hexdigest() == APACHE_MD5
    assert PYPROJECT["project"]["license"] == "Apache-2.0" == CARGO["workspace"]["package"]["license"]
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert not [c for c in PYPROJECT["project"]["classifiers"] if c.startswith("License ::")]  # PEP 639


def test_citation_cff_cites_the_software_and_the_four_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # CFF 1.2.0's required keys
        assert cff.get(key), key
    assert cff["type"] == "software" and cff["license"] == PYPROJECT["project"]["license"]
    assert "version" not in cff  # the version lives in Cargo.toml alone
    refs = {r["title"]: r for r in cff["references"]}
    assert set(refs) == set(PAPERS)
    for title, (first, count, year) in PAPERS.items():
        r = refs[title]
        assert r["type"] in ("article", "conference-paper") and r["year"] == year, title
        authors = r["authors"]  # every reference needs type, title, authors (CFF's schema)
        assert len(authors) == count and authors[0]["family-names"] == first, title
        assert all(a.get("given-names") and a.get("family-names") for a in authors), title
        assert r.get("doi") or r.get("url"), title


def test_the_version_is_written_once():
    """pyproject.toml takes it from Cargo.toml (dynamic), the crates from the workspace, and the
    package from the Rust core (dense_pt.__version__); the built wheel's metadata is checked
    against it in tests/test_wheel.py."""
    version = CARGO["workspace"]["package"]["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert "version" not in PYPROJECT["project"] and PYPROJECT["project"]["dynamic"] == ["version"]
    for crate in ("core", "py"):
        package = tomllib.loads((ROOT / "rust" / crate / "Cargo.toml").read_text(encoding="utf-8"))["package"]
        assert package["version"] == {"workspace": True}, crate
    assert dense_pt.__version__ == version


def test_classifiers_name_the_pythons_the_abi3_wheel_serves():
    classifiers = PYPROJECT["project"]["classifiers"]
    floor = PYPROJECT["project"]["requires-python"]
    assert floor == ">=3.11" and 'features = ["abi3-py311"]' in (ROOT / "Cargo.toml").read_text()
    pythons = sorted(c.rsplit(" ", 1)[1] for c in classifiers if re.fullmatch(r".*Python :: 3\.\d+", c))
    assert pythons[0] == "3.11" and "3.13" in pythons
    for topic in ("Topic :: Scientific/Engineering :: Artificial Intelligence", "Typing :: Typed"):
        assert topic in classifiers
    assert any(c.startswith("Operating System :: ") for c in classifiers)
