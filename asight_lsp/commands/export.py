"""``asight export FILE [--run R] -o model.so [--tune-missing N | --allow-untuned] [--tuned | --untuned]``:
the tuned model as a library a deployment loads, every kernel from the run's records, timed against the
headline (the untuned build when the run measured it faster, unless ``--tuned``; always with ``--untuned``)."""
from __future__ import annotations

import sys

from .common import add_file_run_options, print_json


def add_parser(sub):
    p = sub.add_parser("export", help="build a tuned Relax model with its run's records into a .so")
    add_file_run_options(p, "what was built and checked")
    p.add_argument("-o", "--output", required=True, help="library to write (model.so)")
    p.add_argument("--tune-missing", type=int, default=0, metavar="N",
                   help="tune the kernels without a record (N trials in all, with progress), then build")
    p.add_argument("--allow-untuned", action="store_true",
                   help="write the library even with kernels on TVM's default schedule (said loudly)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--tuned", action="store_true",
                       help="export the tuned build even when the run measured the untuned one faster")
    which.add_argument("--untuned", action="store_true",
                       help="export the untuned build (TVM's default schedules), e.g. when tune said to keep it")
    p.add_argument("--no-measure", action="store_true",
                   help="do not time the library against the headline's build (not recommended)")
    return p


_LAST: list[str] = [""]


def progress(event: dict) -> None:
    if event.get("type") == "progress" and event.get("stage") == "tune-missing":
        failed = f" ({event['failed']} failed)" if event.get("failed") else ""
        line = f"  tuning missing kernels: trials {event['trials_done']}/{event['trials']}  [{event['task']}]{failed}"
        if line != _LAST[0]:          # one line per change (a batch's events repeated it)
            _LAST[0] = line
            print(line, file=sys.stderr, flush=True)
    elif event.get("type") == "status" and event.get("message"):
        print(f"{event['message']} ...", file=sys.stderr, flush=True)


def run(args) -> int:
    from ..engine.client import WorkerClient
    from ..services.export import export_model, export_ok, tuned_missing_text
    with WorkerClient(args.python, default_timeout=3600) as worker:
        reply = export_model(args.file, args.output, args.run_ref, args.func, args.work_dir, worker,
                             tune_missing=args.tune_missing, allow_untuned=args.allow_untuned,
                             on_event=None if args.json else progress, measure=not args.no_measure,
                             tuned=args.tuned, untuned=args.untuned)
    if args.json:
        print_json(reply)
        return 0 if export_ok(reply) else 1
    short = tuned_missing_text(reply)
    if short:
        print(f"asight: {short}", file=sys.stderr)
    if reply.get("status") == "refused":
        print(f"asight: export refused (run {reply['run']}): {reply['message']}", file=sys.stderr)
        for line in reply.get("levers_refused_text") or []:
            print(f"asight: {line}", file=sys.stderr)
    else:
        print_written(reply)
    return 0 if export_ok(reply) else 1


def print_written(reply: dict) -> None:
    from ..analysis.deployable import missing_lines
    from ..services.export import applied_text, measured_text
    print(f"wrote {reply['library']}  ({reply['bytes'] / 2**20:.1f} MiB, run {reply['run']}, {reply['target']})")
    print(f"  kernels: {applied_text(reply)}")
    for line in reply.get("levers_refused_text") or []:
        print(f"  {line}")
    for key in ("untuned_export", "untuned_note", "device_code"):
        if reply.get(key):
            print(f"  note: {reply[key]}")
    if reply["applied"].get("missing"):
        print("  !!! UNTUNED kernels (TVM's default schedule, accepted with --allow-untuned):")
        for line in missing_lines(reply["applied"]):
            print(f"  !!!   {line}")
    print(f"  weights: {reply['bound_weights']} bound from {reply['weights']}" if reply["bound_weights"]
          else "  weights: none bound (the library takes every parameter as an input)")
    head = reply.get("headline") or {}
    print(f"  headline: {head.get('text', '?')}")
    check = reply["check"]
    if check.get("skipped"):
        print(f"  outputs: not checked: {check['skipped']}")
    else:
        print(f"  outputs vs the untuned build: {'match' if check['ok'] else 'DIFFER'} "
              f"(allclose rtol={check['rtol']}, same inputs)")
    measured = reply.get("measured")
    if measured:
        h = measured.get("harness") or {}
        print(f"  measured: {measured_text(reply)}")
        print(f"            ({h.get('rounds')} interleaved rounds, {h.get('threads')} threads, separate worker "
              f"process; machine {'busy' if (measured.get('load') or {}).get('busy') else 'quiet'})")
        verdict = measured.get("verdict_export") or {}
        if not verdict.get("ok", True):
            print(f"asight: error: {verdict.get('text')}", file=sys.stderr)
    print("load it:\n" + "\n".join("    " + line for line in reply["load"].splitlines()))
