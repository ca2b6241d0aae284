"""Sampling decisions and design-space sketch of a MetaSchedule trace (JSON record, no TVM).

A record's trace is ``insts`` (``[kind, inputs, attrs, outputs]``) plus ``decisions``
(``[[instruction index, decision], ...]``).  Here each decision is tied to the block it applies
to (following ``GetSBlock`` names and ``GetLoops`` / ``Split`` / ``GetConsumers`` outputs), to the
position of its loop in the block's ``GetLoops`` and to the annotation a categorical value feeds;
and the trace's non-sampling instructions before ``EnterPostproc`` give the sketch it came from.
The per-block *effects* of a trace (splits, parallel, cache, compute-at) are in
``trace_summary``; this module is about the sampled coordinates of the search space.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Iterable

SAMPLE_PREFIX = "Sample"
POSTPROC = "EnterPostproc"
# Instructions that shape a sketch, and how to describe one (block name filled in).
_TAGS = {"CacheWrite": "cache-write {block}", "CacheRead": "cache-read {block}",
         "ReindexCacheWrite": "cache-write {block}", "ReindexCacheRead": "cache-read {block}",
         "ReverseComputeAt": "fuse {block} at {loop}", "ComputeAt": "compute {block} at {loop}",
         "ComputeInline": "inline {block}", "ReverseComputeInline": "inline {block} into its producer",
         "RFactor": "rfactor {block}", "Blockize": "blockize {block}", "Tensorize": "tensorize {block}",
         "AddUnitLoop": "unit loop {block}", "Bind": "thread binding"}


@dataclass(slots=True)
class Decision:
    """One sampled coordinate of a candidate.

    ``key`` names the coordinate across candidates (``matmul:SamplePerfectTile:loop2``); ``value``
    is the tile factors (list), the chosen categorical value, or the compute-location index.
    """
    key: str
    inst: str
    block: str | None
    value: Any
    loop: int | None = None        # position of the tiled loop among the block's GetLoops outputs
    loop_var: str | None = None    # source loop var at that position, when known
    annotation: str | None = None  # annotation a SampleCategorical value feeds
    candidates: tuple | None = None  # SampleCategorical's candidate values


@dataclass
class BlockInfo:
    """What the resolver needs about a source block: loop vars, reads, writes."""
    name: str
    loop_vars: list[str]
    reads: list[str]
    writes: list[str]


def block_infos(function: Any) -> dict[str, BlockInfo]:
    """``BlockInfo`` per block of a ``tvmscript.model.Function`` (loop vars outermost first)."""
    loops = {lp.id: lp for lp in function.loops}
    out = {}
    for blk in function.blocks:
        loop_vars = [v for lid in blk.loops if lid in loops for v in loops[lid].vars]
        out[blk.name] = BlockInfo(blk.name, loop_vars, list(blk.reads), list(blk.writes))
    return out


class _Resolver:
    """Follows random variables: block rvs to names, loop rvs to (block, GetLoops position)."""

    def __init__(self, blocks: dict[str, BlockInfo]):
        self.blocks = blocks
        self.rv: dict[str, tuple] = {}

    def block_of(self, rv: Any) -> str | None:
        found = self.rv.get(rv) if isinstance(rv, str) else None
        return found[1] if found else None

    def loop_label(self, rv: Any) -> str | None:
        """``j0`` for the outermost tile of source loop j (None when not known)."""
        found = self.rv.get(rv) if isinstance(rv, str) else None
        return found[3] if found and len(found) > 3 else None

    def loop_of(self, rv: Any) -> tuple[str | None, int | None]:
        found = self.rv.get(rv) if isinstance(rv, str) else None
        if found and found[0] == "loop":
            return found[1], found[2]
        return (found[1], None) if found else (None, None)

    def feed(self, kind: str, inputs: list, attrs: list, outputs: list) -> None:
        if kind in ("GetSBlock", "GetBlock") and attrs and outputs:
            self.rv[outputs[0]] = ("block", attrs[0])
        elif kind == "GetLoops" and inputs:
            block = self.block_of(inputs[0])
            info = self.blocks.get(block) if block else None
            names = info.loop_vars[-len(outputs):] if info and len(info.loop_vars) >= len(outputs) else []
            for pos, out in enumerate(outputs):
                self.rv[out] = ("loop", block, pos, names[pos] if names else f"loop{pos}")
        elif kind == "Fuse" and inputs and outputs:
            block, _ = self.loop_of(inputs[0])
            labels = [self.loop_label(rv) for rv in inputs]
            self.rv[outputs[0]] = ("derived", block, None, " ".join(labels) if all(labels) else None)
        elif kind == "Split" and inputs:
            block, _ = self.loop_of(inputs[0])
            base = self.loop_label(inputs[0])
            base = f"({base.replace(' ', '·')})" if base and " " in base else base
            for k, out in enumerate(outputs):
                self.rv[out] = ("derived", block, None, f"{base}{k}" if base else None)
        elif kind in ("GetConsumers", "GetProducers") and inputs:
            self._neighbours(self.block_of(inputs[0]), outputs, kind == "GetConsumers")
        elif kind in ("CacheWrite", "CacheRead", "ReindexCacheWrite", "ReindexCacheRead") and inputs and outputs:
            buffer = self.cached_buffer(kind, inputs, attrs)
            scope = attrs[1] if len(attrs) > 1 else "cache"
            self.rv[outputs[0]] = ("block", f"{buffer}_{scope}" if buffer else None)
        elif kind == "GetChildBlocks":
            for out in outputs:
                self.rv[out] = ("block", None)

    def cached_buffer(self, kind: str, inputs: list, attrs: list) -> str | None:
        """The buffer a cache read/write stages (TVM names the new block ``<buffer>_<scope>``): the
        block's read/write at the instruction's index; the block's name when that is not known."""
        block = self.block_of(inputs[0])
        info = self.blocks.get(block) if block else None
        names = (info.reads if "Read" in kind else info.writes) if info else []
        index = attrs[0] if attrs and isinstance(attrs[0], int) else None
        return names[index] if index is not None and 0 <= index < len(names) else block

    def _neighbours(self, name: str | None, outputs: list, consumers: bool) -> None:
        src = self.blocks.get(name) if name else None
        found = []
        if src is not None:
            for other in self.blocks.values():
                if other.name == src.name:
                    continue
                shared = set(src.writes) & set(other.reads) if consumers else set(src.reads) & set(other.writes)
                if shared:
                    found.append(other.name)
        names = found if len(found) == len(outputs) else [None] * len(outputs)
        for out, other in zip(outputs, names):
            self.rv[out] = ("block", other)


