"""``asight profile FILE``: untuned vs best latency, output check, GFLOP/s, per-block/per-task latency."""
from __future__ import annotations

import sys

from ..analysis.attribution import SLOWER_RATIO
from ..analysis.measurement import how_text, speedup_text
from ..errors import AsightError, InputError
from ..services.hotspots import add_changes
from ..services.profiling import ProfileOptions, profile_file
from ..store.record import UNMEASURED, Measurement
from ..views.text import change_text
from ..engine.client import WorkerClient
from .common import print_json


def add_parser(sub):
    p = sub.add_parser("profile", help="untuned vs best latency, output check, GFLOP/s, per-block latency")
    p.add_argument("file")
    p.add_argument("--func", help="function id/name (Mod.main, main) or unit name; default: the file's only unit")
    p.add_argument("--run", dest="run_ref", help="run id, id prefix, run directory or 'latest' (default: newest run of the function)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--candidate", metavar="FILE", help="compare against this scheduled version instead of a run")
    p.add_argument("--remeasure", action="store_true", help="time untuned vs tuned again: a new dated measurement; "
                   "it replaces the run's record unless it is noisier (both kept in the run)")
    p.add_argument("--replace", action="store_true", help="make this measurement the run's shown one even if it "
                   "is noisier than the shown one")
    p.add_argument("--budget", type=float, metavar="SECONDS", help="time for the untuned vs tuned comparison "
                   "(default 1.5 s; at least 5 interleaved rounds whatever the budget)")
    p.add_argument("--cachegrind", action="store_true", help="also simulate caches with valgrind (slow)")
    p.add_argument("--no-stages", action="store_true", help="skip per-stage (rdtsc) timing")
    p.add_argument("--no-cache", action="store_true", help="measure again even if the run has a cached profile")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    if args.budget is not None and args.budget <= 0:
        raise AsightError("--budget must be a positive number of seconds")
    options = ProfileOptions(remeasure=args.remeasure, budget_s=args.budget, cachegrind=args.cachegrind,
                             stages=not args.no_stages, replace=args.replace)
    try:
        with WorkerClient(args.python) as worker:
            profile = profile_file(args.file, args.func, args.run_ref, args.work_dir, worker, options,
                                   candidate=args.candidate, use_cache=not args.no_cache)
    except InputError as err:  # the file has errors: exit 1, like `asight check`
        print(f"asight: error: {str(err).replace('refusing to tune', 'refusing to profile')}", file=sys.stderr)
        return 1
    add_changes(profile, args.file)
    if args.json:
        print_json(profile)
    else:
        sys.stdout.write(render(profile))
    ok = profile["summary"].get("check_ok")
    return 1 if ok is False else 0


# --------------------------------------------------------------------------- human output


def _us(value) -> str:
    if value is None:
        return "-"
    if value >= 1000:
        return f"{value / 1e3:.3f} ms"
    if value >= 10:
        return f"{value:.1f} µs"
    return f"{value:.2f} µs" if value >= 1 else f"{value * 1e3:.0f} ns"


def _spread(stats: dict | None) -> str:
    if not stats:
        return "-"
    return f"{_us(stats['median_us'])}  (p25-p75 {_us(stats['p25_us'])}-{_us(stats['p75_us'])}, n={stats['repeats']})"


