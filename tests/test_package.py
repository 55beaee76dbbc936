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
    InternalError,
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
        ("internal", InternalError, RuntimeError),
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


@pytest.mark.parametrize("in_pool", [False, True])
def test_a_panic_in_the_core_is_an_internal_error_not_a_crash(in_pool, capfd):
    """On the calling thread or on a rayon worker: an InternalError naming the place, nothing on
    stderr, and the module keeps working (it was a bare InvalidArgumentError or a PanicException)."""
    with pytest.raises(InternalError) as info:
        _native._panic_for_test(in_pool)
    msg = str(info.value)
    assert msg.startswith("internal error in dense-pt (a bug; please report it")
    assert "index out of bounds" in msg and "rust/core/src/error.rs:" in msg
    assert "panicked" not in capfd.readouterr().err
    assert _native.file_checksum(__file__)  # still usable


def test_cli_version_and_help():
    out = subprocess.run(
        [sys.executable, "-m", "dense_pt", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == f"dense-pt {dense_pt.__version__}"
    out = subprocess.run([sys.executable, "-m", "dense_pt", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "demo" in out.stdout


def test_importing_package_does_not_import_torch():
    """Nor numpy, pyarrow or tokenizers: `dense-pt --help` and shell completion (which imports the
    command tree on every <TAB>) stay fast; the commands import them when they run."""
    heavy = ("torch", "numpy", "pyarrow", "tokenizers", "transformers")
    code = f"import dense_pt, dense_pt.cli, sys; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
