"""The package imports, maps native errors onto the Python hierarchy, and the CLI answers."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dense_pt
from dense_pt import _native
from dense_pt.errors import (
    DensePtError,
    DensePtIOError,
    FormatError,
    InvalidArgumentError,
    MismatchError,
)


def test_version_matches_rust_core():
    assert dense_pt.__version__ == _native.__version__
    assert dense_pt.__version__.count(".") == 2


@pytest.mark.parametrize(
    ("kind", "cls", "builtin"),
    [
        ("invalid", InvalidArgumentError, ValueError),
        ("format", FormatError, ValueError),
        ("mismatch", MismatchError, ValueError),
        ("io", DensePtIOError, OSError),
    ],
)
def test_core_errors_map_onto_hierarchy(kind, cls, builtin):
    with pytest.raises(cls) as info:
        _native._raise_core_error(kind, "boom")
    assert isinstance(info.value, DensePtError)
    assert isinstance(info.value, builtin)
    assert "boom" in str(info.value)
    if kind == "io":
        assert info.value.filename == "some/file"


def test_cli_version_and_help():
    out = subprocess.run(
        [sys.executable, "-m", "dense_pt", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"dense-pt {dense_pt.__version__}"
    out = subprocess.run([sys.executable, "-m", "dense_pt", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "demo" in out.stdout


def test_importing_package_does_not_import_torch():
    code = "import dense_pt, dense_pt.cli, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
