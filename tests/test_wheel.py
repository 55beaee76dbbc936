"""Packaging, what the release workflow (.github/workflows/release.yml) does, as far as this machine
can. The sdist is built (maturin sdist); pip compiles it (maturin's build backend, in pip's
isolated build environment, as for a user installing the sdist) into the x86_64 wheel linked by zig
against glibc 2.17, as the release's manylinux job links it; that wheel is installed into a fresh
virtualenv without torch and smoke-tested by scripts/wheel_smoke.py, the script the workflow runs
on every platform. So one compile (minutes) serves both the sdist's check and the wheel's: its
tags, its contents, and both files' metadata as PyPI reads it (twine check)."""

from __future__ import annotations

import email.parser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "scripts" / "wheel_smoke.py"
VERSION = tomllib.loads((ROOT / "Cargo.toml").read_text(encoding="utf-8"))["workspace"]["package"]["version"]
TAG = "cp311-abi3-manylinux_2_17_x86_64"  # one of the WHEEL file's tags


def _maturin() -> list[str]:
    """maturin from this interpreter's environment (its bin folder, then PATH, then ``-m``); the
    tests are skipped when none is installed."""
    here = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")
    if here:
        return [here]
    if importlib.util.find_spec("maturin") is not None:
        return [sys.executable, "-m", "maturin"]
    pytest.skip(f"maturin is not installed beside {sys.executable} nor on PATH (the dev group has it)")


def _zig_path() -> str:
    """PATH with the ``zig`` of this interpreter's ziglang package first (maturin --zig runs
    ``zig``; the binary itself, as pip's isolated build hides the package from a ``python -m``)."""
    spec = importlib.util.find_spec("ziglang")
    if spec is None or spec.origin is None:
        pytest.skip("ziglang is not installed (the dev group has it): no manylinux_2_17 wheel")
    return f"{Path(spec.origin).parent}{os.pathsep}{os.environ['PATH']}"


