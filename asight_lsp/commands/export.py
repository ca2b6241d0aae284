"""``asight export FILE [--run R] -o model.so``: the tuned model as a library a deployment loads."""
from __future__ import annotations

from .common import add_file_run_options, print_json


def add_parser(sub):
    p = sub.add_parser("export", help="build a tuned Relax model with its run's records into a .so")
    add_file_run_options(p, "what was built and checked")
    p.add_argument("-o", "--output", required=True, help="library to write (model.so)")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    from ..services.export import export_model
    with WorkerClient(args.python, default_timeout=3600) as worker:
        reply = export_model(args.file, args.output, args.run_ref, args.func, args.work_dir, worker)
    if args.json:
        print_json(reply)
        return 0 if reply["check"]["ok"] else 1
    applied = reply["applied"]
    print(f"wrote {reply['library']}  ({reply['bytes'] / 2**20:.1f} MiB, run {reply['run']}, {reply['target']})")
    print(f"  tuned kernels: {len(applied['from_records'])} of {applied['kernels']} from the run's records"
          + (f"; NOT applied (default schedule): {', '.join(applied['missing'])}" if applied["missing"] else "")
          + (f"; folded into constants with the weights: {', '.join(applied['folded'])}" if applied.get("folded") else ""))
    print(f"  weights: {reply['bound_weights']} bound from {reply['weights']}" if reply["bound_weights"]
          else "  weights: none bound (the library takes every parameter as an input)")
    check = reply["check"]
    print(f"  outputs vs the untuned build: {'match' if check['ok'] else 'DIFFER'} "
          f"(allclose rtol={check['rtol']}, same inputs)")
    print("load it:\n" + "\n".join("    " + line for line in reply["load"].splitlines()))
    return 0 if check["ok"] else 1
