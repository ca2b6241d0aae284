"""The ASight language-server protocol: every name the server and its clients share.

One dependency-free module (standard library only) with the LSP command ids, the custom request
and notification methods, the payload schema names and the shapes of the custom messages.  The
VS Code extension mirrors this file in TypeScript (``vscode-extension/src/shared/protocol.ts``); change
both together.

Conventions
-----------
* Ranges are LSP ranges: 0-based lines, UTF-16 characters.
* Every custom payload is a JSON object with ``"schema": "<name>/<version>"``; a payload that
  cannot be computed (yet) is ``{"schema": ..., "status": "unavailable", "message": ...}``.
* Command arguments are ONE JSON object (``arguments: [{...}]``), never positional lists.
"""
from __future__ import annotations

from typing import Any, TypedDict

SERVER_NAME = "asight-lsp"
PROTOCOL_VERSION = 1

# --------------------------------------------------------------------------- commands
# workspace/executeCommand ids.  Argument object fields are listed next to each.
CMD_TUNE = "asight.tune"                       # {uri, function?, trials?, minutes?, target?, rpc?, guidedBy?, space?, spaceMode?, countersBudget?}
# space: a design space function of the file (runs user code: trusted only); spaceMode: "alone" | "union"
CMD_PROFILE = "asight.profile"                 # {uri, function?, run?, remeasure?, replace?}
CMD_CANCEL = "asight.cancel"                   # {run?} (none: every running job of this server)
CMD_SHOW_SEARCH_SPACE = "asight.showSearchSpace"  # {uri?, function?, run?} -> searchSpace payload
CMD_SHOW_LOOP_VIEW = "asight.showLoopView"     # {uri?, function?, run?} -> loopView payload
CMD_APPLY_BEST_SCHEDULE = "asight.applyBestSchedule"  # {uri, function, mode?: "trace"|"script"}
CMD_COMPARE_RUNS = "asight.compareRuns"        # {runs: [id, id]} -> compareRuns payload
CMD_SHOW_CODE = "asight.showCode"              # {uri, function?, run?, candidate?, level?, task?} -> code payload
CMD_EXPORT_MODEL = "asight.exportModel"        # {uri, function?, run?, output?, tuneMissing?, allowUntuned?, build?: "tuned"|"untuned"} -> CommandResult, data: export reply
CMD_SHOW_MODEL = "asight.showModel"            # {uri, function?, run?} -> model payload (the Model panel)

COMMANDS = [CMD_TUNE, CMD_PROFILE, CMD_CANCEL, CMD_SHOW_SEARCH_SPACE, CMD_SHOW_LOOP_VIEW,
            CMD_APPLY_BEST_SCHEDULE, CMD_COMPARE_RUNS, CMD_SHOW_CODE, CMD_EXPORT_MODEL, CMD_SHOW_MODEL]
TRUSTED_COMMANDS = {CMD_TUNE, CMD_PROFILE, CMD_EXPORT_MODEL}     # refused in an untrusted workspace
# Run by the extension, not the server: a model's one lens ("88 µs") as a quick pick
# {title, items: [{label, detail?, command?, panel?, argument}]}; an item runs `command` (a server
# command, through the same path as a lens) or opens the webview `panel` with `argument`.
CLIENT_CMD_MORE = "asight.ui.more"

# --------------------------------------------------------------------------- custom requests
REQ_RUNS = "asight/runs"                 # {uri?, function?} -> runs payload
REQ_HOTSPOTS = "asight/hotspots"         # {uri, function?, run?} -> hotspots payload
REQ_SEARCH_SPACE = "asight/searchSpace"  # {run?, uri?, function?} -> searchSpace payload
REQ_LOOP_VIEW = "asight/loopView"        # {run?, uri?, function?} -> loopView payload
REQ_STAGE_GRAPH = "asight/stageGraph"    # {run?, uri?, function?} -> stageGraph payload
REQ_PRINCIPLES = "asight/principles"     # {run?, uri?, function?} -> principles payload
REQ_CODE = "asight/code"                 # {uri, function?, run?, candidate?, level?, serial?} -> code payload
REQ_CODE_DIFF = "asight/codeDiff"        # {uri, function?, a: {run, candidate?}, b: {run, candidate?}} -> codeDiff
REQ_MODEL = "asight/model"               # {uri, function?, run?} -> model payload (a profiled Relax run)

