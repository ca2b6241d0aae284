"""The TVM worker's wire: its method names and the shapes of its messages (standard library only).

Both sides import this module: the core (``engine/client.py`` and the services that call
``client.request(METHOD, params)``) and the worker (``asight_lsp/worker/``, whose handler tables
are keyed by these names).  A frame is a msgpack map (``engine/framing.py``):

* request  ``{"id": int, "method": str, "params": {...}}``
* event    ``{"id": int, "event": {...}}``  (progress before the reply; any number)
* reply    ``{"id": int, "result": ...}`` or ``{"id": int, "error": {"type": str, "message": str}}``

Most requests name one unit of a file (``SourceParams``): the worker parses the unit's lines with
the others blanked, so TVM's line numbers are the file's.
"""
from __future__ import annotations

import functools
from typing import Any, TypedDict

from ..errors import AsightError

# --------------------------------------------------------------------------- methods
PING = "ping"                    # {} -> {pid, tvm, threads}
SHUTDOWN = "shutdown"            # {} -> (the worker exits)
DEBUG_SLEEP = "debug.sleep"      # {seconds} -> {slept}: lets tests exercise timeouts
CHECK = "check"                  # CheckParams -> {problems: [Problem], units: {name: {ok, functions, seconds}}}
SPACE_TRACES = "space_traces"    # {mod, target, text, file, function, units} -> {mapping, traces} | {error}
REMEASURE = "remeasure"          # {kind, tasks: [[name, JSON]], program?, entry, run_dir, target, by, weights?, chosen?} -> {record}
PARSE_IR = "parse_ir"            # SourceParams -> {json: TVM's JSON of the unit} | {problem: Problem + {text}}
TARGET = "tuning.target"         # {target} -> {target: JSON, label}
PROFILE = "profile"              # SourceParams + options + {run_dir, target, candidate?} -> raw profile
APPLY_BEST = "apply_best"        # SourceParams + {run_dir, target} -> {entries: [{function, script, trace, ...}]}
FEATURES = "features"            # {run_dir, trials, + SourceParams fallback} -> {records, baselines, ...}
BLOCK_GRAPH = "block_graph"      # SourceParams + {run_dir, records} -> {source, transformed: [graph]}
RELAX_GRAPH = "relax_graph"      # SourceParams -> {source, transformed}
CODE = "code"                    # SourceParams + {run_dir, trial?, level, serial} -> generated code and links
IMPORT_MODEL = "import_model"    # {model, out, shapes?} -> {script, weights, inputs, params, ...}
IMPORT_EXPORTED = "import_exported"  # {model, weights_name, shapes?, seed?} -> {text, inputs, params, check, ...}; weight events
EXPORT_MODEL = "export_model"    # SourceParams + {run_dir, chosen, target, weights, out} -> {library, applied, ...}
RUN_CANDIDATE = "run_candidate"  # {artifact, device, args: [["TENSOR", dtype, shape]]} -> {costs: [s]} (sandboxed only)
CHECK_EXPORT = "check_export"    # SourceParams + {library, target, weights, seed} -> compare record (outputs vs untuned)
MEASURE_EXPORT = "measure_export"  # SourceParams + {library, run_dir, chosen, target, weights, headline_build} -> record
ADOPT_MATCH = "adopt.match"      # SourceParams + {member, work_dir} -> {workload, how, hashes} (worker/adopt.py)
LIBRARY_CHECK = "library.check"  # {entries: [[workload line, record]]} -> {refused: [{index, why}]} (worker/library.py)
CHECK_IMPORT = "check_import"    # SourceParams + {weights, onnx, seed?} -> {check, against, seconds} | {skipped}
ONNX_TIME = "onnx_time"          # {onnx, inputs?, seed?, rounds?} -> {median_us, rounds, calls, threads} (worker/onnx_compare.py)
COMPARE_ONNX = "compare_onnx"    # SourceParams + {run_dir, chosen, target, weights, onnx, rounds?} -> analysis/versus summary

# CPU-seconds a sandboxed worker may spend on one request (``worker/sandbox.cpu_budget``; past it the
# kernel ends the worker and the client says so).  Reading a file (parse, well-formedness) takes seconds
# even for a large model; a file whose evaluation the gate cannot bound (``sum(range(10 ** 12))`` uses
# only safe builtins) is stopped after ``CHECK_CPU_ENV`` seconds, not after the budget of a tuning
# or measuring request.
CPU_ENV, CHECK_CPU_ENV = "ASIGHT_WORKER_CPU_S", "ASIGHT_CHECK_CPU_S"
DEFAULT_CPU_S, DEFAULT_CHECK_CPU_S = 600, 120


