"""Do all the places that show a run's speed-up agree?  (docs/measurement.md)

For each workload: tune it with a small budget while a background loop keeps one core busy, then
read the speed-up (untuned / tuned) where a user reads it:

* ``tune``     — the summary ``asight tune`` prints;
* ``profile``  — ``asight profile --run R``;
* ``report``   — the header of ``asight report``'s HTML page;
* ``lens``     — the result code lens of a real ``asight serve --stdio`` server (JSON-RPC client here);
* ``again``    — ``asight profile --remeasure`` right after, still under load (a second measurement:
  how reproducible the figure is, not a place that shows the first one);
* ``quiet``    — ``asight profile --remeasure`` once the background loop is stopped (``--quiet``).

Prints one row per workload and a summary (direction agreement, largest pairwise difference among
tune/profile/report/lens, and against the re-measurements), and writes the figures as JSON.

    python bench/consistency.py [--trials 16] [--relax-trials 24] [--only NAME ...] [--no-load] [--quiet]
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIX, OWN = ROOT / "fixtures", ROOT / "bench" / "workloads"
WORKLOADS = [  # (file, kind); the fixtures the tests use, then workloads of this bench
    (FIX / "matmul64.py", "tir"), (FIX / "matmul_bias_relu.py", "tir"), (FIX / "softmax.py", "tir"),
    (FIX / "batch_matmul.py", "tir"), (FIX / "conv2d_nhwc.py", "tir"), (FIX / "depthwise_conv2d.py", "tir"),
    (FIX / "three_kernels.py", "tir"), (FIX / "relax_cnn.py", "relax"),
    (OWN / "layernorm.py", "tir"), (OWN / "relax_mlp_repeated.py", "relax"), (OWN / "relax_dense_layernorm.py", "relax"),
]
PLACES = ("tune", "profile", "report", "lens")
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS", str(os.cpu_count()))}
FASTER = re.compile(r"(\d+(?:\.\d+)?)× (faster|vs untuned)")
SLOWER = re.compile(r"(\d+(?:\.\d+)?)× slower")
SAME = re.compile(r"no measurable difference \((\d+(?:\.\d+)?)×|≈ untuned")


def asight(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def read_speedup(text: str, exact: float | None = None) -> tuple[str, float | None]:
    """(verdict, speed-up) from the words every place uses (analysis/measurement.py)."""
    if m := SLOWER.search(text):
        return "slower", 1 / float(m.group(1))
    if m := SAME.search(text):
        return "same", float(m.group(1)) if m.group(1) else exact
    if m := FASTER.search(text):
        return "faster", float(m.group(1))
    return "none", None


# --------------------------------------------------------------------------- places


def from_tune(out: str) -> tuple[str, float | None]:
    line = next((l for l in out.splitlines() if l.startswith("measured ")), "")
    return read_speedup(line)


def from_profile(work: Path, src: Path, run_dir: str, remeasure: bool = False) -> tuple[str, float | None]:
    args = ["profile", str(src), "--run", run_dir, "--no-stages", "--json"] + (["--remeasure"] if remeasure else [])
    proc = asight(*args, cwd=work)
    if proc.returncode not in (0, 1):
        return "error: " + proc.stderr.strip()[-200:], None
    summary = json.loads(proc.stdout)["summary"]
    return summary.get("verdict") or "none", summary.get("speedup")


def from_report(work: Path, src: Path, run_dir: str) -> tuple[str, float | None]:
    out = work / "report.html"
    proc = asight("report", str(src), "--run", run_dir, "-o", str(out), "--no-hotspots", cwd=work)
    if proc.returncode != 0:
        return "error: " + proc.stderr.strip()[-200:], None
    head = re.search(r'<span class="headline">(.*?)</span>', out.read_text())
    return read_speedup(html.unescape(head.group(1)) if head else "")


class LspClient:
    """A minimal JSON-RPC client over stdio (Content-Length frames) for ``asight serve --stdio``."""

    def __init__(self, cwd: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "asight_lsp", "serve", "--stdio"], cwd=cwd, env=ENV,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.next_id = 0

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.proc.stdin.flush()

    def receive(self) -> dict:
        length = 0
        while (line := self.proc.stdout.readline().strip()):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.proc.stdout.read(length))

    def request(self, method: str, params: dict, timeout: float = 120) -> dict:
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = self.receive()
            if msg.get("id") == rid and "method" not in msg:
                return msg
            if "method" in msg and "id" in msg:      # a server request (progress, refresh): answer it
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
        raise TimeoutError(method)

    def close(self) -> None:
        try:
            self.request("shutdown", {}, timeout=10)
            self.send({"jsonrpc": "2.0", "method": "exit"})
        finally:
            self.proc.kill()
            self.proc.wait()


def from_lens(work: Path, src: Path) -> tuple[str, float | None, str]:
    client = LspClient(work)
    try:
        client.request("initialize", {"processId": None, "rootUri": work.as_uri(), "capabilities": {},
                                      "initializationOptions": {"storeRoot": str(work / ".asight"), "trusted": True}})
        client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        client.send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": src.as_uri(), "languageId": "python", "version": 1, "text": src.read_text()}}})
        lenses = client.request("textDocument/codeLens", {"textDocument": {"uri": src.as_uri()}})["result"] or []
    finally:
        client.close()
    titles = [lens["command"]["title"] for lens in lenses if "trials" in lens["command"]["title"]]
    title = titles[0] if titles else ""
    return (*read_speedup(title), title)


# --------------------------------------------------------------------------- one workload


def one(src: Path, kind: str, trials: int, base: Path) -> dict:
    work = base / src.stem
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    local = work / src.name
    shutil.copy(src, local)
    started = time.perf_counter()
    proc = asight("tune", str(local), "--trials", str(trials), "--work-dir", str(work / ".asight"), "--seed", "0",
                  cwd=work)
    row = {"workload": src.stem, "kind": kind, "trials": trials, "tune_s": round(time.perf_counter() - started, 1)}
    m = re.search(r"^run\s+(\S+)\s+\((.+)\)$", proc.stdout, re.M)
    if proc.returncode != 0 or not m:
        row["error"] = (proc.stderr.strip() or proc.stdout.strip())[-300:]
        return row
    run_dir = m.group(2)
    meta = json.loads((Path(run_dir) / "run.json").read_text())
    record = meta.get("measurement") or {}
    row.update(record_speedup=(record.get("speedup") or {}).get("estimate"), ci=(record.get("speedup") or {}).get("ci"),
               verdict=record.get("verdict"), busy=(record.get("load") or {}).get("busy"),
               other_cores=(record.get("load") or {}).get("other_cores"))
    row["tune"] = from_tune(proc.stdout)
    row["profile"] = from_profile(work, local, run_dir)
    row["report"] = from_report(work, local, run_dir)
    verdict, value, title = from_lens(work, local)
    row["lens"], row["lens_title"] = (verdict, value), title
    row["again"] = from_profile(work, local, run_dir, remeasure=True)
    row["where"] = [str(work), str(local), run_dir]
    return row


def agreement(row: dict) -> dict:
    """Direction agreement and the largest relative difference among the places, and vs re-measurements."""
    shown = [row[p] for p in PLACES if isinstance(row.get(p), (list, tuple))]
    verdicts = {v for v, _ in shown}
    values = [s for _, s in shown if s]
    spread = (max(values) / min(values) - 1) if len(values) == len(PLACES) else None
    again = row.get("again") or (None, None)
    drift = abs(again[1] / row["record_speedup"] - 1) if again[1] and row.get("record_speedup") else None
    return {"same_direction": len(verdicts) == 1 and "none" not in verdicts, "max_diff": spread,
            "again_same_direction": again[0] == row.get("verdict"), "again_diff": drift}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--relax-trials", type=int, default=24)
    ap.add_argument("--only", nargs="*", help="workload names (file stems)")
    ap.add_argument("--no-load", action="store_true", help="no background loop")
    ap.add_argument("--quiet", action="store_true", help="also re-measure once the background loop has stopped")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "consistency.json"))
    args = ap.parse_args()
    base = ROOT / "bench" / "results" / "consistency"
    chosen = [(f, k) for f, k in WORKLOADS if not args.only or f.stem in args.only]
    loads = [os.getloadavg()[0]]
    spinner = None if args.no_load else subprocess.Popen([sys.executable, "-c", "while True: pass"])
    rows = []
    try:
        for src, kind in chosen:
            rows.append(one(src, kind, args.relax_trials if kind == "relax" else args.trials, base))
            loads.append(os.getloadavg()[0])
            print(f"{rows[-1]['workload']}: done in {rows[-1]['tune_s']} s (load {loads[-1]:.2f})", file=sys.stderr)
    finally:
        if spinner:
            spinner.kill()
            spinner.wait()
    if args.quiet:
        time.sleep(5)
        for row in rows:
            if "where" in row:
                work, local, run_dir = row["where"]
                row["quiet"] = from_profile(Path(work), Path(local), run_dir, remeasure=True)
    for row in rows:
        if "error" not in row:
            row.update(agreement(row))
    report(rows, loads, args)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": rows, "loadavg": loads, "background_loop": not args.no_load,
                                          "cpu_count": os.cpu_count()}, indent=2))
    print(f"figures: {args.out}")
    return 0


def _cell(value) -> str:
    if not isinstance(value, (list, tuple)):
        return "-"
    verdict, speed = value
    return f"{speed:.2f} {verdict}" if speed else verdict[:14]


def report(rows: list[dict], loads: list[float], args) -> None:
    print(f"\nbackground loop on one core: {'no' if args.no_load else 'yes'}; load average during the bench "
          f"{min(loads):.2f}-{max(loads):.2f} on {os.cpu_count()} cores\n")
    head = f"{'workload':<22}{'kind':<6}{'trials':>6}  {'record (95% CI)':<27}" + "".join(f"{p:<15}" for p in PLACES)
    print(head + f"{'again':<15}{'quiet':<15}{'agree':<6}{'maxdiff':>8}{'again':>8}")
    for row in rows:
        if "error" in row:
            print(f"{row['workload']:<22}{row['kind']:<6}{row['trials']:>6}  error: {row['error'][:80]}")
            continue
        ci = row.get("ci") or [0, 0]
        rec = f"{row['record_speedup']:.2f} ({ci[0]:.2f}-{ci[1]:.2f}){' busy' if row.get('busy') else ''}"
        diff = f"{row['max_diff'] * 100:.1f}%" if row.get("max_diff") is not None else "-"
        again = f"{row['again_diff'] * 100:.1f}%" if row.get("again_diff") is not None else "-"
        print(f"{row['workload']:<22}{row['kind']:<6}{row['trials']:>6}  {rec:<27}"
              + "".join(f"{_cell(row.get(p)):<15}" for p in PLACES)
              + f"{_cell(row.get('again')):<15}{_cell(row.get('quiet')):<15}{'yes' if row['same_direction'] else 'NO':<6}"
              + f"{diff:>8}{again:>8}")
    ok = [r for r in rows if "error" not in r]
    if ok:
        agree = sum(r["same_direction"] for r in ok)
        within = sum(1 for r in ok if r["max_diff"] is not None and r["max_diff"] <= 0.10)
        again = sum(r["again_same_direction"] for r in ok)
        print(f"\nplaces agree on the direction: {agree}/{len(ok)}; every pair within 10 %: {within}/{len(ok)}; "
              f"a re-measurement under load gives the same verdict: {again}/{len(ok)}, median drift "
              f"{sorted(r['again_diff'] for r in ok if r['again_diff'] is not None)[len(ok) // 2] * 100:.1f}%")


if __name__ == "__main__":
    sys.exit(main())