REQUESTS = [REQ_RUNS, REQ_HOTSPOTS, REQ_SEARCH_SPACE, REQ_LOOP_VIEW, REQ_STAGE_GRAPH, REQ_PRINCIPLES,
            REQ_CODE, REQ_CODE_DIFF, REQ_MODEL]
REQ_STATUS = "asight/status"             # {} -> ServerStatus (engine state, worker pid, live jobs)

# --------------------------------------------------------------------------- notifications
NOTIFY_RUN_UPDATED = "asight/runUpdated"  # server -> client, RunUpdated below
NOTIFY_WORKSPACE_TRUSTED = "asight/workspaceTrusted"  # client -> server, {}: the user trusted the workspace
# (VS Code's onDidGrantWorkspaceTrust).  `trusted` in workspace/didChangeConfiguration is ignored: a client
# that forwards a project's settings would let the project trust itself.

# --------------------------------------------------------------------------- payload schemas
SCHEMA_RUNS = "asight.runs/1"
SCHEMA_RUN_UPDATED = "asight.runUpdated/1"
SCHEMA_HOTSPOTS = "asight.hotspots/1"
SCHEMA_SEARCH_SPACE = "asight.searchSpace/1"
SCHEMA_LOOP_VIEW = "asight.loopView/1"
SCHEMA_STAGE_GRAPH = "asight.stageGraph/1"
SCHEMA_PRINCIPLES = "asight.principles/1"
SCHEMA_COMPARE_RUNS = "asight.compareRuns/1"
SCHEMA_APPLY_SCHEDULE = "asight.applySchedule/1"
SCHEMA_COMMAND_RESULT = "asight.commandResult/1"
SCHEMA_CODE = "asight.code/1"
SCHEMA_CODE_DIFF = "asight.codeDiff/1"
SCHEMA_MODEL = "asight.model/1"

REQUEST_SCHEMAS = {REQ_RUNS: SCHEMA_RUNS, REQ_HOTSPOTS: SCHEMA_HOTSPOTS, REQ_SEARCH_SPACE: SCHEMA_SEARCH_SPACE,
                   REQ_LOOP_VIEW: SCHEMA_LOOP_VIEW, REQ_STAGE_GRAPH: SCHEMA_STAGE_GRAPH,
                   REQ_PRINCIPLES: SCHEMA_PRINCIPLES, REQ_CODE: SCHEMA_CODE, REQ_CODE_DIFF: SCHEMA_CODE_DIFF,
                   REQ_MODEL: SCHEMA_MODEL}
CODE_LEVELS = ["scheduled", "lowered", "llvm", "asm", "cuda", "ptx"]   # asight/code "level" (cuda/ptx: a GPU run's kernels)

STATUS_OK = "ok"
STATUS_UNAVAILABLE = "unavailable"   # the payload builder does not exist yet / no run to show
STATUS_PARTIAL = "partial"           # some parts could not be computed

# --------------------------------------------------------------------------- initialization
# initializationOptions (all optional; the same keys under the "asight" configuration section).
OPT_TRUSTED = "trusted"              # bool, default true; false refuses tune/profile
OPT_STORE_ROOT = "storeRoot"         # .asight directory; default <workspace>/.asight
OPT_WORKER_PYTHON = "workerPython"   # interpreter of the TVM worker and tuning jobs
OPT_TARGET = "target"                # default tuning target (None = host CPU)
OPT_TRIALS = "trials"                # default trial budget
OPT_DISABLED_FEATURES = "disabledFeatures"  # e.g. ["inlayHint", "tvmDiagnostics"]
OPT_DIAGNOSTICS_DELAY_MS = "diagnosticsDelayMs"  # debounce of TVM diagnostics while typing
OPT_COUNTERS_BUDGET = "countersBudgetSeconds"  # GPU: tune collects Nsight Compute counters within this budget (0/None: off)
OPT_TUNE_MINUTES = "tuneMinutes"     # time budget of asight.tune (minutes; 0/None: the trial budget alone)
OPT_SESSION_TOKEN = "sessionToken"   # --tcp/--ws: the session's secret (docs/lsp.md "Network transports")

# Feature names for OPT_DISABLED_FEATURES.
FEATURES = ["documentSymbol", "hover", "codeLens", "inlayHint", "codeAction", "tvmDiagnostics"]

