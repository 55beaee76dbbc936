"""The release workflow, read as data: the platforms it builds, the smoke test each wheel and the
sdist get, and when and how it publishes. The builds themselves run only on GitHub's runners; what
this machine can build is tested in tests/test_wheel.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml  # PyYAML: a dependency of mkdocs (the dev group)

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
SMOKE = "python scripts/wheel_smoke.py"
# (platform, what maturin-action builds, whether the runner can run the full smoke)
PLATFORMS = {
    "manylinux-x86_64": ("x86_64", "2_17", "full"),
    "manylinux-aarch64": ("aarch64", "2_17", "full"),
    "musllinux-x86_64": ("x86_64", "musllinux_1_2", "musl"),
    "macos-x86_64": ("x86_64", None, "full"),
    "macos-arm64": ("aarch64", None, "full"),
    "windows-x64": ("x64", None, "full"),
}


@pytest.fixture(scope="module")
def wf() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def _steps(job: dict[str, Any], uses: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if s.get("uses", "").startswith(uses)]


def _runs(job: dict[str, Any], text: str) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if text in s.get("run", "")]


def test_every_platform_is_built_abi3_and_smoke_tested(wf):
    job = wf["jobs"]["wheels"]
    entries = {e["platform"]: e for e in job["strategy"]["matrix"]["include"]}
    assert set(entries) == set(PLATFORMS)
    for name, (target, manylinux, smoke) in PLATFORMS.items():
        e = entries[name]
        assert (e["target"], e.get("manylinux"), e["smoke"]) == (target, manylinux, smoke), name
    runners = {name: e["runner"] for name, e in entries.items()}
    assert runners["manylinux-aarch64"].endswith("-arm") and runners["macos-x86_64"].endswith("-intel")
    assert runners["windows-x64"].startswith("windows") and runners["macos-arm64"].startswith("macos")
    (build,) = _steps(job, "PyO3/maturin-action@")
    assert build["with"]["target"] == "${{ matrix.target }}"
    assert build["with"]["manylinux"] == "${{ matrix.manylinux }}"
    assert "--release" in build["with"]["args"] and "--out dist" in build["with"]["args"]
    (full,) = _runs(job, SMOKE)
    assert full["if"] == "matrix.smoke == 'full'" and full["run"].strip() == f"{SMOKE} dist/*.whl"
    (musl,) = [s for s in job["steps"] if s.get("if") == "matrix.smoke == 'musl'"]
    assert "alpine" in musl["run"] and "--no-deps dist/*.whl" in musl["run"] and "_native" in musl["run"]
    # abi3: one wheel per platform, for the oldest CPython the package claims, smoke-tested on it
    assert wf["env"]["PYTHON_VERSION"] == "3.11"
    cargo = (ROOT / "Cargo.toml").read_text(encoding="utf-8")
    assert 'features = ["abi3-py311"]' in cargo


def test_the_sdist_is_built_and_compiled_by_pip_in_the_smoke(wf):
    job = wf["jobs"]["sdist"]
    (build,) = _steps(job, "PyO3/maturin-action@")
    assert build["with"]["command"] == "sdist"
    (smoke,) = _runs(job, SMOKE)
    assert smoke["run"].strip() == f"{SMOKE} dist/*.tar.gz"
    assert job["steps"].index(build) < job["steps"].index(smoke)


def test_publishes_on_a_version_tag_only_by_trusted_publishing(wf):
    on = wf[True] if True in wf else wf["on"]  # YAML 1.1 reads the key `on` as True
    assert on["push"]["tags"] == ["v*"]
    job = wf["jobs"]["publish"]
    assert set(job["needs"]) == {"sdist", "wheels"}
    assert "startsWith(github.ref, 'refs/tags/v')" in job["if"] and "github.event_name == 'push'" in job["if"]
    assert job["permissions"] == {"id-token": "write"}  # OIDC for PyPI, nothing else
    assert wf["permissions"] == {"contents": "read"}  # every other job reads only
    (publish,) = _steps(job, "pypa/gh-action-pypi-publish@")
    assert "with" not in publish or "password" not in publish["with"]  # no stored token
    assert job["steps"][-1] is publish
    assert _runs(job, "twine check --strict dist/*") and _runs(job, "GITHUB_REF_NAME#v")
    # every platform's wheel and the sdist reach the upload
    (download,) = _steps(job, "actions/download-artifact@")
    assert download["with"]["pattern"] == "dist-*" and download["with"]["merge-multiple"] is True
    uploads = [
        s["with"]["name"]
        for j in ("sdist", "wheels")
        for s in _steps(wf["jobs"][j], "actions/upload-artifact@")
    ]
    assert uploads == ["dist-sdist", "dist-wheel-${{ matrix.platform }}"]
    assert f"-eq {len(PLATFORMS)}" in _runs(job, "GITHUB_REF_NAME#v")[0]["run"]
