"""What a MetaSchedule trace did to each source block, read from the JSON record (no TVM).

A tuning record's trace is a list of instructions ``[kind, inputs, attrs, outputs]`` plus the
sampling decisions ``[[instruction index, decision], ...]`` (see ``runs.read_records``).  Inputs
and outputs name random variables: ``b0`` a block, ``l2`` a loop, ``v5`` a sampled value.  This
module replays the trace symbolically: it follows every loop from the source loop it came from
(``i`` split four ways gives ``i0..i3``; a fuse of ``i0`` and ``j0`` covers both), so it can say
per source block and per source loop what the schedule did:

* split factors (``SamplePerfectTile`` decisions), the loop order after ``Reorder``;
* parallel / vectorize / unroll (the post-processor's ``Parallel``, ``Vectorize`` and
  ``pragma_auto_unroll_max_step``, or the sketch's ``meta_schedule.*`` annotations);
* cache reads and writes with the block they create and where it was placed;
* compute-at / reverse-compute-at, inlining, reduction decomposition, thread binding.

Blocks the trace does not name (``GetChildBlocks``, ``GetConsumers``) are matched to source or
derived blocks by program order and by their loop count; what cannot be matched is left out
rather than guessed.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable


_RV = re.compile(r"^[blv]\d+$")


UNROLL_KEYS = ("pragma_auto_unroll_max_step",)


SKETCH_KEYS = {"meta_schedule.parallel": "parallel_max", "meta_schedule.vectorize": "vectorize_max",
               "meta_schedule.unroll_explicit": "unroll_max", "meta_schedule.unroll_implicit": "unroll_max"}


@dataclass
class _Loop:
    labels: list[str]            # source tiles this loop covers, outermost first ("i0", "j0")
    extent: int | None = None
    block: str | None = None     # block whose GetLoops produced it


@dataclass
class _Block:
    name: str
    loops: list[str] | None = None   # current loop rvs (outermost first); None = unknown
    source: bool = True
    origin: str | None = None        # the source block a derived block came from
    gone: bool = False               # inlined
    moved: bool = False              # compute-at: its loops are no longer the source loops
    under: list | None = None        # compute-at: the loop rvs above it (its target's, outermost first)


@dataclass
class SourceBlock:
    """What the replay needs to know about a source block (see ``source_blocks``)."""
    name: str
    loop_vars: list[str] = field(default_factory=list)   # enclosing loop vars, outermost first
    extents: list[Any] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)


def source_blocks(function: Any) -> list[SourceBlock]:
    """``SourceBlock``s of a ``tvmscript.model.Function`` (program order), loop vars flattened."""
    loops = {lp.id: lp for lp in function.loops}
    out = []
    for blk in function.blocks:
        if blk.name == "root":
            continue
        loop_vars, extents = [], []
        for loop_id in blk.loops:
            loop = loops.get(loop_id)
            if loop is None:
                continue
            exts = list(loop.extents) + [None] * (len(loop.vars) - len(loop.extents))
            loop_vars.extend(loop.vars)
            extents.extend(exts[:len(loop.vars)])
        out.append(SourceBlock(blk.name, loop_vars, extents, list(blk.reads), list(blk.writes)))
    return out


class _Replay:
    """Symbolic replay of one trace; fills ``self.blocks`` (name -> summary dict)."""

    def __init__(self, insts: list, decisions: list, sources: Iterable[SourceBlock]):
        self.insts = insts
        self.decisions = {int(i): d for i, d in decisions if isinstance(i, int) or str(i).isdigit()}
        self.sources = {s.name: s for s in sources}
        self.order = [s.name for s in sources]       # program order of live blocks (source + derived)
        self.rvs: dict[str, Any] = {}
        self.states: dict[str, _Block] = {}
        self.blocks: dict[str, dict] = {}
        self.function: dict[str, Any] = {}
        self.in_postproc = False

    # -- helpers
    def summary(self, name: str) -> dict:
        if name not in self.blocks:
            self.blocks[name] = {"name": name, "splits": {}, "order": None, "parallel": None, "vectorize": None,
                                 "unroll": None, "cache": [], "compute_at": None, "inline": None,
                                 "decompose_reduction": None, "bind": [], "tiling": None, "steps": [],
                                 "derived_from": None, "all_steps": []}
        return self.blocks[name]

    def block(self, rv: Any) -> _Block | None:
        value = self.rvs.get(rv) if isinstance(rv, str) else None
        return value if isinstance(value, _Block) else None

    def loop(self, rv: Any) -> _Loop | None:
        value = self.rvs.get(rv) if isinstance(rv, str) else None
        return value if isinstance(value, _Loop) else None

    def value(self, arg: Any) -> Any:
        """An instruction input as a plain value: a sampled int, a literal, or None."""
        if isinstance(arg, str):
            if _RV.match(arg):
                found = self.rvs.get(arg)
                return found if isinstance(found, (int, float)) else None
            if arg == "None":
                return None
            try:
                return json.loads(arg)
            except (ValueError, TypeError):
                return arg
        return arg

    def step(self, block: str, text: str) -> None:
        self.summary(block)["steps"].append(text)
        self.summary(block)["all_steps"].append(text)

    def post_step(self, block: str, text: str) -> None:
        """A post-processor's loop rewrite (the fuse/split that makes the parallel and vector loops):
        not a sampled decision, so only in ``all_steps`` (what the schedule did, in order)."""
        self.summary(block)["all_steps"].append(text)

    def state(self, name: str, source: bool = True) -> _Block:
        if name not in self.states:
            self.states[name] = _Block(name, source=source)
        return self.states[name]

    def owner(self, loop: _Loop) -> str | None:
        return loop.block

    # -- run
    def run(self) -> None:
        for index, inst in enumerate(self.insts):
            if not isinstance(inst, list) or len(inst) < 4:
                continue
            kind, inputs, attrs, outputs = inst[0], inst[1] or [], inst[2] or [], inst[3] or []
            handler = getattr(self, "do_" + kind, None)
            if handler is not None:
                try:
                    handler(index, inputs, attrs, outputs)
                except (IndexError, KeyError, TypeError, ValueError):
                    continue  # an instruction of an unexpected shape: skip it, keep the rest

    # -- blocks
    def do_GetSBlock(self, index, inputs, attrs, outputs):
        name = attrs[0]
        st = self.state(name)
        if name == "root":
            st.source = False
        self.rvs[outputs[0]] = st

    do_GetBlock = do_GetSBlock  # TVM < 0.20 spelling

    def do_GetLoops(self, index, inputs, attrs, outputs):
        st = self.block(inputs[0])
        if st is None:
            return
        if st.loops is not None and len(st.loops) == len(outputs):
            for old, new in zip(st.loops, outputs):
                previous = self.rvs.get(old)
                self.rvs[new] = previous if isinstance(previous, _Loop) else _Loop([new], None, st.name)
        elif st.loops is None and st.source and not st.moved:
            src = self.sources.get(st.name) or SourceBlock(st.name)
            vars_, extents = src.loop_vars[-len(outputs):], src.extents[-len(outputs):]
            if len(vars_) < len(outputs):
                vars_ = [f"loop{i}" for i in range(len(outputs) - len(vars_))] + vars_
                extents = [None] * (len(outputs) - len(extents)) + extents
            for rv, var, ext in zip(outputs, vars_, extents):
                self.rvs[rv] = _Loop([var], ext if isinstance(ext, int) else None, st.name)
        else:
            self._loops_made(st, outputs)
        st.loops = list(outputs)

    def _loops_made(self, st: _Block, outputs) -> None:
        """Loops of a block the schedule made or moved: the loops it was computed under are its
        target's (labels kept), its own are named as TVM names them (``ax0``, ``ax1``, …)."""
        above = [self.rvs.get(rv) for rv in (st.under or [])][:len(outputs)]
        above = above if all(isinstance(lp, _Loop) for lp in above) else []
        for rv, loop in zip(outputs, above):
            self.rvs[rv] = loop
        for k, rv in enumerate(outputs[len(above):]):
            self.rvs[rv] = _Loop([f"ax{k}"], None, st.name)

    def _live(self) -> list[_Block]:
        return [self.state(n) for n in self.order if not self.state(n).gone]

    def do_GetChildBlocks(self, index, inputs, attrs, outputs):
        parent = self.block(inputs[0])
        live = self._live() if parent is not None and parent.name == "root" else []
        if len(live) == len(outputs):
            for rv, st in zip(outputs, live):
                self.rvs[rv] = st

    def do_GetConsumers(self, index, inputs, attrs, outputs):
        self._neighbours(inputs[0], outputs, consumers=True)

    def do_GetProducers(self, index, inputs, attrs, outputs):
        self._neighbours(inputs[0], outputs, consumers=False)

    def _neighbours(self, rv, outputs, consumers: bool) -> None:
        st = self.block(rv)
        src = self.sources.get(st.name) if st else None
        if src is None:
            return
        found = []
        for other in self.sources.values():
            if other.name == src.name or self.state(other.name).gone:
                continue
            shared = set(src.writes) & set(other.reads) if consumers else set(src.reads) & set(other.writes)
            if shared:
                found.append(other.name)
        if len(found) == len(outputs):
            for out, name in zip(outputs, found):
                self.rvs[out] = self.state(name)

    # -- sampling
    def do_SamplePerfectTile(self, index, inputs, attrs, outputs):
        decision = self.decisions.get(index)
        if isinstance(decision, list) and len(decision) == len(outputs):
            for rv, factor in zip(outputs, decision):
                self.rvs[rv] = int(factor)

    do_SamplePartitionedTile = do_SamplePerfectTile

    def do_SampleCategorical(self, index, inputs, attrs, outputs):
        decision = self.decisions.get(index)
        candidates = attrs[0] if attrs else []
        if isinstance(decision, int) and 0 <= decision < len(candidates):
            self.rvs[outputs[0]] = candidates[decision]

    def do_SampleComputeLocation(self, index, inputs, attrs, outputs):
        decision = self.decisions.get(index)
        self.rvs[outputs[0]] = ("location", decision)

    # -- loop transformations
    def do_Split(self, index, inputs, attrs, outputs):
        loop = self.loop(inputs[0])
        if loop is None:
            return
        factors = [self.value(a) for a in inputs[1:]]
        if None in factors and loop.extent and all(isinstance(f, int) for f in factors if f is not None):
            known = 1
            for f in factors:
                known *= f if f is not None else 1
            factors = [f if f is not None else -(-loop.extent // known) for f in factors]
        names = loop.labels
        single = len(names) == 1 and not re.search(r"\d$", names[0])
        base = names[0] if single else f"({'·'.join(names)})"
        labels = [[f"{base}{k}"] for k in range(len(outputs))]
        for rv, lab, factor in zip(outputs, labels, factors):
            self.rvs[rv] = _Loop(lab, factor if isinstance(factor, int) else None, loop.block)
        self._replace(loop.block, inputs[0], outputs)
        if loop.block and len(names) == 1 and all(isinstance(f, int) for f in factors):
            summary = self.summary(loop.block)
            if not self.in_postproc:
                summary["splits"][names[0]] = factors
                self.step(loop.block, f"split {names[0]} → {'×'.join(str(f) for f in factors)}")
        if loop.block and self.in_postproc:
            self.post_step(loop.block, f"split {' '.join(names) or 'a loop'}")

    def _replace(self, block: str | None, old: str, new: list[str]) -> None:
        st = self.states.get(block) if block else None
        if st is not None and st.loops is not None and old in st.loops:
            i = st.loops.index(old)
            st.loops[i:i + 1] = list(new)

    def do_Fuse(self, index, inputs, attrs, outputs):
        loops = [self.loop(rv) for rv in inputs]
        if any(lp is None for lp in loops):
            return
        extent = 1
        for lp in loops:
            extent = extent * lp.extent if (extent is not None and lp.extent is not None) else None
        labels = [lab for lp in loops for lab in lp.labels]
        fused = _Loop(labels, extent, loops[0].block)
        self.rvs[outputs[0]] = fused
        st = self.states.get(fused.block) if fused.block else None
        if st is not None and st.loops is not None and all(rv in st.loops for rv in inputs):
            first = st.loops.index(inputs[0])
            st.loops = [rv for rv in st.loops if rv not in inputs]
            st.loops.insert(first, outputs[0])
        if len(inputs) > 1 and fused.block and not self.in_postproc:
            self.step(fused.block, f"fuse {' '.join(labels)}")
        elif len(inputs) > 1 and fused.block:
            self.post_step(fused.block, f"fuse {' '.join(labels)}")

    def do_Reorder(self, index, inputs, attrs, outputs):
        loops = [self.loop(rv) for rv in inputs]
        if not loops or any(lp is None for lp in loops):
            return
        block = loops[0].block
        st = self.states.get(block) if block else None
        if st is not None and st.loops is not None and all(rv in st.loops for rv in inputs):
            slots = sorted(st.loops.index(rv) for rv in inputs)
            for slot, rv in zip(slots, inputs):
                st.loops[slot] = rv
        if block:
            order = [lab for lp in loops for lab in lp.labels]
            self.summary(block)["order"] = order
            self.step(block, "reorder " + " ".join(order))

    def _annotate_loop(self, kind: str, rv: str) -> None:
        loop = self.loop(rv)
        if loop is None or not loop.block:
            return
        entry = {"loops": list(loop.labels), "extent": loop.extent}
        summary = self.summary(self._target_block(loop.block))
        verb = {"parallel": "parallel", "vectorize": "vectorize", "unroll": "unroll"}[kind]
        if kind in ("parallel", "vectorize") and summary[kind] is not None:
            return  # keep the first (outermost parallel / the block's own vector loop)
        summary[kind] = entry if kind != "unroll" else {"loops": entry["loops"], "max_step": None, "explicit": True}
        what = " ".join(loop.labels) or ("the outer loop" if kind == "parallel" else "the inner loop")
        size = f" ({loop.extent} iterations)" if kind == "parallel" and loop.extent else \
            f" (width {loop.extent})" if kind == "vectorize" and loop.extent else ""
        self.step(summary["name"], f"{verb} {what}{size}")

    def _target_block(self, name: str) -> str:
        return name

    def do_Parallel(self, index, inputs, attrs, outputs):
        self._annotate_loop("parallel", inputs[0])

    def do_Vectorize(self, index, inputs, attrs, outputs):
        self._annotate_loop("vectorize", inputs[0])

    def do_Unroll(self, index, inputs, attrs, outputs):
        self._annotate_loop("unroll", inputs[0])

    def do_Bind(self, index, inputs, attrs, outputs):
        loop = self.loop(inputs[0])
        if loop is None or not loop.block:
            return
        thread = attrs[0] if attrs else "?"
        self.summary(loop.block)["bind"].append({"loops": list(loop.labels), "thread": thread, "extent": loop.extent})
        extent = f" ({loop.extent:,})" if isinstance(loop.extent, int) else ""
        self.step(loop.block, f"bind {' '.join(loop.labels)} to {thread}{extent}")

    def do_Annotate(self, index, inputs, attrs, outputs):
        key = attrs[0] if attrs else ""
        value = self.value(inputs[1]) if len(inputs) > 1 else None
        target = self.rvs.get(inputs[0]) if isinstance(inputs[0], str) else None
        if key in SKETCH_KEYS:
            self.function[SKETCH_KEYS[key]] = value
        elif key == "meta_schedule.tiling_structure" and isinstance(target, _Block):
            self.summary(target.name)["tiling"] = value
            self.step(target.name, f"multi-level tiling {value}")
        elif key in UNROLL_KEYS and isinstance(target, _Loop) and target.block:
            summary = self.summary(target.block)
            unroll = summary["unroll"] or {"loops": list(target.labels), "max_step": None, "explicit": False}
            unroll["max_step"] = value
            summary["unroll"] = unroll
            self.step(target.block, f"unroll up to {value} steps at {' '.join(target.labels) or 'the outer loop'}")
        elif key == "pragma_unroll_explicit" and isinstance(target, _Loop) and target.block:
            summary = self.summary(target.block)
            if summary["unroll"] is not None:
                summary["unroll"]["explicit"] = bool(value)

    # -- block transformations
    def _new_block(self, name: str, origin: str, after: bool) -> _Block:
        st = self.state(name, source=False)
        st.origin = origin
        if name not in self.order:
            pos = self.order.index(origin) + (1 if after else 0) if origin in self.order else len(self.order)
            self.order.insert(pos, name)
        self.summary(name)["derived_from"] = origin
        return st

    def _cache(self, kind: str, inputs, attrs, outputs) -> None:
        st = self.block(inputs[0])
        if st is None:
            return
        buffer_index, scope = (attrs + [0, "global"])[:2] if len(attrs) < 2 else attrs[:2]
        src = self.sources.get(st.name)
        buffers = (src.writes if kind == "write" else src.reads) if src else []
        buffer = buffers[buffer_index] if isinstance(buffer_index, int) and buffer_index < len(buffers) else None
        name = f"{buffer}_{scope}" if buffer else f"{st.name}_{kind}_{scope}"
        new = self._new_block(name, st.name, after=(kind == "write"))
        self.rvs[outputs[0]] = new
        entry = {"kind": kind, "buffer": buffer, "scope": scope, "block": name, "at": None}
        self.summary(st.name)["cache"].append(entry)
        arrow = f"{buffer} → {name}" if buffer else name
        self.step(st.name, f"cache {kind} {arrow} ({scope})")

    def do_CacheWrite(self, index, inputs, attrs, outputs):
        self._cache("write", inputs, attrs, outputs)

    def do_CacheRead(self, index, inputs, attrs, outputs):
        self._cache("read", inputs, attrs, outputs)

    def do_ReindexCacheRead(self, index, inputs, attrs, outputs):
        self._cache("read", inputs, attrs, outputs)

    def do_ReindexCacheWrite(self, index, inputs, attrs, outputs):
        self._cache("write", inputs, attrs, outputs)

    def _compute_at(self, kind: str, inputs) -> None:
        st = self.block(inputs[0])
        where = self.rvs.get(inputs[1]) if isinstance(inputs[1], str) else None
        if st is None:
            return
        if isinstance(where, tuple) and where[0] == "location":
            decision = where[1]
            if decision == -1:
                return  # stays at the root: nothing changes
            if decision == -2:
                self._inline(st, "compute_inline")
                return
            entry = {"kind": kind, "loop": None, "block": None, "position": decision}
            text = f"{kind.replace('_', ' ')} (location #{decision})"
        elif isinstance(where, _Loop):
            target = self.states.get(where.block) if where.block else None
            loops = target.loops if target is not None and target.loops else []
            st.under = loops[:loops.index(inputs[1]) + 1] if inputs[1] in loops else None
            entry = {"kind": kind, "loop": " ".join(where.labels) or None, "block": where.block, "position": None}
            text = f"{kind.replace('_', ' ')} {' '.join(where.labels)}" + (f" of {where.block}" if where.block else "")
        else:
            return
        st.loops, st.moved = None, True  # its loops are new and unnamed now
        self.summary(st.name)["compute_at"] = entry
        self.step(st.name, text)
        origin = st.origin
        if origin:
            for cache in self.summary(origin)["cache"]:
                if cache["block"] == st.name:
                    cache["at"] = entry["loop"]

    def do_ComputeAt(self, index, inputs, attrs, outputs):
        self._compute_at("compute_at", inputs)

    def do_ReverseComputeAt(self, index, inputs, attrs, outputs):
        self._compute_at("reverse_compute_at", inputs)

    def _inline(self, st: _Block, kind: str) -> None:
        st.gone = True
        self.summary(st.name)["inline"] = kind
        self.step(st.name, "inlined into its consumer" if kind == "compute_inline" else "inlined into its producer")

    def do_ComputeInline(self, index, inputs, attrs, outputs):
        st = self.block(inputs[0])
        if st is not None:
            self._inline(st, "compute_inline")

    def do_ReverseComputeInline(self, index, inputs, attrs, outputs):
        st = self.block(inputs[0])
        if st is not None:
            self._inline(st, "reverse_compute_inline")

    def do_DecomposeReduction(self, index, inputs, attrs, outputs):
        st = self.block(inputs[0])
        loop = self.loop(inputs[1])
        if st is None:
            return
        at = " ".join(loop.labels) if loop is not None and loop.labels else None
        self.summary(st.name)["decompose_reduction"] = at
        init = self._new_block(f"{st.name}_init", st.name, after=False)
        init.loops = None
        self.rvs[outputs[0]] = init
        self.step(st.name, f"decompose reduction at {at or 'a loop'} → {st.name}_init / {st.name}_update")

    def do_RFactor(self, index, inputs, attrs, outputs):
        """The rfactor block (TVM names it ``<block>_rf``) is new and placed before its block, so
        later ``GetChildBlocks`` of the root count it (LayerNorm: 5 children, not 3)."""
        loop = self.loop(inputs[0])
        if loop is not None and loop.block:
            self.step(loop.block, f"rfactor over {' '.join(loop.labels)}")
            rf = self._new_block(f"{loop.block}_rf", loop.block, after=False)
            rf.loops = None
            if outputs:
                self.rvs[outputs[0]] = rf

    def do_EnterPostproc(self, index, inputs, attrs, outputs):
        self.in_postproc = True

    def do_Tensorize(self, index, inputs, attrs, outputs):
        target = self.rvs.get(inputs[0]) if inputs and isinstance(inputs[0], str) else None
        block = target.name if isinstance(target, _Block) else target.block if isinstance(target, _Loop) else None
        if block:
            self.step(block, f"tensorize with {attrs[0] if attrs else '?'}")