def _gf(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def render(profile: dict) -> str:
    lines = [f"profile of {profile['function']} ({profile['kind']}) on {profile.get('target')}"]
    run = profile.get("run")
    if run:
        lines.append(f"run {run['id']}: {run['state']}, {run['trials']} trials  ({run['dir']})")
    if profile.get("note"):
        lines.append(f"note: {profile['note']}")
    if profile.get("cached"):
        lines.append("(cached profile; --no-cache profiles again, --remeasure also times untuned vs tuned again)")
    lines += _headline_lines(Measurement.of(profile.get("measurement")) or UNMEASURED, profile["summary"])
    peak = profile["peak"]
    parts = profile.get("kernels") or [profile["relax"]]
    for part in parts:
        lines += _part_lines(part, peak, len(parts) > 1)
    if peak.get("gflops"):
        lines.append(f"peak {peak['gflops']:.0f} GFLOP/s [{peak['source']}]")
        if peak.get("exceeded_by"):
            lines.append(f"note: {peak['note']}")
    if profile["summary"].get("check_ok") is False:
        lines.append("!!! OUTPUT MISMATCH: the tuned program does not compute what the untuned one does !!!")
    return "\n".join(lines) + "\n"


def _headline_lines(measured: Measurement, summary: dict) -> list[str]:
    """The measurement record: untuned vs tuned, the speed-up with its interval, how and under what load."""
    if not measured.headline:
        return ["headline: not measured" + (f" ({measured.error})" if measured.error else "")]
    scope = {"program": " end to end", "module": " (sum of the PrimFuncs)"}.get(measured.scope, "")
    if measured.tuned:
        out = [f"headline{scope}: untuned {_spread(measured.untuned)} -> tuned {_spread(measured.tuned)}",
               f"  {speedup_text(measured.raw)}"]
    else:
        out = [f"headline{scope}: untuned {_spread(measured.untuned)}"]
    out.append(f"  how: {how_text(measured.raw)}")
    if summary.get("busy"):
        out.append("  the machine was busy while measuring: the figures are noisy (--remeasure when it is quiet)")
    out += _check_lines(measured.check)
    applied = measured.applied
    if applied:
        out.append(f"  tuned build: {len(applied['from_records'])} of {applied['kernels']} kernels from the run's "
                   f"records ({len(applied['tasks_with_records'])} tasks tuned"
                   + (f"; not applied: {', '.join(applied['missing'])}" if applied.get("missing") else "") + ")")
    return out


def _part_lines(part: dict, peak: dict, several: bool) -> list[str]:
    out = ["", f"== {part['function']}"]
    base, tuned = part.get("baseline"), part.get("tuned")
    if several and base:
        out.append(f"  untuned  {_spread(base)}")
        if tuned:
            speed = f"   {part['speedup']:.1f}x" if part.get("speedup") else ""
            out.append(f"  tuned    {_spread(tuned)}{speed}")
    best = part.get("best")
    if best and best.get("latency_us") is not None:
        out.append(f"  record: {best['match']}; {_us(best['latency_us'])} while tuning")
    for note in part.get("notes") or []:
        out.append(f"  note: {note}")
    gflops = part.get("gflops")
    if gflops and part["flops"].get("value"):
        frac = part.get("peak_fraction") or {}
        pct = lambda label: f" ({frac[label] * 100:.0f}% of peak)" if frac.get(label) else ""  # noqa: E731
        tuned = f", tuned {_gf(gflops['tuned'])}{pct('tuned')}" if gflops.get("tuned") else ""
        out.append(f"  GFLOP/s  untuned {_gf(gflops['baseline'])}{pct('baseline')}{tuned}"
                   f"   [{part['flops']['value']:.3g} FLOPs: {part['flops']['source']}]")
    if "stages" in part:
        out += _block_lines(part)
        out += change_lines(part.get("changes") or [])
        out += _memory_lines(part.get("memory") or {})
        out += _cachegrind_lines(part.get("cachegrind") or {})
    if "tasks" in part:
        out += _task_lines(part)
    return out


def _check_lines(check: dict | None) -> list[str]:
    if not check:
        return []
    if check["ok"]:
        return [f"  outputs match the untuned program (allclose rtol={check['rtol']:g}, random inputs)"]
    bad = [b for b in check["buffers"] if not b["ok"]]
    return ["  !!! OUTPUT MISMATCH !!! " + "; ".join(
        f"{b['name']}: {b['mismatched']}/{b['elements']} elements differ, max abs err {b['max_abs_err']:.3g}"
        for b in bad)]


def change_lines(changes: list[dict]) -> list[str]:
    """Per block: untuned → tuned latency (each its share of that program's headline), slowed blocks
    flagged with what the best schedule did to them."""
    if not any(c.get("before_us") is not None for c in changes):
        return []
    out = [f"  per-block latency, untuned → tuned (⚠: ≥ {SLOWER_RATIO:g}× slower after tuning):"]
    for change in changes:
        flag = "⚠ " if change.get("slower") else "  "
        out.append(f"   {flag}{change_text(change, change.get('schedule'))}")
    return out


def _block_lines(part: dict) -> list[str]:
    out = []
    for label in ("baseline", "tuned"):
        stages = part["stages"].get(label)
        if not stages:
            continue
        if "error" in stages:
            out.append(f"  per-block ({label}): not measured: {stages['error']}")
            continue
        ratio = f", stage sum / whole call {stages['ratio']:.2f}" if stages.get("ratio") else ""
        if stages.get("intrusion"):
            ratio += f", instrumented / plain {stages['intrusion']:.2f}"
        out.append(f"  per-block latency, {'untuned' if label == 'baseline' else 'tuned'}: each block's share of "
                   f"the headline (shares from rdtsc around stages{ratio}):")
        out.append(f"    {'block':<28} {'lines':>9} {'latency':>11} {'share':>6}  how")
        for blk in part["blocks"][label]:
            rng = blk["range"]
            where = f"{rng['start']['line'] + 1}-{rng['end']['line'] + 1}"
            share = f"{blk['share'] * 100:.0f}%" if blk.get("share") is not None else "-"
            out.append(f"    {blk['id']:<28} {where:>9} {_us(blk['us']):>11} {share:>6}  {blk['attribution']}")
    return out


def _task_lines(part: dict) -> list[str]:
    out = []
    for label in ("baseline", "tuned"):
        data = part["tasks"].get(label)
        if not data:
            continue
        out.append(f"  per call, {'untuned' if label == 'baseline' else 'tuned'} build (VM instrument hook; "
                   "share of the calls' sum, not of the headline):")
        out.append(f"    {'kernel':<28} {'latency':>11} {'share':>6}  source bindings")
        for task in data["tasks"]:
            share = f"{task['share'] * 100:.0f}%" if task.get("share") is not None else "-"
            first, last = (task["lines"][0] + 1, task["lines"][1] + 1) if task.get("lines") else (None, None)
            lines = "" if first is None else f" (line {first})" if first == last else f" (lines {first}-{last})"
            names = ", ".join(task.get("vars") or []) or "?"
            out.append(f"    {task['task'] + ('#' + str(task['call']) if task['call'] else ''):<28} "
                       f"{_us(task['us']):>11} {share:>6}  {names}{lines}")
    return out


def _bytes(value) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B"


def _memory_lines(memory: dict) -> list[str]:
    out = []
    for label in ("baseline", "tuned"):
        data = memory.get(label)
        if not data or "rows" not in data:
            continue
        cells = [f"{row['store']}: {_bytes(row['bytes'])} touched / {_bytes(row['unique_bytes'])} unique"
                 f" (reuse {row['reuse']:.0f}x)" for row in data["rows"] if row.get("unique_bytes")]
        if cells:
            out.append(f"  modelled memory traffic, {'untuned' if label == 'baseline' else 'tuned'} "
                       f"[PerStoreFeature]: " + "; ".join(cells))
    return out


def _cachegrind_lines(data: dict) -> list[str]:
    out = []
    for label in ("baseline", "tuned"):
        cg = data.get(label)
        if not cg:
            continue
        if "blocks" not in cg:
            out.append(f"  cachegrind ({label}): {cg.get('skipped') or cg.get('error')}")
            continue
        cells = [f"{b['name']}: D1 misses {b.get('D1mr', 0) + b.get('D1mw', 0):,}, LL misses "
                 f"{b.get('DLmr', 0) + b.get('DLmw', 0):,}, refs {b.get('Dr', 0) + b.get('Dw', 0):,}"
                 for b in cg["blocks"]]
        out.append(f"  cachegrind, {'untuned' if label == 'baseline' else 'tuned'} (simulated, one call): "
                   + ("; ".join(cells) or "no kernel lines found"))
    return out