def _consumers(insts: list) -> dict[str, tuple[int, list]]:
    """rv -> (index, instruction) of its first use as an input."""
    uses: dict[str, tuple[int, list]] = {}
    for index, inst in enumerate(insts):
        for arg in (inst[1] or []) if isinstance(inst, list) and len(inst) > 1 else []:
            if isinstance(arg, str) and arg not in uses:
                uses[arg] = (index, inst)
    return uses


def _specs(insts: list, blocks: dict[str, BlockInfo]) -> dict[int, Decision]:
    """Per sampling instruction (by index): its ``Decision`` with a placeholder value."""
    resolver, uses, out, seen = _Resolver(blocks), None, {}, {}
    for index, inst in enumerate(insts or []):
        if not isinstance(inst, list) or len(inst) < 4:
            continue
        kind, inputs, attrs, outputs = inst[0], inst[1] or [], inst[2] or [], inst[3] or []
        if kind == POSTPROC:
            break
        if kind.startswith(SAMPLE_PREFIX):
            if uses is None:
                uses = _consumers(insts)
            found = _decision(kind, inputs, attrs, outputs, None, resolver, blocks, uses)
            if found is not None:
                count = seen.get(found.key, 0)
                seen[found.key] = count + 1
                if count:
                    found = replace(found, key=f"{found.key}#{count + 1}")
                out[index] = found
        resolver.feed(kind, inputs, attrs, outputs)
    return out


def _with_value(spec: Decision, value: Any) -> Decision:
    if spec.inst in ("SamplePerfectTile", "SamplePartitionedTile"):
        value = [int(v) for v in value] if isinstance(value, list) else value
    elif spec.inst == "SampleCategorical" and spec.candidates and isinstance(value, int) \
            and 0 <= value < len(spec.candidates):
        value = spec.candidates[value]
    return Decision(spec.key, spec.inst, spec.block, value, spec.loop, spec.loop_var, spec.annotation,
                    spec.candidates)


def _decided(specs: dict[int, Decision], decisions: list) -> list[Decision]:
    out = []
    for item in decisions or []:
        try:
            spec = specs.get(int(item[0]))
        except (TypeError, ValueError, IndexError):
            continue
        if spec is not None:
            out.append(_with_value(spec, item[1]))
    return out


def parse_decisions(insts: list, decisions: list, blocks: dict[str, BlockInfo] | None = None) -> list[Decision]:
    """The sampled decisions of a trace, each tied to its block (see ``Decision``)."""
    return _decided(_specs(insts, blocks or {}), decisions)


def _prefix(insts: list) -> list:
    for i, inst in enumerate(insts or []):
        if isinstance(inst, list) and inst and inst[0] == POSTPROC:
            return insts[:i]
    return list(insts or [])


