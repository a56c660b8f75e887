# Sourced by compare.sh and suite.sh: sets PYTHON to a Python with matplotlib, from PyPI in a
# venv under .cache/, or to the system's python3 (the reports then have no plots).
VENV="${WARDEN_CACHE:-$REPO/.cache}/bench-venv"
MATPLOTLIB_VERSION=3.11.2

PYTHON=python3
if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c 'import matplotlib' 2>/dev/null; then
  PYTHON="$VENV/bin/python"
elif python3 -m venv "$VENV" >&2 && "$VENV/bin/pip" install -q "matplotlib==$MATPLOTLIB_VERSION" >&2; then
  PYTHON="$VENV/bin/python"
else
  echo "$(basename "$0"): could not install matplotlib into $VENV; the report will have no plots" >&2
fi
