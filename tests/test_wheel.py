"""Packaging: the release wheel installs into a fresh virtualenv without torch, and the maskers and
the collator work there from plain numpy."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

CHECK = textwrap.dedent(
    """
    import importlib.util
    import numpy as np
    from dense_pt.masking import importance_mask, nested_masks, random_mask, replace, span_crop
    from dense_pt.collate import Collator

    assert importlib.util.find_spec("torch") is None, "torch is importable"
    ids = np.array([[2, 10, 11, 12, 13, 3, 0]])
    att = (ids != 0).astype(np.int64)
    special = np.isin(ids, [2, 3])
    imp = np.array([[0, 5, 1, 4, 2, 0, 0]], dtype=np.float32)
    m = importance_mask(ids, att, imp, 0.5, seed=0, sigma=0.0, special_tokens_mask=special)
    assert m.tolist() == [[False, True, False, True, False, False, False]], m
    enc, dec = nested_masks(ids, att, 0.25, 0.5, seed=1, special_tokens_mask=special)
    assert not (enc & ~dec).any() and dec.sum() == 2
    new, labels = replace(ids, m, mask_token_id=4, vocab_size=20, seed=0, special_ids=[0, 1, 2, 3, 4])
    assert ((labels != -100) == m).all()
    values = np.arange(5, 15, dtype=np.uint32)
    offsets = np.array([0, 4, 10], dtype=np.int64)
    c = Collator.from_arrays(values, offsets, vocab_size=20,
                             special_tokens={"cls": 2, "sep": 3, "pad": 0, "mask": 4}, method="mlm",
                             whole_word=False)
    assert c([0, 1])["input_ids"].shape == (2, 8)
    print("wheel ok")
    """
)


def _maturin() -> list[str]:
    """maturin from this interpreter's environment (its bin folder, then PATH, then ``-m``); the
    test is skipped when none is installed."""
    import importlib.util

    here = shutil.which("maturin", path=str(Path(sys.executable).parent)) or shutil.which("maturin")
    if here:
        return [here]
    if importlib.util.find_spec("maturin") is not None:
        return [sys.executable, "-m", "maturin"]
    pytest.skip(f"maturin is not installed beside {sys.executable} nor on PATH (pip install maturin)")


@pytest.mark.slow
def test_wheel_installs_and_works_without_torch(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [*_maturin(), "build", "--release", "--quiet", "--out", str(dist)],
        cwd=ROOT,
        check=True,
        timeout=900,
    )
    (wheel,) = dist.glob("dense_pt-*.whl")
    venv = tmp_path / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # Base dependencies come from the package index; torch is not one of them.
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(wheel)], check=True, timeout=600)
    out = subprocess.run([str(py), "-c", CHECK], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "wheel ok"
