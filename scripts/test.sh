#!/usr/bin/env bash
# Install everything the tests need, then run every test (README's test command; CI calls it).
#   bash scripts/test.sh            # uses ./.venv (created if missing) unless a venv is active
# Environment: ASIGHT_SKIP_INSTALL=1 skips the installs (for quick local reruns).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${VIRTUAL_ENV:-}" ]; then
  [ -x .venv/bin/python ] || python3 -m venv .venv
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
export TVM_NUM_THREADS="${TVM_NUM_THREADS:-$(nproc)}"
if [ -z "${ASIGHT_SKIP_INSTALL:-}" ]; then
  python -m pip install -q --upgrade pip
  python -m pip install -q -e ".[test]"
  [ -f scripts/install-test-deps.sh ] && bash scripts/install-test-deps.sh
fi
mkdir -p test-artifacts
status=0
if [ $# -eq 0 ]; then
  # The pure layer first, in processes where TVM cannot be imported (docs/architecture.md).
  blocked="$(mktemp -d)"
  for m in tvm tvm_ffi; do mkdir -p "$blocked/$m"; echo "raise ImportError('TVM is blocked for tests/unit')" > "$blocked/$m/__init__.py"; done
  PYTHONPATH="$blocked${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -q -p no:cacheprovider tests/unit || status=$?
  rm -rf "$blocked"
fi
python -m pytest -q -p no:cacheprovider --junitxml=test-artifacts/pytest.xml "$@" || status=$?
if [ -f vscode-extension/package.json ] && [ -z "${ASIGHT_SKIP_EXTENSION:-}" ] && [ $# -eq 0 ]; then
  (cd vscode-extension && npm test) || status=$?
fi
exit $status