# LSP error codes the server answers bad requests with (JSON-RPC: InvalidParams).
ERROR_INVALID_PARAMS = -32602
ERROR_REQUEST_FAILED = -32803

# --------------------------------------------------------------------------- payload shapes


class UnavailablePayload(TypedDict):
    schema: str
    status: str      # STATUS_UNAVAILABLE
    message: str


class FailureGroup(TypedDict):
    """Failed candidates of a tune with one reason (``analysis/failures.py``)."""
    reason: str              # the error's own line, addresses and numbers masked
    count: int
    stage: str               # build | run
    log: str | None          # the run's failures.log: every failed candidate's full message


class RunSummary(TypedDict, total=False):
    id: str
    file: str
    function: str
    state: str               # queued | running | done | cancelled | failed
    trialsRequested: int
    trialsDone: int
    baselineUs: float | None  # the measurement record's untuned median (docs/measurement.md)
    bestUs: float | None      # its tuned median; while tuning, the best the runner saw so far
    speedup: float | None     # untuned / tuned of the record (None before it exists)
    speedupCi: list | None    # [low, high], 95 % bootstrap interval over paired rounds
    verdict: str | None       # faster | slower | same (the interval contains 1)
    noisy: bool               # the machine was busy while measuring
    headline: str             # the one line every client shows for the run
    target: str
    created: float
    finished: float | None
    stale: bool              # the function's source changed since the run
    error: str | None
    kind: str                # tir | relax
    tasks: list              # a Relax run's task names (one fused kernel each; views take one as "task")
    failures: list           # [FailureGroup], largest first
    shortfall: str | None    # why fewer trials were measured than asked (analysis/shortfall.py), None if all were
    measurement: dict | None  # which measurement the figures are: {taken, when, by, load, busy, text} (views/measured.py)
    shipped: bool            # present (true) for a run this user did not make on this machine: read-only, never resumed
    status: str              # a function's run: live | fresh | stale | failed (services/catalogue.py)
    reasons: list            # why stale or failed, one line each
    movedFrom: str | None    # the path the run recorded when found by its place in a moved or copied project
    unread: list             # present when run.json sections were not read: one line each (store/record.py)


class RunUpdated(TypedDict, total=False):
    """``asight/runUpdated``: sent on every progress event and when a run ends."""
    schema: str              # SCHEMA_RUN_UPDATED
    uri: str | None
    event: str               # started | progress | finished | profiled (a new measurement or per-call profile is shown)
    run: RunSummary


class CommandResult(TypedDict, total=False):
    """What ``asight.tune`` / ``asight.profile`` return once the job has ended."""
    schema: str              # SCHEMA_COMMAND_RESULT
    command: str
    status: str              # ok | cancelled | failed | refused
    message: str
    run: RunSummary | None
    data: Any


class CodeLink(TypedDict, total=False):
    """One generated line of an ``asight.code/1`` payload and the source line it came from."""
    line: int                # generated line (0-based)
    sourceLine: int          # source line (0-based)
    block: str               # source block whose measured share the line shows (when known)
    share: float             # that block's share of the measured latency (0..1)
    us: float                # that block's latency (µs)
    lineShare: float         # the source line's share of executed instructions (cachegrind), when profiled
    derivedBlock: str | None  # the generated block a trace instruction derived (None: a loop the schedule made)
    derivedFrom: str         # the source block it was derived from
    derivation: str          # "sum — rfactor partial, init" (docs/codeview.md, lineage)


class ServerStatus(TypedDict, total=False):
    status: str              # starting | running | tuning | errored | exited
    trusted: bool
    storeRoot: str
    workerPid: int | None    # the TVM worker process (None until first needed)
    workerRestarts: int
    jobs: list               # [RunSummary] of jobs this server started and still follows
    features: list           # enabled feature names
    tvmImported: bool        # always False: the server process never imports TVM
    workerSandbox: dict | None  # the worker's OS sandbox {active, mechanism, reason, requested, layers, selftest} (docs/sandbox.md)


def unavailable(schema: str, message: str) -> UnavailablePayload:
    """The payload a request answers with when there is nothing to show yet."""
    return {"schema": schema, "status": STATUS_UNAVAILABLE, "message": message}
