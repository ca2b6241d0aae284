"""How long each editor panel of an imported, tuned model takes to open, through the real stdio server.

    python bench/panels.py [--model mobilenet_v2] [--style new] [--size small] [--trials 64] [--work DIR]
                           [--repeat 3] [--out bench/results/panels.json]

A zoo model (fixtures/models/zoo.py, seeded weights) is exported to ONNX, imported and tuned with the
CLI (`asight import`, `asight tune`, which profiles it per kernel call) in a work folder (kept with --work, and reused when its run is
there); then one `asight serve` opens the model file and asks each panel's request of its Relax
function (`asight/runs`, `hotspots`, `searchSpace`, `loopView`, `stageGraph`, `principles`, `code`,
`model`) --repeat times, one at a time: the first answer of each is the panel opened cold (the
worker's first graphs, the first profile), the others warm.  Wall time from the request's send to its
answer's last byte; the machine's load average is printed beside the figures.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from server_holds_round2 import RawClient  # noqa: E402
sys.path.insert(0, str(ROOT / "fixtures" / "models"))     # its zoo.py, not bench/zoo.py
sys.modules.pop("zoo", None)
import zoo  # noqa: E402

from asight_lsp import protocol as P  # noqa: E402

PANELS = [P.REQ_RUNS, P.REQ_HOTSPOTS, P.REQ_SEARCH_SPACE, P.REQ_LOOP_VIEW, P.REQ_STAGE_GRAPH, P.REQ_PRINCIPLES,
          P.REQ_CODE, P.REQ_MODEL]


def cli(*args: str, cwd: Path, timeout: float = 7200) -> str:
    done = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise SystemExit(f"asight {args[0]}: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return done.stdout


def prepare(work: Path, model: str, style: str, size: str, trials: int, cold: bool) -> Path:
    """The imported model's script in ``work``, tuned once (a run already there is reused); ``asight tune``
    profiles it per kernel call before it returns unless ``cold`` (``--no-profile``)."""
    work.mkdir(parents=True, exist_ok=True)
    script = work / f"{model}_relax.py"
    if not script.exists():
        onnx = work / f"{model}.onnx"
        zoo.save(zoo.CORPUS[model](size, style), onnx)
        cli("import", str(onnx), "-o", str(script), cwd=work)
    runs = work / ".asight" / "runs"
    if not runs.is_dir() or not any(runs.iterdir()):
        started = time.perf_counter()
        cli("tune", str(script), "--trials", str(trials), *(["--no-profile"] if cold else []), cwd=work)
        print(f"tuned {script.name}: {trials} trials{'' if cold else ', then profiled per call'} in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    return script


def relax_function(script: Path) -> str:
    from asight_lsp.tvmscript.outline import build_outline
    outline = build_outline(script.read_text(), str(script))
    return next(fn.id for fn in outline.functions if fn.kind == "relax_function")


def time_panels(work: Path, script: Path, repeat: int) -> dict:
    client = RawClient(str(work))
    try:
        client.start(str(work))
        uri = client.open(script)
        function = relax_function(script)
        times: dict[str, list[float]] = {}
        statuses: dict[str, str] = {}
        for round_ in range(repeat):
            for method in PANELS:
                sent = time.perf_counter()
                arrived, answer = client.wait(client.request(method, {"uri": uri, "function": function}), 600)
                times.setdefault(method, []).append(round(arrived - sent, 3))
                result = answer.get("result") or {}
                statuses[method] = result.get("status") or ("error: " + str(answer.get("error")))[:120]
        return {"function": function, "seconds": times, "status": statuses}
    finally:
        client.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mobilenet_v2")
    p.add_argument("--style", default="new")
    p.add_argument("--size", default="small", choices=("small", "full"))
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--work", default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cold-profile", action="store_true",
                   help="tune with --no-profile (a run without its per-call profile): hotspots measures it first")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "panels.json"))
    args = p.parse_args()
    work = Path(args.work or f"/tmp/asight-panels-{args.model}-{args.size}").resolve()
    script = prepare(work, args.model, args.style, args.size, args.trials, args.cold_profile)
    load = os.getloadavg()[0]
    result = {"model": args.model, "style": args.style, "size": args.size, "trials": args.trials,
              "profiled_before": not args.cold_profile,
              "load_before": round(load, 2), **time_panels(work, script, args.repeat),
              "load_after": round(os.getloadavg()[0], 2)}
    for method, secs in result["seconds"].items():
        print(f"{method:20s} cold {secs[0]:7.2f} s   warm {min(secs[1:] or secs):7.2f} s   "
              f"({result['status'][method]})")
    print(f"load average {result['load_before']} -> {result['load_after']}")
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
