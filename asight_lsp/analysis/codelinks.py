"""Line links between a TVMScript source and the code generated from it (no TVM).

The worker prints scheduled / lowered TIR with the TVMScript printer's ``obj_to_annotate``: every
statement that still carries a span gets a comment tag ``asight:L<line>-<end>:<kind>`` (kind ``b``
for a block realize, ``s`` for any other statement), plus ``:d<k>`` on a statement the trace derived
from a source block (``k`` = index into the worker's lineage list, ``worker/lineage.py``).  The printer puts the tag after a one-line
statement (``C[vi, vj] = ...  # asight:L21-21:s``) and on its own line before a statement that
spans several lines (``# asight:L17-21:b`` then ``with T.sblock("matmul_update"):``).
``strip_tags`` removes the tags and returns the clean text with one link per generated line.

LLVM IR and assembly carry DWARF line info whose lines are TVMScript lines (the codegen emits
them from the statement spans, docs/tvm.md §5): ``!dbg !N`` + ``!N = !DILocation(line: L, ...)`` in
LLVM IR and ``.loc FILE LINE COL`` directives in assembly.

Every link is ``{"line": generated line, "sourceLine": source line}`` with 0-based lines (LSP
convention); a generated line has at most one source line.  Lines without a link came from no
source statement (new loops, argument checks, register shuffles): nothing is guessed for them.
"""
from __future__ import annotations

import re
from typing import Iterable

_TAG = re.compile(r"#\s*asight:L(?P<line>\d+)-(?P<end>\d+):(?P<kind>[bs])(?::d(?P<derived>\d+))?\s*$")
_OWN_LINE_TAG = re.compile(r"^(?P<indent>\s*)#\s*asight:L(?P<line>\d+)-(?P<end>\d+):(?P<kind>[bs])"
                           r"(?::d(?P<derived>\d+))?\s*$")
_DBG_REF = re.compile(r"!dbg !(?P<id>\d+)")
_DILOCATION = re.compile(r"^!(?P<id>\d+) = (?:distinct )?!DILocation\(line: (?P<line>\d+)")
_ASM_LOC = re.compile(r"^\s*\.loc\s+(?P<file>\d+)\s+(?P<line>\d+)")
_ASM_FILE = re.compile(r'^\s*\.file\s+(?P<file>\d+)\s+(?P<names>".*")')
_ASM_LABEL = re.compile(r"^[^\s#][^:]*:")
_SBLOCK = re.compile(r'T\.sblock\("(?P<name>[^"]+)"\)')


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def strip_tags(annotated: str) -> tuple[str, list[dict]]:
    """Clean text and links of printed TVMScript carrying ``asight:`` tags.

    A tag on its own line applies to the next code line; a block's tag also covers the lines of
    the block's body (deeper indentation) that have no tag of their own (``T.axis``, ``T.reads``,
    ...), since they describe that block.  Tag lines are dropped from the text.  A tag's ``:d<k>``
    becomes the link's ``derived: k`` (a body line inherits its block's).
    """
    out: list[str] = []
    links: list[dict] = []
    pending: tuple[int, str, int | None] | None = None
    blocks: list[tuple[int, int, int | None]] = []   # (indent of the `with` line, 1-based source line, derived)
    for raw in annotated.splitlines():
        own = _OWN_LINE_TAG.match(raw)
        if own:
            pending = (int(own["line"]), own["kind"], _derived(own))
            continue
        trailing = _TAG.search(raw)
        text = raw[:trailing.start()].rstrip() if trailing else raw
        indent = _indent(text)
        if text.strip():
            while blocks and indent <= blocks[-1][0]:
                blocks.pop()
        source, kind, derived = None, None, None
        if trailing:
            source, kind, derived = int(trailing["line"]), trailing["kind"], _derived(trailing)
        elif pending and text.strip():
            source, kind, derived = pending
        if text.strip():
            pending = None
        if source is None and blocks and text.strip():
            source, derived = blocks[-1][1], blocks[-1][2]
        if source is not None and kind == "b" and not trailing:
            blocks.append((indent, source, derived))
        if source is not None and source > 0:
            links.append({"line": len(out), "sourceLine": source - 1, **({"derived": derived} if derived is not None else {})})
        out.append(text)
    return "\n".join(out) + ("\n" if out else ""), links


