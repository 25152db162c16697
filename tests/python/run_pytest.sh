#!/bin/sh
# Runs the o1client pytest suite (the folder $1) with the first python3
# that has pytest: $O1_PYTHON, python3 on PATH, then /usr/bin/python3
# (Debian's, with python3-pytest). Exits 77 (skipped) when none has it,
# or when $O1_PY_SKIP says why this build cannot run it.
if [ -n "${O1_PY_SKIP:-}" ]; then
  echo "test_python: skipped: $O1_PY_SKIP"
  exit 77
fi
for py in "${O1_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] && command -v "$py" >/dev/null 2>&1 || continue
  if "$py" -c "import pytest" >/dev/null 2>&1; then
    exec "$py" -m pytest -p no:cacheprovider -q -rs "$1"
  fi
done
echo "test_python: skipped: no python3 with pytest (Debian: python3-pytest)"
exit 77