@pytest.fixture(scope="module")
def sdist(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("sdist")
    subprocess.run([*_maturin(), "sdist", "--out", str(tmp)], cwd=ROOT, check=True, timeout=300)
    (built,) = tmp.glob("dense_pt-*.tar.gz")
    return built


@pytest.fixture(scope="module")
def wheel(sdist, tmp_path_factory) -> Path:
    """The sdist compiled by pip (a release build) into the x86_64 wheel linked by zig against glibc
    2.17 (``MATURIN_PEP517_ARGS``: what pip's maturin adds to its build). A full compile every time,
    in the unpacked sdist's own target folder: a kept CARGO_TARGET_DIR was tried and not reused, as
    the linker wrapper maturin writes for zig (in every crate's flags) had a new path in each build."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {
        **os.environ,
        "PATH": _zig_path(),
        "MATURIN_PEP517_ARGS": "--locked --zig --compatibility manylinux_2_17",
    }
    env.pop("PYTHONPATH", None)
    env.pop("CARGO_TARGET_DIR", None)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(sdist)]
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, check=True, timeout=1800)
    print(f"pip compiled the sdist in {time.monotonic() - t0:.0f} s")
    (built,) = (tmp / "dist").glob("dense_pt-*.whl")
    return built


def _smoke(dist: Path, venv: Path) -> str:
    out = subprocess.run([sys.executable, str(SMOKE), str(dist), "--venv", str(venv)], capture_output=True,
                         text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


@pytest.mark.slow
def test_the_compiled_sdist_installs_and_works_without_torch(wheel, tmp_path):
    """What ``pip install dense_pt-X.tar.gz`` gives a user, in a fresh virtualenv: the smoke passes,
    torch is absent, and the installed version is Cargo.toml's."""
    out = _smoke(wheel, tmp_path / "venv")
    assert out.startswith(f"smoke ok: dense-pt {VERSION} from {tmp_path / 'venv'}"), out


@pytest.mark.slow
def test_wheel_is_manylinux_2_17_abi3_and_holds_the_package_only(wheel):
    # the platform tag and its legacy alias (manylinux2014 = manylinux_2_17), in maturin's order
    name, python, abi, platforms = wheel.name.removesuffix(".whl").rsplit("-", 3)
    assert (name, python, abi) == (f"dense_pt-{VERSION}", "cp311", "abi3"), wheel.name
    assert set(platforms.split(".")) == {"manylinux_2_17_x86_64", "manylinux2014_x86_64"}, wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = z.read(f"dense_pt-{VERSION}.dist-info/WHEEL").decode()
        lib = z.read("dense_pt/_native.abi3.so")
    assert len(names) == len(set(names)), "a file is in the wheel twice"
    tops = {n.split("/")[0] for n in names}
    assert tops == {"dense_pt", f"dense_pt-{VERSION}.dist-info"}, tops  # no tests/, benches/, rust/
    assert not [n for n in names if re.search(r"(^|/)(tests?|benches)/|conftest|\.rs$", n)]
    for need in ("dense_pt/__init__.py", "dense_pt/py.typed", "dense_pt/_native.pyi",
                 f"dense_pt-{VERSION}.dist-info/licenses/LICENSE"):  # fmt: skip
        assert need in names, need
    assert [n for n in names if n.endswith((".so", ".pyd"))] == ["dense_pt/_native.abi3.so"]
    assert f"Tag: {TAG}" in info.splitlines() and "Root-Is-Purelib: false" in info.splitlines(), info
    # The symbol versions the extension asks of glibc: none newer than 2.17 (what the tag promises).
    wanted = {tuple(map(int, v)) for v in re.findall(rb"GLIBC_(\d+)\.(\d+)", lib)}
    assert wanted and max(wanted) <= (2, 17), sorted(wanted)


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        return email.parser.Parser().parsestr(z.read(f"dense_pt-{VERSION}.dist-info/METADATA").decode())


@pytest.mark.slow
def test_wheel_metadata(wheel):
    """The version is Cargo.toml's, the licence an SPDX expression with its file, the base install
    is light (no torch), bm25s (a test and benchmark reference) is nowhere, PyStemmer in eval."""
    m = _metadata(wheel)
    assert m["Name"] == "dense-pt" and m["Version"] == VERSION
    assert m["Requires-Python"] == ">=3.11"
    assert m["License-Expression"] == "Apache-2.0" and m.get_all("License-File") == ["LICENSE"]
    classifiers = m.get_all("Classifier", [])
    for c in ("Programming Language :: Python :: 3.11", "Programming Language :: Rust",
              "Topic :: Scientific/Engineering :: Artificial Intelligence"):  # fmt: skip
        assert c in classifiers, c
    requires = [Requirement(r) for r in m.get_all("Requires-Dist", [])]
    base = {r.name.lower() for r in requires if r.marker is None}
    assert base == {"numpy", "pyarrow", "typer", "click", "rich", "tokenizers", "pydantic"}, base
    assert "bm25s" not in {r.name.lower() for r in requires}
    stemmer = [r for r in requires if r.name.lower() == "pystemmer"]
    assert len(stemmer) == 1 and stemmer[0].marker is not None
    assert stemmer[0].marker.evaluate({"extra": "eval"}) and not stemmer[0].marker.evaluate({"extra": "plot"})
    assert "eval" in m.get_all("Provides-Extra", [])


@pytest.mark.slow
def test_wheel_and_sdist_pass_twine_check(wheel, sdist):
    if importlib.util.find_spec("twine") is None:
        pytest.skip("twine is not installed (the dev group has it)")
    out = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", str(wheel), str(sdist)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.count("PASSED") == 2, out.stdout


def test_sdist_holds_the_sources_and_nothing_built(sdist):
    with tarfile.open(sdist) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    for need in ("pyproject.toml", "Cargo.toml", "Cargo.lock", "LICENSE", "README.md",
                 "rust/core/src/lib.rs", "rust/py/src/lib.rs", "python/dense_pt/__init__.py"):  # fmt: skip
        assert need in names, need
    built = [n for n in names if n.startswith(("target/", ".venv")) or n.endswith((".so", ".pyd", ".whl"))]
    assert not built, built


def test_the_smoke_script_knows_wheels_and_sdists_and_refuses_other_files(tmp_path):
    """The workflow passes it both kinds (dist/*.whl, dist/*.tar.gz); the version it expects
    installed is the one the file's name claims."""
    spec = importlib.util.spec_from_file_location("wheel_smoke", SMOKE)
    assert spec and spec.loader
    smoke = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(smoke)
    for name, version in [(f"dense_pt-{VERSION}-{TAG}.whl", VERSION), ("dense_pt-1.2.3.tar.gz", "1.2.3"),
                          ("dense_pt-0.2.0rc1-cp311-abi3-win_amd64.whl", "0.2.0rc1")]:  # fmt: skip
        found = smoke.DIST_NAME.match(name)
        assert found and found["version"] == version, name
    bad = tmp_path / "other-1.0.tar.gz"
    bad.write_text("")
    with pytest.raises(RuntimeError, match="not a dense_pt wheel or sdist"):
        smoke.smoke(bad, tmp_path / "venv")
    assert not (tmp_path / "venv").exists()  # refused before creating anything