class TraceParser:
    """Parses many traces fast: traces of one sketch share their instructions before
    post-processing, so block resolution, sketch signature and tags are worked out once per sketch."""

    def __init__(self, blocks: dict[str, BlockInfo] | None = None):
        self.blocks = blocks or {}
        self._cache: dict[str, tuple] = {}
        self._same: dict[int, tuple] = {}

    def parse(self, insts: list, decisions: list) -> tuple[tuple, list[str], list[Decision]]:
        """``(sketch signature, sketch tags, decisions)`` of one trace."""
        same = self._same.get(id(insts))
        if same is not None and same[0] is insts:   # the very list (store.runs.TraceReader shares them)
            return same[1][0], same[1][1], _decided(same[1][2], decisions)
        prefix = _prefix(insts)
        key = repr(prefix)
        entry = self._cache.get(key)
        if entry is None:
            entry = self._cache[key] = (sketch_signature(prefix), sketch_tags(prefix, self.blocks),
                                        _specs(prefix, self.blocks))
        self._same[id(insts)] = (insts, entry)      # holds ``insts``, so its id cannot be reused
        return entry[0], entry[1], _decided(entry[2], decisions)


def _decision(kind, inputs, attrs, outputs, value, resolver, blocks, uses) -> Decision | None:
    """The decision of one sampling instruction (``value`` may be None: filled by ``_with_value``)."""
    if kind in ("SamplePerfectTile", "SamplePartitionedTile"):
        block, pos = resolver.loop_of(inputs[0]) if inputs else (None, None)
        info = blocks.get(block) if block else None
        var = info.loop_vars[pos] if info and pos is not None and pos < len(info.loop_vars) else None
        factors = [int(v) for v in value] if isinstance(value, list) else value
        return Decision(f"{block}:{kind}:loop{pos}", kind, block, factors, loop=pos, loop_var=var)
    if kind == "SampleCategorical":
        candidates = tuple(attrs[0]) if attrs and isinstance(attrs[0], list) else None
        chosen = candidates[value] if candidates and isinstance(value, int) and 0 <= value < len(candidates) else value
        annotation, block = None, None
        use = uses.get(outputs[0]) if outputs else None
        if use is not None and use[1][0] == "Annotate":
            annotation = (use[1][2] or [None])[0]
            block = resolver.block_of(use[1][1][0]) if use[1][1] else None
        return Decision(f"{block}:{kind}:{annotation}", kind, block, chosen, annotation=annotation,
                        candidates=candidates)
    if kind == "SampleComputeLocation":
        block = resolver.block_of(inputs[0]) if inputs else None
        return Decision(f"{block}:{kind}", kind, block, value)
    block = resolver.block_of(inputs[0]) if inputs else None
    return Decision(f"{block}:{kind}", kind, block, value)


def sketch_signature(insts: list) -> tuple:
    """The design-space sketch of a trace: its non-sampling instructions before post-processing,
    with the attribute that distinguishes them (annotation key, block name, storage scope)."""
    out = []
    for inst in insts or []:
        if not isinstance(inst, list) or len(inst) < 4:
            continue
        kind, attrs = inst[0], inst[2] or []
        if kind == POSTPROC:
            break
        if kind.startswith(SAMPLE_PREFIX):
            continue
        extra = ""
        if kind in ("Annotate", "Unannotate", "GetSBlock", "GetBlock") and attrs:
            extra = str(attrs[0])
        elif kind in ("CacheWrite", "CacheRead") and len(attrs) > 1:
            extra = str(attrs[1])
        elif kind in ("ComputeAt", "ReverseComputeAt") and len(inst[1] or []) > 1:
            extra = str(inst[1][1])  # the loop: different levels are different sketches
        out.append(f"{kind}:{extra}" if extra else kind)
    return tuple(out)


def sketch_tags(insts: list, blocks: dict[str, BlockInfo] | None = None) -> list[str]:
    """Human-readable strategy tags of a trace's sketch (``cache-write matmul``, ...)."""
    resolver, tags = _Resolver(blocks or {}), []
    for inst in insts or []:
        if not isinstance(inst, list) or len(inst) < 4:
            continue
        kind, inputs, attrs, outputs = inst[0], inst[1] or [], inst[2] or [], inst[3] or []
        if kind == POSTPROC:
            break
        if kind in _TAGS:
            block = resolver.block_of(inputs[0]) if inputs else None
            if block is None and inputs:
                block, _ = resolver.loop_of(inputs[0])
            loop = None
            if kind in ("ComputeAt", "ReverseComputeAt") and len(inputs) > 1:
                target, _ = resolver.loop_of(inputs[1])
                label = resolver.loop_label(inputs[1])
                loop = f"{target} {label}" if target and label else (f"loop of {target}" if target else None)
            if kind in ("CacheRead", "ReindexCacheRead"):
                block = resolver.cached_buffer(kind, inputs, attrs)    # "cache-read A": the buffer it stages
            tag = _TAGS[kind].format(block=block or "a block", loop=loop or "a sampled loop")
            if tag not in tags:
                tags.append(tag)
        resolver.feed(kind, inputs, attrs, outputs)
    return tags


