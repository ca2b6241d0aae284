"""Issue 40's hostile workspaces, timed at the functions the server calls (no TVM, no editor).

    python bench/server_holds.py [--json OUT]

Each case runs in its own subprocess with a time limit, so a case that never ends is reported as
"> limit" instead of stopping the bench.  Prints one line per case, and JSON with ``--json``.

* fold: ``asight outline`` of six lines ``A = 10 ** 64`` ... ``F = E ** 64`` and a prim_func; and
  ``X = 1e300 ** 2`` / ``X = 0 ** -1`` (what the outline says of them).
* records: the record reader (``store.index._Records``) over one line of spaces, 20 / 80 KiB.
* refusals: a run index over 30 run folders whose run.json is 4 MiB of ``[],``; three scans.
* shipped: is a run folder written by someone else (no creation on this machine) resumed by tune?
* lsp: the stdio server with all of it in its workspace (and a 100 KiB blank line in the records of
  another file's run): when the hostile file's lens, inlay hints and symbols, and the other file's hover
  and symbols, sent together, are answered.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time

LIMIT_S = 30.0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRIM_FUNC = textwrap.dedent('''
    from tvm.script import tirx as T

    @T.prim_func
    def f(A: T.Buffer((4,), "float32")):
        for i in range(4):
            with T.sblock("b"):
                A[i] = T.float32(0)
''')


def _timed(code: str, limit: float = LIMIT_S) -> dict:
    start = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as err:
        partial = (err.stdout or b"").decode(errors="replace").strip().replace("\n", "; ")
        return {"seconds": None, "note": f"> {limit:g} s (killed) {partial}".strip()}
    seconds = time.perf_counter() - start
    lines = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return {"seconds": round(seconds, 2), "note": "; ".join(lines)[-200:]}


def fold_cases(folder: str) -> dict:
    towers = "A = 10 ** 64\nB = A ** 64\nC = B ** 64\nD = C ** 64\nE = D ** 64\nF = E ** 64\n"
    out = {}
    for name, head in (("plain", ""), ("tower", towers), ("float_overflow", "X = 1e300 ** 2\n"),
                       ("zero_power", "X = 0 ** -1\n")):
        path = os.path.join(folder, f"{name}.py")
        with open(path, "w") as handle:
            handle.write(head + PRIM_FUNC)
        out[f"fold.{name}"] = _timed(
            "import json, subprocess, sys\n"
            f"r = subprocess.run([sys.executable, '-m', 'asight_lsp', 'outline', {path!r}, '--json'], capture_output=True, text=True)\n"
            "print(r.returncode, (r.stdout or r.stderr).strip()[-150:].replace(chr(10), ' '))")
    return out


def records_cases(folder: str) -> dict:
    out = {}
    for kib in (20, 80):
        path = os.path.join(folder, f"records_{kib}.json")
        with open(path, "wb") as handle:
            handle.write(b" " * (kib << 10) + b"\n")
        out[f"records.spaces_{kib}KiB"] = _timed(
            "from pathlib import Path; import time\n"
            "from asight_lsp.store.index import _Records\n"
            f"r = _Records(Path({path!r})); t = time.perf_counter(); r.update()\n"
            "print(f'{r.count} records, {time.perf_counter() - t:.2f} s')")
    return out


def refusal_cases(folder: str) -> dict:
    runs = os.path.join(folder, "store", "runs")
    for i in range(30):
        run = os.path.join(runs, f"f-2026010{i % 10}-0000{i:02d}-abcd")
        os.makedirs(run)
        with open(os.path.join(run, "run.json"), "wb") as handle:
            handle.write(b"[" + b"[]," * ((4 << 20) // 3 - 2) + b"[]]")
    code = ("import time\nfrom asight_lsp.store.index import RunIndex\n"
            f"ix = RunIndex({os.path.join(folder, 'store')!r}, min_interval=0)\ntimes = []\n"
            "for _ in range(3):\n    t = time.perf_counter(); ix.metas(); print(f'scan {time.perf_counter() - t:.2f} s', flush=True)\n"
            "print(f'{len(ix.problems())} refused')")
    return {"refusals.three_scans": _timed(code, 120)}


def shipped_cases(folder: str) -> dict:
    work = os.path.join(folder, "repo")
    run = os.path.join(work, ".asight", "runs", "f-20260101-000000-beef")
    os.makedirs(run)
    source = os.path.join(work, "k.py")
    with open(source, "w") as handle:
        handle.write(PRIM_FUNC)
    code = ("import json, os\nfrom asight_lsp.store.runs import RunStore\nfrom asight_lsp.tvmscript.hashing import source_hash\n"
            "from asight_lsp.tvmscript.outline import build_outline\n"
            f"os.chdir({work!r})\n"
            "o = build_outline(open('k.py').read(), os.path.abspath('k.py'))\n"
            "fn = o.functions[0]\n"
            "lines = open('k.py').read().splitlines()\n"
            "h = {fn.id: source_hash(chr(10).join(lines[fn.range['start']['line']:fn.range['end']['line'] + 1]))}\n"
            f"json.dump({{'id': 'x', 'file': 'k.py', 'function': fn.id, 'source_hashes': h, 'target_label': 'llvm',"
            f" 'state': 'finished', 'trials_done': 2}}, open({os.path.join(run, 'run.json')!r}, 'w'))\n"
            "found = RunStore('.asight').find_resumable(os.path.abspath('k.py'), fn.id, h, 'llvm')\n"
            "print('resumed as the user\\'s own' if found else 'not resumed')")
    return {"shipped.resume": _timed(code)}


LSP_SESSION = r"""
import asyncio, json, os, shutil, sys, time
from pathlib import Path
sys.path.insert(0, os.path.join(ROOT, "bench"))
from lsp_latency import RawClient
work = Path(WORK)
victim = work / "mbr.py"
shutil.copy(os.path.join(ROOT, "fixtures", "matmul_bias_relu.py"), victim)
run = work / ".asight" / "runs" / "mbr128"
shutil.copytree(os.path.join(ROOT, "fixtures", "runs", "mbr128"), run)
meta = json.loads((run / "run.json").read_text()); meta["file"] = str(victim)
(run / "run.json").write_text(json.dumps(meta))
with open(run / "database_tuning_record.json", "ab") as out:
    out.write(b" " * (100 << 10) + b"\n")
