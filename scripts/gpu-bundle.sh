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
# With --study it also packs what the GPU study (benches/gpu_study.py, issue 29) reads, in
# $OUT/study: all-MiniLM-L6-v2 with its tokenizer, weights in fp16 (restored to fp32 there), and BEIR
# SciFact's corpus, queries and train judgements xz-compressed (STUDY_MODEL, STUDY_DATA: other
# ones) and the wheels of ir-measures and pytrec-eval-terrier. --no-wheels leaves the wheels out (the tests check the packing and the size check alone).
#   bash scripts/gpu-bundle.sh            # then carry .whl to the machine with the working tree
#   bash scripts/gpu-bundle.sh --study    # the same, plus the study's model and data
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-.venv/bin/python}
OUT=${OUT_DIR:-.whl}
LIMIT_MIB=${LIMIT_MIB:-64}
STUDY=0
WHEELS=1
for arg in "$@"; do
    case "$arg" in
        --study) STUDY=1 ;;
        --no-wheels) WHEELS=0 ;;
        *) echo "gpu-bundle: unknown option $arg (--study, --no-wheels)" >&2; exit 2 ;;
    esac
done

# maturin beside the interpreter, else on PATH (the dev group installs it)
MATURIN=$(dirname "$PY")/maturin
[ -x "$MATURIN" ] || MATURIN=$(command -v maturin)

rm -rf "$OUT"
mkdir -p "$OUT"
if [ "$WHEELS" = 0 ]; then
    :
elif "$PY" -c "import ziglang" 2>/dev/null; then
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
    [ "$WHEELS" = 1 ] || break
    version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$pkg")
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_17_x86_64 --dest "$OUT" "$pkg==$version"
done
if [ "$STUDY" = 1 ] && [ "$WHEELS" = 1 ]; then
    # the study evaluates with ir-measures (pytrec_eval under it), which the machine lacks; faiss,
    # sentence-transformers (scipy) and matplotlib are too large to carry: dense-pt does without them
    for pkg in ir-measures pytrec-eval-terrier; do
        version=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$pkg")
        "$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --dest "$OUT" "$pkg==$version"
    done
fi
if [ "$STUDY" = 1 ]; then
    "$PY" benches/gpu_study.py --pack "$OUT/study" ${STUDY_MODEL:+--model "$STUDY_MODEL"} \
        ${STUDY_DATA:+--data "$STUDY_DATA"} >&2
fi
ls -lR "$OUT" >&2
total=$(du -sk "$OUT" | cut -f1)
echo "$OUT: $(ls "$OUT" | grep -c '\.whl$' || true) wheels, $((total / 1024)) MiB (limit $LIMIT_MIB MiB)" >&2
if [ "$total" -ge $((LIMIT_MIB * 1024)) ]; then
    echo "gpu-bundle: $OUT is over $LIMIT_MIB MiB" >&2
    exit 1
fi
