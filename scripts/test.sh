#!/usr/bin/env bash
# Install everything the tests need, then run every test (README's test command; CI calls it).
#   bash scripts/test.sh              # every layer (docs/testing.md), then the time of each
#   bash scripts/test.sh --quick      # the unit layer and the LSP tests that need no TVM (~2 min)
#   bash scripts/test.sh tests/lsp    # pytest on what you name (no unit run, no extension tests)
# Uses ./.venv (created if missing) unless a venv is active.
# Environment: ASIGHT_SKIP_INSTALL=1 skips the installs (for quick local reruns).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-$(nproc)}"
quick=""
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
started=$SECONDS
if [ -z "${ASIGHT_SKIP_INSTALL:-}" ]; then
  python -m pip install -q --upgrade pip
  python -m pip install -q -e ".[test]"
  [ -z "$quick" ] && [ -f scripts/install-test-deps.sh ] && bash scripts/install-test-deps.sh
fi
# Bytecode for our own modules now: the suite starts hundreds of Python processes, and where
# PYTHONDONTWRITEBYTECODE is set each of them would compile asight_lsp again (0.25 s of CPU a worker).
python -m compileall -q asight_lsp tests fixtures > /dev/null || true
install_s=$((SECONDS - started))
mkdir -p test-artifacts
status=0
unit_s=0
if [ $# -eq 0 ]; then
  # The pure layer first, in processes where TVM cannot be imported (docs/architecture.md).
  blocked="$(mktemp -d)"
  for m in tvm tvm_ffi; do mkdir -p "$blocked/$m"; echo "raise ImportError('TVM is blocked for tests/unit')" > "$blocked/$m/__init__.py"; done
  t0=$SECONDS
  PYTHONPATH="$blocked${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -q -p no:cacheprovider tests/unit || status=$?
  unit_s=$((SECONDS - t0))
  rm -rf "$blocked"
fi
if [ -n "$quick" ]; then
  python -m pytest -q -p no:cacheprovider -m "not tvm and not slow" tests/lsp || status=$?
  echo "quick layers: $((SECONDS - started)) s"
  exit $status
fi
# Every other layer in one process (session-scoped tuned runs are shared across layers); the unit
# layer already ran above, without TVM.
targets=("$@")
[ $# -eq 0 ] && targets=(--ignore=tests/unit tests)
python -m pytest -q -p no:cacheprovider --junitxml=test-artifacts/pytest.xml "${targets[@]}" || status=$?
ext_s=0
if [ -f vscode-extension/package.json ] && [ -z "${ASIGHT_SKIP_EXTENSION:-}" ] && [ $# -eq 0 ]; then
  t0=$SECONDS
  (cd vscode-extension && npm test) || status=$?
  ext_s=$((SECONDS - t0))
fi
extra=(--extra "install=$install_s")
[ $# -eq 0 ] && extra+=(--extra "unit=$unit_s" --extra "extension-npm=$ext_s")
python scripts/test_times.py test-artifacts/pytest.xml "${extra[@]}" || true
echo "whole run: $((SECONDS - started)) s"
exit $status
