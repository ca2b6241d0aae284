"""Write the webview test fixtures (test/fixtures/*.json) from real payloads of a recorded run.

    /work/venv/bin/python vscode-extension/scripts/make-fixtures.py [RUN_DIR] [SOURCE_FILE]

Default run: fixtures/runs/mbr128 (matmul + bias_add + relu, 40 measured candidates). The payloads
are what asight_lsp.views builds (searchSpace, loopView, stageGraph, principles) and what
`asight hotspots --json` prints (profiled on a copy of the run, so the fixture run is untouched; the
stage graph comes from that profiled copy, so its blocks carry measured costs).
"*.hostile.json" variants rename the blocks to HTML/script strings everywhere, as a TVMScript file
with such block names would; the webview tests check nothing of them executes.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "vscode-extension" / "test" / "fixtures"
HOSTILE = {
    "matmul": '<img src=x onerror="window.__pwned=1">',
    "bias_add": "<script>window.__pwned=2</script>",
    "relu": '"><svg onload="window.__pwned=3">',
}


def payloads(run_dir: Path, source: Path) -> dict:
    sys.path.insert(0, str(REPO))
    from asight_lsp.store.runs import Run
    from asight_lsp.services.run_data import load_run
    from asight_lsp.views.loops import loop_view, stage_graph
    from asight_lsp.views.principles import principles
    from asight_lsp.views.searchspace import search_space

    data = load_run(Run(run_dir), extract=False)
    out = {"searchSpace": search_space(data), "loopView": loop_view(data), "stageGraph": stage_graph(data),
           "principles": principles(data)}
    out["searchSpace"].pop("timings", None)
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "runs" / run_dir.name
        shutil.copytree(run_dir, copy)
        env = dict(os.environ, TVM_NUM_THREADS=os.environ.get("TVM_NUM_THREADS", "2"))
        text = subprocess.run([sys.executable, "-m", "asight_lsp", "hotspots", str(source), "--run", str(copy), "--json"],
                              cwd=tmp, env=env, check=True, capture_output=True, text=True).stdout
        # The stage graph of the profiled copy: its blocks carry their measured cost.
        out["stageGraph"] = stage_graph(load_run(Run(copy), extract=False))
    hot = json.loads(text)
    hot["file"] = str(source.relative_to(REPO))
    for part in hot.get("parts", []):
        part.pop("record", None)
    out["hotspots"] = hot
    return out


def hostile(value):
    """The same payload with every block name replaced by an HTML/script string."""
    text = json.dumps(value)
    for name, evil in HOSTILE.items():
        text = text.replace(json.dumps(name)[1:-1], json.dumps(evil)[1:-1])
    return json.loads(text)


def main() -> int:
    run_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "fixtures" / "runs" / "mbr128"
    source = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "fixtures" / "matmul_bias_relu.py"
    OUT.mkdir(parents=True, exist_ok=True)
    for kind, payload in payloads(run_dir, source.resolve()).items():
        (OUT / f"{kind}.json").write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n")
        (OUT / f"{kind}.hostile.json").write_text(json.dumps(hostile(payload), indent=1, ensure_ascii=False) + "\n")
    (OUT / "unavailable.json").write_text(json.dumps(
        {"schema": "asight.searchSpace/1", "status": "unavailable", "message": "no run yet: tune the function first"},
        indent=1) + "\n")
    print(f"wrote {len(list(OUT.glob('*.json')))} fixtures to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
