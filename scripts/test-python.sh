#!/usr/bin/env bash
# Tests the Python binding (crates/shale-py) the way a user gets it: builds a release wheel
# with maturin, installs it into a throwaway virtualenv and runs the pytest suite against it.
#
# Needs python3 (3.8 or later, with venv and pip) and PyPI for maturin and pytest.
# Set PYTHON to choose the interpreter; extra arguments go to pytest (e.g. -k snapshot).
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
# Leave no __pycache__ in the source tree.
export PYTHONDONTWRITEBYTECODE=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== python binding: virtualenv with maturin and pytest ($("$python" --version))"
"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet --disable-pip-version-check "maturin>=1.5,<2" "pytest>=7"

echo "== python binding: build the wheel (release) and install it"
"$work/venv/bin/maturin" build --release --quiet \
  --manifest-path crates/shale-py/Cargo.toml \
  --interpreter "$venv_python" \
  --out "$work/wheels"
"$venv_python" -m pip install --quiet --disable-pip-version-check "$work"/wheels/shale-*.whl

echo "== python binding: pytest"
# From the temporary directory, so that `import shale` finds the installed wheel.
cd "$work"
"$venv_python" -m pytest -q -p no:cacheprovider "$OLDPWD/crates/shale-py/tests" "$@"