def _derived(match) -> int | None:
    return int(match["derived"]) if match["derived"] is not None else None


def label_links(links: list[dict], lineage: list[dict]) -> list[dict]:
    """Links with ``derived: k`` get the lineage entry's block and label (``"sum — rfactor partial"``)."""
    out = []
    for link in links:
        k = link.get("derived")
        if isinstance(k, int) and 0 <= k < len(lineage):
            entry = lineage[k]
            link = {**{key: v for key, v in link.items() if key != "derived"}, "derivedBlock": entry.get("block"),
                    "derivedFrom": entry["source"], "derivation": entry["label"]}
        out.append(link)
    return out


def derived_in_text(text: str, lineage: list[dict]) -> dict[str, int]:
    """``{derived block: the generated line of its `with T.sblock("…")` header}`` (0-based)."""
    names = {e["block"] for e in lineage if e.get("block")}
    out: dict[str, int] = {}
    for number, line in enumerate(text.splitlines()):
        found = _SBLOCK.search(line)
        if found and found["name"] in names and found["name"] not in out:
            out[found["name"]] = number
    return out


def llvm_links(ir: str) -> list[dict]:
    """Links of LLVM IR lines whose instruction has ``!dbg`` pointing at a ``DILocation`` (line > 0)."""
    lines = ir.splitlines()
    locations = {}
    for text in lines:
        found = _DILOCATION.match(text)
        if found:
            locations[found["id"]] = int(found["line"])
    links = []
    for number, text in enumerate(lines):
        if text.startswith("!") or text.startswith("define"):
            continue
        ref = _DBG_REF.search(text)
        if ref and locations.get(ref["id"], 0) > 0:
            links.append({"line": number, "sourceLine": locations[ref["id"]] - 1})
    return links


def _is_instruction(text: str) -> bool:
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith((".", "#", ";", "//")) and not _ASM_LABEL.match(text)


def asm_links(asm: str, file_hint: str = "CodeGenLLVM") -> list[dict]:
    """Links of assembly instructions to the line of the last ``.loc`` before them.

    ``.loc`` of line 0 ends the current line (compiler-generated code).  Only files whose name
    contains ``file_hint`` count (TVM names its debug file ``IRModule.CodeGenLLVM``); when the
    file table does not name one, every ``.loc`` counts.
    """
    lines = asm.splitlines()
    ours = {m["file"] for m in map(_ASM_FILE.match, lines) if m and file_hint in m["names"]}
    current, links = 0, []
    for number, text in enumerate(lines):
        loc = _ASM_LOC.match(text)
        if loc:
            current = int(loc["line"]) if (not ours or loc["file"] in ours) else 0
            continue
        if text.strip() == ".cfi_endproc":
            current = 0
        if current > 0 and _is_instruction(text):
            links.append({"line": number, "sourceLine": current - 1})
    return links


def drop_parallel(insts: list, decisions: list) -> tuple[list, list]:
    """A recorded trace without its ``Parallel`` instructions (decision indices renumbered).

    Parallel loop bodies become ``__tvm_parallel_lambda`` functions without debug info, so their
    assembly has no ``.loc`` lines; the serial variant keeps them (docs/tvm.md §5).
    """
    keep = [i for i, inst in enumerate(insts) if not (isinstance(inst, list) and inst and inst[0] == "Parallel")]
    renumber = {old: new for new, old in enumerate(keep)}
    kept_decisions = [[renumber[int(d[0])], d[1]] for d in decisions if int(d[0]) in renumber]
    return [insts[i] for i in keep], kept_decisions


def by_source(links: Iterable[dict]) -> dict[int, list[int]]:
    """``{source line: [generated lines]}`` (both 0-based), generated lines sorted."""
    out: dict[int, list[int]] = {}
    for link in links:
        out.setdefault(link["sourceLine"], []).append(link["line"])
    return {src: sorted(lines) for src, lines in sorted(out.items())}


def attach_shares(links: list[dict], blocks: list[dict]) -> list[dict]:
    """Per link, the latency share of the source block whose lines contain its source line.

    ``blocks`` are ``{"name", "share", "us", "start", "end"}`` (0-based source lines of the block's
    range).  The innermost (shortest) containing block wins.  The share is the *block's* measured
    share (rdtsc per stage, split per block), repeated on each generated line of that block: it is
    not a per-instruction measurement.
    """
    ranked = sorted((b for b in blocks if b.get("share") is not None), key=lambda b: b["end"] - b["start"])
    out = []
    for link in links:
        found = next((b for b in ranked if b["start"] <= link["sourceLine"] <= b["end"]), None)
        item = dict(link)
        if found is not None:
            item.update(block=found["name"], share=found["share"], us=found.get("us"))
        out.append(item)
    return out


