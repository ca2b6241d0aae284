"""Guided re-tune vs plain MetaSchedule at the same total trial budget (issue 8).

For each kernel and seed:

1. base run: plain MetaSchedule, ``B/2`` trials;
2. guided run: principles mined from the base run steer ``B/2`` more trials (seeded with the
   base run's records, so its total budget is ``B``);
3. plain run: the base run resumed, unguided, for ``B/2`` more trials (total ``B``).

Both arms share the first ``B/2`` trials and differ only in how the second half is searched.
Prints a table of medians over seeds and writes JSON.

    python bench/guided.py [--budget 64] [--seeds 0 1 2] [--kernels matmul conv2d_nhwc ...]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asight_lsp.errors import AsightError  # noqa: E402
from asight_lsp.services.tuning import TuneRequest, start_tune  # noqa: E402

KERNELS = {"matmul": "matmul.py", "conv2d_nhwc": "conv2d_nhwc.py", "depthwise_conv2d": "depthwise_conv2d.py",
           "batch_matmul": "batch_matmul.py", "softmax": "softmax.py"}


def tune(file: Path, trials: int, store: str, seed: int, **extra):
    meta = start_tune(TuneRequest(file=str(file), trials=trials, store_root=store, seed=seed, **extra)).wait()
    if meta.state != "done":
        raise RuntimeError(f"{file.name}: run {meta.id} ended {meta.state}: {meta.error}")
    return meta


def one(kernel: str, seed: int, budget: int, store: str) -> dict:
    file = ROOT / "fixtures" / KERNELS[kernel]
    half = budget // 2
    started = time.time()
    base = tune(file, half, store, seed, resume=False)
    row = {"kernel": kernel, "seed": seed, "base_us": base.best_us, "baseline_us": base.baseline_us,
           "told": what_next(base, store)}
    try:
        guided = tune(file, budget - half, store, seed, guided_by=base.id)
        row["guided_us"] = guided.best_us
        row["principles"] = [p["text"] for p in guided.extra["guidance"]["principles"]]
    except AsightError as err:  # no principle with enough evidence: nothing to guide by
        row["guided_us"], row["principles"], row["no_guidance"] = None, [], str(err)
    plain = tune(file, budget, store, seed, resume=True)  # the base run, continued unguided to B
    assert plain.id == base.id, "the plain arm must continue the base run"
    row["plain_us"] = plain.best_us
    row["seconds"] = round(time.time() - started, 1)
    return row


def what_next(meta, store: str) -> list[dict]:
    """What the product tells a user after the base run: each principle, tentative range and closest
    range of ``asight principles`` with its next step (views/principles.next_step)."""
    from asight_lsp.services.run_data import load_run
    from asight_lsp.views.principles import principles
    payload = principles(load_run(meta.id, store_root=store, extract=False))
    told = []
    for kind in ("principles", "tentative", "closest"):
        for p in payload.get(kind) or []:
            step = p.get("next_step") or {}
            told.append({"kind": kind, "text": p["text"], "next": step.get("kind"), "cli": step.get("cli"),
                         "settle": (p.get("settle") or {}).get("candidates_needed")})
    return told


def summarise(rows: list[dict]) -> list[dict]:
    """Per kernel: medians over seeds of both arms.  A seed whose base run gave nothing to guide by
    counts with the plain result in the guided arm (what a user ends up with: no guided run), and
    the ``guided seeds`` column says how many seeds were really guided."""
    out = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r for r in rows if r["kernel"] == kernel]
        plain = statistics.median(r["plain_us"] for r in mine)
        guided = statistics.median(r["guided_us"] if r["guided_us"] is not None else r["plain_us"] for r in mine)
        out.append({"kernel": kernel, "plain_median_us": round(plain, 2), "guided_median_us": round(guided, 2),
                    "guided_faster_pct": round((plain / guided - 1) * 100, 1),
                    "seeds_with_guidance": sum(r["guided_us"] is not None for r in mine),
                    "tentative_seeds": sum(any("tentative" in t for t in r["principles"]) for r in mine),
                    "seeds": len(mine)})
    return out


def print_table(budget: int, seeds: list[int], table: list[dict]) -> None:
    print(f"\nbudget B={budget} per arm; medians over seeds {seeds}")
    print(f"{'kernel':18s} {'plain (us)':>11s} {'guided (us)':>12s} {'guided faster':>14s} {'guided seeds':>13s}")
    for t in table:
        seeds_text = f"{t['seeds_with_guidance']}/{t['seeds']} ({t.get('tentative_seeds', 0)} tent.)"
        print(f"{t['kernel']:18s} {t['plain_median_us']:11.1f} {t['guided_median_us']:12.1f} "
              f"{t['guided_faster_pct']:+13.1f}% {seeds_text:>13s}")
    wins = sum(1 for t in table if t["guided_faster_pct"] >= 10)
    print(f"guided >= 10% faster on {wins} of {len(table)} kernels (goal: 3 of 5)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=64, help="total trials B per arm (principles need B/2 >= 20)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--json", default=str(ROOT / "bench" / "results" / "guided.json"))
    parser.add_argument("--summarise", metavar="JSON", help="only print the table of an earlier run's JSON")
    args = parser.parse_args()
    if args.summarise:
        data = json.loads(Path(args.summarise).read_text())
        print_table(data["budget"], data["seeds"], summarise(data["rows"]))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="asight-guided-") as store:
        for kernel in args.kernels:
            for seed in args.seeds:
                row = one(kernel, seed, args.budget, store)
                rows.append(row)
                print(json.dumps(row), flush=True)
    table = summarise(rows)
    print_table(args.budget, args.seeds, table)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps({"budget": args.budget, "seeds": args.seeds, "rows": rows,
                                           "table": table}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
