"""Print the HTML report (views/report.py) of the webview fixtures' payloads (run mbr128) on stdout.

Used by bench/screenshots.mjs; the payloads are vscode-extension/test/fixtures/*.json, so the report
and the panels are pictures of the same data.
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asight_lsp.views.report import report_html  # noqa: E402


def main() -> None:
    fx = ROOT / "vscode-extension" / "test" / "fixtures"
    load = lambda name: json.loads((fx / f"{name}.json").read_text())  # noqa: E731
    payloads = {k: load(k) for k in ("searchSpace", "loopView", "stageGraph", "principles")}
    sys.stdout.write(report_html(payloads, hotspots=load("hotspots")))


if __name__ == "__main__":
    main()