for i in range(30):
    folder = work / ".asight" / "runs" / f"h-20260101-0000{i:02d}-beef"
    folder.mkdir()
    (folder / "run.json").write_bytes(b"[" + b"[]," * ((4 << 20) // 3 - 2) + b"[]]")
(work / "hostile.py").write_text(HOSTILE)

async def main():
    client = await RawClient.start()
    await client.request("initialize", {"processId": os.getpid(), "rootUri": work.as_uri(), "capabilities": {},
                                        "initializationOptions": {"disabledFeatures": ["tvmDiagnostics"]}})
    client.notify("initialized", {})
    for path in (victim, work / "hostile.py"):
        client.notify("textDocument/didOpen", {"textDocument": {"uri": path.as_uri(), "languageId": "python",
                                                                "version": 1, "text": path.read_text()}})
    start = time.perf_counter()
    async def timed(method, uri, **extra):
        try:
            await asyncio.wait_for(client.request(method, {"textDocument": {"uri": uri}, **extra}), LIMIT)
            return f"{time.perf_counter() - start:.2f} s"
        except asyncio.TimeoutError:
            return f"> {LIMIT} s"
        except RuntimeError as err:
            return f"{time.perf_counter() - start:.2f} s (error: {str(err)[:80]})"
    hostile = (work / "hostile.py").as_uri()
    whole = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 30, "character": 0}}}
    figures = await asyncio.gather(
        timed("textDocument/codeLens", hostile), timed("textDocument/inlayHint", hostile, **whole),
        timed("textDocument/documentSymbol", hostile),
        timed("textDocument/hover", victim.as_uri(), position={"line": 16, "character": 24}),
        timed("textDocument/documentSymbol", victim.as_uri()))
    print("answered after: lens %s, inlay %s, symbols %s (hostile file); hover %s, symbols %s (another file)" % tuple(figures))
    client.proc.kill()
asyncio.run(main())
"""


def lsp_cases(folder: str) -> dict:
    hostile = "A = 10 ** 64\nB = A ** 64\nC = B ** 64\nD = C ** 64\nE = D ** 64\nF = E ** 64\n" + PRIM_FUNC
    code = f"ROOT, WORK, HOSTILE, LIMIT = {ROOT!r}, {folder!r}, {hostile!r}, 60\n" + LSP_SESSION
    return {"lsp.hostile_workspace": _timed(code, 150)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--only", choices=("fold", "records", "refusals", "shipped", "lsp"))
    args = parser.parse_args()
    figures: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, case in (("fold", fold_cases), ("records", records_cases), ("refusals", refusal_cases),
                           ("shipped", shipped_cases), ("lsp", lsp_cases)):
            if args.only in (None, name):
                figures.update(case(os.path.join(folder, name) if os.makedirs(os.path.join(folder, name)) is None
                                    else folder))
    for name, figure in figures.items():
        seconds = "timeout" if figure["seconds"] is None else f"{figure['seconds']:.2f} s"
        print(f"{name:28} {seconds:>9}  {figure['note']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"load": os.getloadavg()[0], "figures": figures}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
