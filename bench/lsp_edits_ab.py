"""Latency after edits, this checkout (B) against another revision (A), interleaved in one run.

    python bench/lsp_edits_ab.py [--base REV] [--rounds 3] [--edits 200] [--json OUT]

A is checked out in a temporary git worktree; both sides run this checkout's
``bench/lsp_latency.py`` (the same client, the same keystrokes) against their own server code,
A B A B ... so that the machine's load falls on both alike.  Per side and round: p50 / p99 of the
first codeLens and documentSymbol after a keystroke in the 3,005-line file of 120 modules and in the
3,007-line file of one module, and the server's CPU per keystroke.  Prints each round, then B/A
ratios of the per-round medians (the geometric mean and the range over rounds) and the load.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("after_edit", "after_edit_one_module")
FIGURES = [(case, kind, stat) for case in CASES for kind in ("codeLens", "documentSymbol") for stat in ("p50_ms", "p99_ms")]


def run_side(root: Path, edits: int, out: Path) -> dict:
    bench = root / "bench" / "lsp_latency.py"
    cmd = [sys.executable, str(bench), "--requests", "20", "--edits", str(edits), "--stall-lines", "0",
           "--no-tuning", "--initialize-repeats", "1", "--json", str(out)]
    subprocess.run(cmd, cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "PYTHONPATH": str(root)})
    return json.loads(out.read_text())


def figures(result: dict) -> dict:
    out = {f"{case}.{kind}.{stat}": result[case][kind][stat] for case, kind, stat in FIGURES if case in result}
    for case in CASES:
        if case in result:
            out[f"{case}.cpu_ms_per_keystroke"] = result[case]["server_cpu_ms_per_keystroke"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="0edf62c", help="revision A (default: main before this work)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "lsp_edits_ab.json"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="asight-ab-"))
    base = tmp / "base"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.copy(ROOT / "bench" / "lsp_latency.py", base / "bench" / "lsp_latency.py")
    rows = {"A": [], "B": []}
    load = [os.getloadavg()]
    try:
        for r in range(args.rounds):
            for side, root in (("A", base), ("B", ROOT)):
                rows[side].append(figures(run_side(root, args.edits, tmp / f"{side}{r}.json")))
                load.append(os.getloadavg())
                print(f"round {r + 1} {side}: " + ", ".join(f"{k}={v}" for k, v in rows[side][-1].items()), flush=True)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], check=False)
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for key in rows["B"][0]:
        a = [row[key] for row in rows["A"] if key in row]
        b = [row[key] for row in rows["B"]]
        ratios = [y / x for x, y in zip(a, b) if x]
        if not ratios:
            continue
        summary[key] = {"A_median": statistics.median(a), "B_median": statistics.median(b),
                        "B_over_A_geomean": round(math.exp(statistics.fmean(math.log(q) for q in ratios)), 3),
                        "B_over_A_range": [round(min(ratios), 3), round(max(ratios), 3)]}
        print(f"{key}: A {summary[key]['A_median']} -> B {summary[key]['B_median']}  "
              f"B/A {summary[key]['B_over_A_geomean']} (rounds {summary[key]['B_over_A_range']})")
    print("load average (1, 5, 15 min) before and after each side:", [tuple(round(x, 2) for x in l) for l in load])
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"base": args.base, "rounds": rows, "summary": summary, "load": load}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