def attach_line_counts(links: list[dict], counts: list[dict], key: str = "Ir") -> list[dict]:
    """Per link, the share of ``key`` (cachegrind's executed instructions by default) counted at
    its source line: ``counts`` are ``{"line": 1-based TVMScript line, key: n}`` rows of one kernel.

    This one *is* per source line (simulated, serial build): every generated line of a source
    line shows that line's share of the kernel's total.
    """
    per_line: dict[int, float] = {}
    for row in counts:
        if isinstance(row.get("line"), int) and row["line"] > 0 and isinstance(row.get(key), (int, float)):
            per_line[row["line"] - 1] = per_line.get(row["line"] - 1, 0) + row[key]
    total = sum(per_line.values())
    if not total:
        return links
    out = []
    for link in links:
        item = dict(link)
        if link["sourceLine"] in per_line:
            item["lineShare"] = per_line[link["sourceLine"]] / total
        out.append(item)
    return out


def line_table(text: str, links: list[dict]) -> list[dict]:
    """Rows for a text listing: ``{line, text, sourceLine?, share?}`` per generated line."""
    linked = {link["line"]: link for link in links}
    rows = []
    for number, line in enumerate(text.splitlines()):
        row = {"line": number, "text": line}
        if number in linked:
            row.update({k: v for k, v in linked[number].items() if k != "line"})
        rows.append(row)
    return rows


_CUDA_ASSIGN = re.compile(r"^(?P<lhs>[^=;{}]*?[\]\)])\s*(?P<op>[-+*/]?=)(?!=)\s*(?P<rhs>.*?);?\s*$")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_CONSTANT_RHS = re.compile(r"^(?:make_\w+\()?[\s,()]*(?:[-+]?(?:0x[0-9a-fA-Fp.+-]+|\d[\d.eE+-]*)f?(?:/\*[^*]*\*/)?"
                           r"[\s,()]*)+\)?$")


def cuda_links(source: str, stores: list) -> list[dict]:
    """Links of CUDA C lines to TVMScript lines by the buffer each line stores to.

    TVM's CUDA codegen writes no line directives; what survives is the buffer name (``C_local`` as
    ``C_local_ptr[...]`` or ``C_local[...]``).  ``stores`` are the lowered TIR stores with a span:
    ``[buffer, source line (1-based), stores a constant?]`` (``worker/generated_code.store_lines``).
    An assignment to a buffer links to the source line of its stores: a constant stored (an init)
    to the constant stores' line, anything else to the others'; a buffer stored from several source
    lines links to the first.  Other lines (index arithmetic, loops, declarations) get no link.
    """
    lines_of: dict = {}
    for buffer, line, constant in stores:
        lines_of.setdefault((buffer, bool(constant)), []).append(int(line))
    links = []
    for number, text in enumerate(source.splitlines()):
        m = _CUDA_ASSIGN.match(text.strip())
        if not m or text.strip().startswith(("for", "if", "//", "#")):
            continue
        constant = bool(_CONSTANT_RHS.match(m.group("rhs").strip()))
        for ident in _IDENT.findall(m.group("lhs")):
            name = ident[:-4] if ident.endswith("_ptr") else ident
            found = lines_of.get((name, constant)) or lines_of.get((name, not constant))
            if found:
                links.append({"line": number, "sourceLine": min(found) - 1})
                break
    return links


# --------------------------------------------------------------------------- a Relax task's kernel -> its call sites


def block_spans(text: str) -> list[tuple[str, int, int]]:
    """``(block, first line, last line)`` (0-based) of every ``with T.sblock("…")`` of scheduled
    TVMScript: the header and the lines indented below it."""
    lines = text.splitlines()
    out = []
    for number, line in enumerate(lines):
        found = _SBLOCK.search(line)
        if not found or not line.lstrip().startswith("with"):
            continue
        indent, last = _indent(line), number
        for k in range(number + 1, len(lines)):
            if lines[k].strip() and _indent(lines[k]) <= indent:
                break
            last = k
        out.append((found["name"], number, last))
    return out