def label_sketches(tag_lists: Iterable[list[str]]) -> list[str]:
    """A short, distinct label per sketch: the tags that not every sketch shares."""
    tag_lists = [list(t) for t in tag_lists]
    common = set.intersection(*(set(t) for t in tag_lists)) if tag_lists else set()
    labels, used = [], {}
    for i, tags in enumerate(tag_lists):
        own = [t for t in tags if t not in common]
        label = " + ".join(own) if own else ("tiling only" if len(tag_lists) > 1 else "single sketch")
        used[label] = used.get(label, 0) + 1
        labels.append(label if used[label] == 1 else f"{label} ({used[label]})")
    return labels


def _snake(kind: str) -> str:
    out = ""
    for i, ch in enumerate(kind):
        if ch.isupper() and i and not kind[i - 1].isupper():
            out += "_"
        out += ch.lower()
    return out.replace("s_block", "sblock")


def format_trace(insts: list, decisions: list) -> str:
    """A readable listing of a recorded trace, in the style of ``Trace.as_python`` (no TVM):
    one ``outputs = sch.kind(inputs, attrs)`` line per instruction, sampled decisions inlined."""
    chosen = {}
    for item in decisions or []:
        try:
            chosen[int(item[0])] = item[1]
        except (TypeError, ValueError, IndexError):
            continue
    lines = []
    for index, inst in enumerate(insts or []):
        if not isinstance(inst, list) or len(inst) < 4:
            continue
        kind, inputs, attrs, outputs = inst[0], inst[1] or [], inst[2] or [], inst[3] or []
        if kind == POSTPROC:
            lines.append("# post-processing")
            continue
        args = [str(a) for a in inputs]
        if kind in ("GetSBlock", "GetBlock") and attrs:
            args = [f'name="{attrs[0]}"'] + ([f'func_name="{attrs[1]}"'] if len(attrs) > 1 else [])
        elif attrs:
            args.append(f"attrs={json_compact(attrs)}")
        if index in chosen:
            args.append(f"decision={json_compact(chosen[index])}")
        call = f"sch.{_snake(kind)}({', '.join(args)})"
        lines.append(f"{', '.join(outputs)} = {call}" if outputs else call)
    return "\n".join(lines)


def json_compact(value: Any) -> str:
    import json
    return json.dumps(value, separators=(", ", ": "))


def parse_trace_json(value: str | list) -> tuple[list, list]:
    """``(insts, decisions)`` from a trace JSON text or a record line's ``[insts, decisions]``."""
    data = json.loads(value) if isinstance(value, str) else value
    if isinstance(data, list) and len(data) == 2 and isinstance(data[0], list) and data[0] \
            and isinstance(data[0][0], list) and isinstance(data[0][0][0], str):
        return data[0], data[1]
    if isinstance(data, list) and len(data) >= 2 and isinstance(data[1], list) and len(data[1]) >= 1:
        trace = data[1][0]  # a database line: [workload, [[insts, decisions], run_secs, ...]]
        return trace[0], trace[1]
    raise ValueError("not a MetaSchedule trace")


def blocks_got(traces: Iterable[list]) -> set[str]:
    """The block names ``traces`` (each a record's ``insts``) get by name (``GetSBlock``)."""
    return {inst[2][0] for insts in traces for inst in insts or []
            if isinstance(inst, list) and len(inst) > 2 and inst[0] in ("GetSBlock", "GetBlock")
            and isinstance(inst[2], list) and inst[2] and isinstance(inst[2][0], str)}


def blocks_gone(traces: Iterable[list], names: Iterable[str]) -> list[str]:
    """The blocks ``traces`` get that are not among ``names`` (a function's blocks), sorted."""
    return sorted(blocks_got(traces) - set(names) - {"root"})


def blocks_named_otherwise(run_id: str, gone: list[str]) -> str:
    """Why a fresh run's trace does not apply to its function: the blocks ``gone`` that its records get
    are named otherwise in the source (structural matching ignores names)."""
    named = f"the records of run {run_id} get block{'s' * (len(gone) > 1)} {', '.join(gone)}"
    return (f"{named}, which this function does not have (the same computation with its blocks named otherwise: "
            "structural matching ignores names): rename the blocks as the records name them, or re-tune it here")