def cpu_budget_env(method: str) -> str:
    """The variable that sets the CPU budget of a request of ``method``."""
    return CHECK_CPU_ENV if method in (CHECK, PARSE_IR) else CPU_ENV


def cpu_budget_s(method: str) -> int:
    """The CPU budget of one request of ``method``, in seconds."""
    import os
    default = DEFAULT_CHECK_CPU_S if cpu_budget_env(method) == CHECK_CPU_ENV else DEFAULT_CPU_S
    return int(float(os.environ.get(cpu_budget_env(method)) or default))


# A model's weights live beside its TVMScript file (``asight import`` writes them; measurements and
# exports read them): ``resnet_relax.py`` -> ``resnet_relax.weights.npz``, one array per Relax param.
WEIGHTS_SUFFIX = ".weights.npz"


def weights_beside(script_path: str | None) -> str | None:
    """The weights file of a TVMScript model file, when there is one."""
    import os
    if not script_path:
        return None
    root, _ = os.path.splitext(os.path.abspath(script_path))   # workers run in another directory
    path = root + WEIGHTS_SUFFIX
    return path if os.path.isfile(path) else None


def weights_digest(path: str | None) -> str | None:
    """sha256 of a weights file (None without one): the deployable build binds its values, so a
    run tuned with other values may not be the build ``asight export`` makes now.  Memoised by
    (path, size, mtime) so a lens refresh does not re-read a large file."""
    import os
    if not path or not os.path.isfile(path):
        return None
    stat = os.stat(path)
    return _digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _digest(path: str, _size: int, _mtime_ns: int) -> str:
    import hashlib
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# Generated-code tags: the worker prints scheduled/lowered TIR with a comment ``asight:L<line>-<end>:<kind>``
# on every statement that still has a span (``analysis/codelinks.py`` reads them back).
TAG_PREFIX = "asight:L"


def tag(line: int, end_line: int, block: bool) -> str:
    """The annotation the worker attaches to a statement with span lines ``line..end_line`` (1-based)."""
    return f"{TAG_PREFIX}{line}-{end_line}:{'b' if block else 's'}"


# --------------------------------------------------------------------------- shapes


class UnitSpec(TypedDict):
    """One unit of a file: 0-based inclusive lines, its name and kind (``prim_func`` / ``ir_module`` / ...)."""
    name: str
    start_line: int
    end_line: int
    kind: str


class SourceParams(TypedDict, total=False):
    """What a request about one unit carries: the whole text, the unit, the file's literal constants
    and namespace aliases (``extra_vars`` of TVM's parser), and a member function of the unit."""
    text: str
    unit: UnitSpec
    constants: dict
    aliases: dict
    function: str | None


class CheckParams(TypedDict):
    text: str
    units: list[UnitSpec]
    constants: dict
    aliases: dict


class Problem(TypedDict, total=False):
    """A parse or well-formedness problem as TVM reports it (1-based line and column)."""
    unit: str
    line: int
    col: int
    end_col: int | None
    message: str
    kind: str                    # parse | well_formed


def unit_spec(unit: Any) -> UnitSpec:
    """The wire form of a ``tvmscript.outline.Unit``."""
    return {"name": unit.name, "start_line": unit.start_line, "end_line": unit.end_line, "kind": unit.kind}


def source_params(text: str, outline: Any, unit: Any, function: str | None = None) -> SourceParams:
    """``SourceParams`` of one unit of an outlined text (``function``: a member of the unit, or None)."""
    return {"text": text, "constants": outline.constants, "aliases": outline.aliases, "unit": unit_spec(unit),
            "function": function}


def check_params(text: str, outline: Any, units: list) -> CheckParams:
    return {"text": text, "constants": outline.constants, "aliases": outline.aliases,
            "units": [unit_spec(u) for u in units]}


def library_replay_problem(worker: Any, workload: list, record: list, mod_ir: str | None = None,
                           timeout: float = 120) -> str | None:
    """Why a schedule library record does not replay on its workload (or on ``mod_ir``, a task's saved IR),
    asked of a sandboxed ``worker`` (``LIBRARY_CHECK``, worker/library.check_records), or None.  A record
    that crashes TVM kills only that worker (restarted for the next request): that is its refusal."""
    params = {"entries": [[workload, record]], **({"mod": mod_ir} if mod_ir else {})}
    try:
        reply = worker.request(LIBRARY_CHECK, params, timeout=timeout)
    except AsightError as err:
        return f"TVM crashed replaying it ({str(err).split(';')[0]})"
    return reply["refused"][0]["why"] if reply["refused"] else None
