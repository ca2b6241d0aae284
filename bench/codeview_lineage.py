"""Cost of lineage in the code view: time per `code_view` request (warm worker) at each level.

    cd CHECKOUT && TVM_NUM_THREADS=2 PYTHONPATH=$PWD python bench/codeview_lineage.py FILE RUN [--store DIR]

(cd into the checkout you measure: the worker process imports asight_lsp from the working
directory, so another checkout's PYTHONPATH alone would mix two versions.)

Each request includes the safety gate, TVM's parse check, the trace replay, the lineage replay
(worker/lineage.py: a second replay with a decision provider + a JSON round trip of the module)
and printing/building.  Run it with PYTHONPATH at a checkout without lineage to compare.  Prints
median, min and max over the repeats, the number of links, and the machine's load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

from asight_lsp.engine.client import WorkerClient
from asight_lsp.services.codeview import code_view


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("run")
    ap.add_argument("--store")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--levels", default="scheduled,lowered,llvm")
    args = ap.parse_args()
    print(f"load before {os.getloadavg()}")
    with WorkerClient() as worker:
        code_view(args.file, args.run, None, "scheduled", None, args.store, worker)   # warm: TVM import, parse
        for level in args.levels.split(","):
            times, links = [], 0
            for _ in range(args.repeats):
                start = time.perf_counter()
                view = code_view(args.file, args.run, None, level, None, args.store, worker)
                times.append(time.perf_counter() - start)
                links = len(view["links"])
            print(f"{level:10s} median {statistics.median(times):.3f} s  min {min(times):.3f}  max {max(times):.3f}  "
                  f"(n={args.repeats})  {links} links, {len(view.get('lineage') or [])} lineage entries")
    print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