def source_block(name: str, known: Iterable[str], lineage: list[dict]) -> str | None:
    """The fused kernel's block a scheduled block comes from: itself, the block the trace derived it
    from (lineage), else the longest known name it extends (``conv2d_nchw_init`` -> ``conv2d_nchw``)."""
    known = set(known)
    if name in known:
        return name
    for entry in lineage:
        if entry.get("block") == name and entry.get("source") in known:
            return entry["source"]
    prefixes = [k for k in known if name.startswith(k + "_")]
    return max(prefixes, key=len) if prefixes else None


def task_links(text: str, sites: list[dict], lineage: list[dict]) -> list[dict]:
    """Links of a Relax task's scheduled kernel to the bindings of each of its call sites.

    ``sites``: the worker's ``callSites``, each with ``blockVars`` ``{block: [binding, 1-based
    line]}``.  Every generated line of a block gets one link per call: ``sourceLine`` (0-based) is
    the binding that block computes in that call, ``binding`` and ``call`` name it."""
    links = []
    for block, first, last in block_spans(text):
        for site in sites:
            vars_ = site.get("blockVars") or {}
            origin = source_block(block, vars_, lineage)
            var, line = (vars_.get(origin) or [None, None]) if origin else (None, None)
            if var is None or not isinstance(line, int) or line < 1:
                continue
            for generated in range(first, last + 1):
                links.append({"line": generated, "sourceLine": line - 1, "binding": var, "call": site.get("call", 0),
                              "block": origin})
    return sorted(links, key=lambda l: (l["line"], l["call"]))


# --------------------------------------------------------------------------- PTX -> CUDA C -> TVMScript

_PTX_FILE = re.compile(r"^\s*\.file\s+(\d+)\s+\"([^\"]*)\"")
_PTX_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)")


def _ptx_instruction(text: str) -> bool:
    s = text.strip()
    return bool(s) and not s.startswith((".", "//", "{", "}", "$", ")", "(")) and not s.endswith(":")


def ptx_links(ptx: str, cuda: list[dict], source_suffix: str = ".cu") -> list[dict]:
    """Links of PTX instructions to TVMScript lines through the CUDA C they were compiled from.

    PTX compiled with ``-lineinfo`` carries ``.loc FILE LINE COL`` before the instructions of each
    CUDA line (1-based lines of the kernel source, the ``.file`` ending in ``source_suffix``).
    ``cuda`` are that source's links (``cuda_links``: 0-based ``line`` -> ``sourceLine``): an
    instruction under ``.loc`` of a linked CUDA line links to its TVMScript line (``cudaLine`` kept).
    """
    by_cuda = {link["line"]: link["sourceLine"] for link in cuda}
    lines = ptx.splitlines()
    files = {m.group(1) for m in map(_PTX_FILE.match, lines) if m and m.group(2).endswith(source_suffix)}  # at the end
    current, links = None, []
    for number, text in enumerate(lines):
        m = _PTX_LOC.match(text)
        if m:
            current = int(m.group(2)) - 1 if m.group(1) in files else None
            continue
        if current is not None and current in by_cuda and _ptx_instruction(text):
            links.append({"line": number, "sourceLine": by_cuda[current], "cudaLine": current})
    return links


def ptx_failure(message: str, arch: str | None, compiler: str) -> str:
    """One line for a PTX build that failed: the compiler's own error (TVM's message starts with the
    CUDA source, so its first line is e.g. "#ifdef __CUDACC_RTC__", not the error)."""
    said = message.split("Compilation error:", 1)[-1].splitlines()
    errors = [ln.strip() for ln in said if "error" in ln.lower() or "fatal" in ln.lower()] or ["(no message)"]
    line = f"the ptx level compiles the run's CUDA for {arch or 'its GPU'} with {compiler} here, which failed: {errors[0][:200]}"
    number = int("".join(ch for ch in str(arch or "") if ch.isdigit()) or 0)
    if "unsupported gpu architecture" in errors[0].lower() and 50 <= number <= 72:
        line += (" (CUDA 13's nvcc no longer compiles for sm_50-sm_72: use an nvcc of CUDA 12 or older for this run's "
                 "PTX)")
    return line + "; the cuda level shows the kernels' source"
