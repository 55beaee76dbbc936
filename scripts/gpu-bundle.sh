#!/usr/bin/env bash
# What a GPU machine without a Rust toolchain and without pydantic needs to run dense-pt's device
# check (benches/gpu_check.py; BENCHMARKS.md "Running the device check"), in .whl/ (ignored by git):
#   - the dense-pt wheel, built here (abi3: one wheel for CPython 3.11 and later, so 3.12 there;
#     manylinux_2_17 when the ziglang package is installed beside $PY, else this machine's glibc);
#   - pydantic and what it needs (pydantic-core, annotated-types, typing-inspection,
#     typing-extensions) as CPython 3.12 manylinux x86_64 wheels, at the versions installed here
#     (the ones the tests ran with).
# torch, transformers, tokenizers, pyarrow, typer (and numpy, rich, safetensors through them) are
# the machine's own. The folder must stay under 64 MiB (what a run may carry); the script checks.
#   bash scripts/gpu-bundle.sh            # then carry .whl to the machine with the working tree
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
OUT=${OUT_DIR:-.whl}
LIMIT_MIB=64

# maturin beside the interpreter, else on PATH (the dev group installs it)
MATURIN=$(dirname "$PY")/maturin
[ -x "$MATURIN" ] || MATURIN=$(command -v maturin)

rm -rf "$OUT"
mkdir -p "$OUT"
if "$PY" -c "import ziglang" 2>/dev/null; then
    # zig links against glibc 2.17's symbols: the wheel installs on any Linux of the last decade
    ZIGBIN=$(mktemp -d)
    trap 'rm -rf "$ZIGBIN"' EXIT
    printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" > "$ZIGBIN/zig"
    chmod +x "$ZIGBIN/zig"
    PATH="$ZIGBIN:$PATH" "$MATURIN" build --release --quiet --zig --compatibility manylinux_2_17 \
        --interpreter "$PY" --out "$OUT" >&2
else
    # linked here: the wheel needs this machine's glibc or newer (its tag says which); `pip install
    # ziglang` beside $PY makes the portable one
    echo "gpu-bundle: no ziglang beside $PY: the wheel is tagged with this machine's glibc" >&2
    "$MATURIN" build --release --quiet --interpreter "$PY" --out "$OUT" >&2
fi
for pkg in pydantic pydantic-core annotated-types typing-inspection typing-extensions; do
    version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$pkg")
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --dest "$OUT" "$pkg==$version"
done
ls -l "$OUT" >&2
total=$(du -sk "$OUT" | cut -f1)
echo "$OUT: $(ls "$OUT" | wc -l) wheels, $((total / 1024)) MiB (limit $LIMIT_MIB MiB)" >&2
if [ "$total" -ge $((LIMIT_MIB * 1024)) ]; then
    echo "gpu-bundle: $OUT is over $LIMIT_MIB MiB" >&2
    exit 1
fi
