"""Webview tests: the panels drawn in headless Chromium (tests/webview/render.mjs) from payload fixtures."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXT = ROOT / "vscode-extension"
ARTIFACTS = ROOT / "test-artifacts" / "webview"
CHROMIUM = Path("/usr/bin/chromium")


def missing() -> str | None:
    """Why the webview tests cannot run here (None: they can)."""
    if shutil.which("node") is None:
        return "node is not installed (run scripts/install-test-deps.sh)"
    if not (EXT / "node_modules" / "playwright-core").is_dir() or not (EXT / "node_modules" / "esbuild").is_dir():
        return "vscode-extension/node_modules is missing (run scripts/install-test-deps.sh)"
    if not CHROMIUM.exists():
        return "/usr/bin/chromium is missing (run scripts/install-test-deps.sh)"
    return None


@pytest.fixture(scope="session")
def extension_build() -> Path:
    """The extension's bundles, built fresh (esbuild, well under a second)."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    subprocess.run(["node", "build.mjs"], cwd=EXT, check=True, capture_output=True, text=True, timeout=120)
    return EXT / "out"


@pytest.fixture(scope="session")
def rendered(extension_build) -> dict:
    """DOM facts of every rendered case (one Chromium session for all of them)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["node", str(Path(__file__).with_name("render.mjs")), str(ARTIFACTS)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)["cases"]
