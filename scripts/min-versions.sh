#!/usr/bin/env bash
# The minimum-versions job (issue 13 item 7): a fresh venv with every lower bound of pyproject.toml
# pinned (`pkg==bound`), dense-pt installed editable on top, then the fast tests (-m "not slow").
# The last step of `scripts/dev.sh test` (what CI runs); MINV=0 there skips it.
#   bash scripts/min-versions.sh [pytest args...]
# MINV_VENV (default .venv-min) is the venv; MINV_PIN_TORCH=1 pins torch to its bound too (off by
# default: a torch wheel is hundreds of MB, so the newest cached torch is used and said so).
# MINV_UNPINNED (default "tokenizers"): bounds left to the resolver. tokenizers>=0.19 is the base
# install's bound (no transformers); with the train extra, transformers 4.56 itself needs >= 0.22.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${MINV_VENV:-.venv-min}
CONSTRAINTS="$VENV/min-constraints.txt"

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade "pip>=25.1"

# Every `name>=X` of [project] dependencies and the extras, as `name==X` (the same package listed
# twice with different bounds would conflict here: one bound per package). The dev group's tools
# (pytest, ruff, mypy, ...) are not what a user installs: they resolve freely against these pins.
"$VENV/bin/python" - "$CONSTRAINTS" "${MINV_PIN_TORCH:-0}" "${MINV_UNPINNED-tokenizers}" <<'PY'
import re, sys, tomllib
cfg = tomllib.load(open("pyproject.toml", "rb"))
specs = list(cfg["project"]["dependencies"])
for reqs in cfg["project"]["optional-dependencies"].values():
    specs += reqs
pins = {}
for spec in specs:
    m = re.match(r"^([A-Za-z0-9_.-]+)(\[[^]]*\])?\s*>=\s*([0-9][^,;\s]*)", spec)
    if not m or m.group(1).lower() == "dense-pt":
        continue
    name = m.group(1).lower().replace("_", "-")
    if (name == "torch" and sys.argv[2] != "1") or name in sys.argv[3].split():
        continue
    if pins.get(name, m.group(3)) != m.group(3):
        sys.exit(f"two lower bounds for {name}: {pins[name]} and {m.group(3)}")
    pins[name] = m.group(3)
open(sys.argv[1], "w").write("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
print("pinned:", ", ".join(f"{n}=={v}" for n, v in sorted(pins.items())))
PY

"$VENV/bin/python" -m pip install --progress-bar off -c "$CONSTRAINTS" -e ".[train]" --group dev
"$VENV/bin/python" -m pip list --format=freeze | grep -iE "^($(cut -d= -f1 "$CONSTRAINTS" | paste -sd'|')|torch)==" \
    | sed 's/^/installed: /'
"$VENV/bin/python" -m pytest -q -m "not slow" -p no:cacheprovider "$@"
