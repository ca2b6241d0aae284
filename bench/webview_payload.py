"""Write asight.searchSpace/1 payloads of synthetic runs for bench/webview.mjs.

    python bench/webview_payload.py OUT_DIR 1000 5000 20000   -> OUT_DIR/searchSpace-<n>.json
"""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from space import write_run  # noqa: E402  (bench/space.py: synthetic run directory)

from asight_lsp.views.searchspace import search_space  # noqa: E402
from asight_lsp.services.run_data import load_run  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for n in map(int, sys.argv[2:]):
            payload = search_space(load_run(write_run(n, Path(tmp)), extract=False))
            (out / f"searchSpace-{n}.json").write_text(json.dumps(payload))
            print(f"payload {n}: {len(payload['cells'])} cells", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
