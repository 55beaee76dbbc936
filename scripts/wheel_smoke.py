"""The torch-free smoke test of a built dense-pt distribution, a wheel or an sdist: a fresh virtual
environment, the file installed into it by pip (an sdist compiles the Rust extension with maturin
on the way), then the maskers and the collator run there from plain numpy, with torch absent.

The release workflow (.github/workflows/release.yml) runs it on every wheel whose platform its
runner can execute, and on the sdist; tests/test_wheel.py runs it here, so both run this code.

    python scripts/wheel_smoke.py DIST [--venv DIR]   # DIST: dense_pt-*.whl or dense_pt-*.tar.gz

Prints ``smoke ok: ...`` and exits 0, or prints one line saying what failed and exits 1.
Standard library only: it runs under any CPython >= 3.11 before anything else is installed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

OK = "smoke ok"
# dense_pt-0.1.0-cp311-abi3-....whl / dense_pt-0.1.0.tar.gz: the version the file claims
DIST_NAME = re.compile(r"^dense_pt-(?P<version>[^-]+?)(?:-.+\.whl|\.tar\.gz)$")


def check(expected_version: str) -> str:
    """Run inside the new environment (``python -I``: no PYTHONPATH, no script folder on sys.path,
    so ``dense_pt`` can only be the installed one)."""
    import importlib.metadata
    import importlib.util

    import numpy as np

    import dense_pt
    from dense_pt.collate import Collator
    from dense_pt.masking import importance_mask, nested_masks, replace

    assert importlib.util.find_spec("torch") is None, "torch is importable: the base install must not need it"
    where = Path(dense_pt.__file__).resolve()
    assert Path(sys.prefix).resolve() in where.parents, f"dense_pt imported from {where}, not the install"
    # the single-sourced version: the package metadata (maturin, from Cargo.toml) = the Rust core's
    meta = importlib.metadata.version("dense-pt")
    assert meta == dense_pt.__version__ == expected_version, (meta, dense_pt.__version__, expected_version)

    ids = np.array([[2, 10, 11, 12, 13, 3, 0]])
    att = (ids != 0).astype(np.int64)
    special = np.isin(ids, [2, 3])
    imp = np.array([[0, 5, 1, 4, 2, 0, 0]], dtype=np.float32)
    m = importance_mask(ids, att, imp, 0.5, seed=0, sigma=0.0, special_tokens_mask=special)
    assert m.tolist() == [[False, True, False, True, False, False, False]], m  # the two most important
    enc, dec = nested_masks(ids, att, 0.25, 0.5, seed=1, special_tokens_mask=special)
    assert not (enc & ~dec).any() and dec.sum() == 2, (enc, dec)  # encoder's mask inside the decoder's
    new, labels = replace(ids, m, mask_token_id=4, vocab_size=20, seed=0, special_ids=[0, 1, 2, 3, 4])
    assert ((labels != -100) == m).all() and (new[~m] == ids[~m]).all(), (new, labels)  # only masked change
    values = np.arange(5, 15, dtype=np.uint32)
    offsets = np.array([0, 4, 10], dtype=np.int64)
    special_tokens = {"cls": 2, "sep": 3, "pad": 0, "mask": 4}
    c = Collator.from_arrays(values, offsets, vocab_size=20, special_tokens=special_tokens, method="mlm",
                             whole_word=False)  # fmt: skip
    batch = c([0, 1])
    assert batch["input_ids"].shape == (2, 8), batch["input_ids"].shape  # 6 tokens + [CLS] + [SEP]
    return f"dense-pt {dense_pt.__version__} from {where.parent}"


def venv_python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def smoke(dist: Path, venv: Path) -> str:
    """Install ``dist`` into the new environment ``venv`` and run ``check`` there; raises
    RuntimeError naming the step that failed."""
    found = DIST_NAME.match(dist.name)
    if not found:
        raise RuntimeError(f"{dist}: not a dense_pt wheel or sdist (dense_pt-VERSION-...whl / .tar.gz)")
    base = getattr(sys, "_base_executable", sys.executable)  # not a venv's: a clean one
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    steps = [
        ("create the environment", [base, "-m", "venv", str(venv)]),
        ("install " + dist.name, [str(venv_python(venv)), "-m", "pip", "install", "-q", str(dist.resolve())]),
        ("smoke check", [str(venv_python(venv)), "-I", str(Path(__file__).resolve()), "--check",
                         found["version"]]),
    ]  # fmt: skip
    out = None
    for what, cmd in steps:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            tail = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RuntimeError(f"{what} failed (exit {out.returncode}): {tail}")
    assert out is not None
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dist", nargs="?", type=Path, help="dense_pt-*.whl or dense_pt-*.tar.gz")
    p.add_argument("--venv", type=Path, help="the new environment (default: a temporary folder)")
    p.add_argument("--check", metavar="VERSION", help=argparse.SUPPRESS)  # inside the environment
    args = p.parse_args(argv)
    if args.check:
        print(f"{OK}: {check(args.check)}")
        return 0
    if args.dist is None or not args.dist.is_file():
        p.error(f"no such file: {args.dist}" if args.dist else "give the wheel or sdist to test")
    try:
        if args.venv is not None:
            print(smoke(args.dist, args.venv))
        else:
            with tempfile.TemporaryDirectory(prefix="dense-pt-smoke-") as tmp:
                print(smoke(args.dist, Path(tmp) / "venv"))
    except RuntimeError as exc:
        print(f"wheel_smoke: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
