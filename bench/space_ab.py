"""A/B of the search-space payload between two checkouts on the same synthetic run, back to back.

    python bench/space_ab.py N CHECKOUT      (run once per checkout, one after the other)

Prints the minimum CPU time of 4 warm payloads (after one untimed) and the stage timings of that
run, with the load average: on a shared machine only a back-to-back comparison of CPU minima means
much.  ``CHECKOUT`` is a directory with ``asight_lsp`` and ``bench/space.py`` (e.g. ``git archive``
of another commit); put it first on PYTHONPATH.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(sys.argv[2], "bench"))

from space import write_run  # noqa: E402

from asight_lsp.services.run_data import load_run  # noqa: E402
from asight_lsp.views.searchspace import search_space  # noqa: E402


def main() -> int:
    n = int(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        data = load_run(write_run(n, Path(tmp)), extract=False)
        search_space(data, seed=0)
        best = None
        for _ in range(4):
            c = time.process_time()
            payload = search_space(data, seed=0)
            t = time.process_time() - c
            if best is None or t < best[0]:
                best = (t, payload["timings"])
    print(f"{sys.argv[2]}: {n} candidates, min cpu {best[0]:.2f} s, stages (wall) {best[1]}, "
          f"load avg {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
