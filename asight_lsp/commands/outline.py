"""``asight outline FILE``: functions, blocks, loops, buffers, bindings with 0-based LSP ranges."""
from __future__ import annotations

from ..tvmscript.outline import build_outline
from .common import print_json, read_source


def add_parser(sub):
    p = sub.add_parser("outline", help="functions, blocks, loops, buffers and bindings with ranges (no TVM)")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def run(args) -> int:
    outline = build_outline(read_source(args.file), args.file)
    if args.json:
        print_json(outline.to_dict())
        return 0
    for fn in outline.functions:
        print(f"{fn.kind} {fn.id}  (lines {fn.range['start']['line'] + 1}-{fn.range['end']['line'] + 1})")
        for buf in fn.buffers:
            print(f"  buffer {buf.name}: {buf.dtype}{list(buf.shape)} ({buf.kind})")
        for loop in fn.loops:
            print(f"  loop {','.join(loop.vars)} in {loop.kind}{loop.extents}  line {loop.range['start']['line'] + 1}")
        for blk in fn.blocks:
            print(f"  block {blk.name} [{blk.iter_kinds}] reads {blk.reads} writes {blk.writes}"
                  f"  line {blk.range['start']['line'] + 1}")
        for b in fn.bindings:
            print(f"  {b.name} = {b.op}({', '.join(b.args)})  line {b.range['start']['line'] + 1}")
    for err in outline.syntax_errors:
        print(f"{args.file}:{err['range']['start']['line'] + 1}: {err['message']}")
    return 0
