/**
 * The ASight language-server protocol, mirrored from `asight_lsp/protocol.py`.
 *
 * Every name the server and the extension share: command ids, custom request and notification
 * methods, payload schema names, initialization option keys and the shapes of the custom messages.
 * Dependency-free (no `vscode`, no DOM) so both the extension host and the webviews import it.
 * `test/unit/protocol.test.ts` checks every constant and field list here against the Python module;
 * change both together.
 *
 * Conventions (same as the server): ranges are LSP ranges (0-based lines, UTF-16 characters);
 * every custom payload has `schema: "<name>/<version>"`, and one that cannot be computed (yet) is
 * `{schema, status: "unavailable", message}`; command arguments are ONE object (`arguments: [{...}]`).
 */

export const SERVER_NAME = "asight-lsp";
export const PROTOCOL_VERSION = 1;

// ------------------------------------------------------------------------------------ commands
export const CMD_TUNE = "asight.tune"; // {uri, function?, trials?, minutes?, target?, rpc?, guidedBy?, space?, spaceMode?, countersBudget?}
// space: a design space function of the file (runs user code: trusted only); spaceMode: "alone" | "union"
export const CMD_PROFILE = "asight.profile"; // {uri, function?, run?, remeasure?, replace?}
export const CMD_CANCEL = "asight.cancel"; // {run?} (none: every running job of the server)
export const CMD_SHOW_SEARCH_SPACE = "asight.showSearchSpace"; // {uri?, function?, run?} -> searchSpace payload
export const CMD_SHOW_LOOP_VIEW = "asight.showLoopView"; // {uri?, function?, run?} -> loopView payload
export const CMD_APPLY_BEST_SCHEDULE = "asight.applyBestSchedule"; // {uri, function, mode?: "trace"|"script"}
export const CMD_COMPARE_RUNS = "asight.compareRuns"; // {runs: [id, id]} -> compareRuns payload
export const CMD_SHOW_CODE = "asight.showCode"; // {uri, function?, run?, candidate?, level?, task?} -> code payload
export const CMD_EXPORT_MODEL = "asight.exportModel"; // {uri, function?, run?, output?, tuneMissing?, allowUntuned?, build?: "tuned"|"untuned"} -> CommandResult, data: export reply
export const CMD_SHOW_MODEL = "asight.showModel"; // {uri, function?, run?} -> model payload (the Model panel)

export const COMMANDS = [CMD_TUNE, CMD_PROFILE, CMD_CANCEL, CMD_SHOW_SEARCH_SPACE, CMD_SHOW_LOOP_VIEW,
  CMD_APPLY_BEST_SCHEDULE, CMD_COMPARE_RUNS, CMD_SHOW_CODE, CMD_EXPORT_MODEL, CMD_SHOW_MODEL] as const;
export const TRUSTED_COMMANDS = [CMD_TUNE, CMD_PROFILE, CMD_EXPORT_MODEL] as const; // a set on the Python side
// Run by the extension, not the server: a model's one lens ("88 µs") as a quick pick
// {title, items: [{label, detail?, command?, panel?, argument}]}; an item runs `command` (a server
// command, through the same path as a lens) or opens the webview `panel` with `argument`.
export const CLIENT_CMD_MORE = "asight.ui.more";

// ------------------------------------------------------------------------------------ requests
export const REQ_RUNS = "asight/runs"; // {uri?, function?} -> runs payload
export const REQ_HOTSPOTS = "asight/hotspots"; // {uri, function?, run?} -> hotspots payload
export const REQ_SEARCH_SPACE = "asight/searchSpace"; // {run?, uri?, function?}
export const REQ_LOOP_VIEW = "asight/loopView"; // {run?, uri?, function?}
export const REQ_STAGE_GRAPH = "asight/stageGraph"; // {run?, uri?, function?}
export const REQ_PRINCIPLES = "asight/principles"; // {run?, uri?, function?}
export const REQ_CODE = "asight/code"; // {uri, function?, run?, candidate?, level?, serial?} -> code payload
export const REQ_CODE_DIFF = "asight/codeDiff"; // {uri, function?, a: {run, candidate?}, b: {run, candidate?}}
export const REQ_MODEL = "asight/model"; // {uri, function?, run?} -> model payload (a profiled Relax run)

export const REQUESTS = [REQ_RUNS, REQ_HOTSPOTS, REQ_SEARCH_SPACE, REQ_LOOP_VIEW, REQ_STAGE_GRAPH,
  REQ_PRINCIPLES, REQ_CODE, REQ_CODE_DIFF, REQ_MODEL] as const;
export const REQ_STATUS = "asight/status"; // {} -> ServerStatus (engine state, worker pid, live jobs)

// ------------------------------------------------------------------------------- notifications
export const NOTIFY_RUN_UPDATED = "asight/runUpdated"; // server -> client, RunUpdated
export const NOTIFY_WORKSPACE_TRUSTED = "asight/workspaceTrusted"; // client -> server, {}: the user trusted the workspace

// ----------------------------------------------------------------------------- payload schemas
export const SCHEMA_RUNS = "asight.runs/1";
export const SCHEMA_RUN_UPDATED = "asight.runUpdated/1";
export const SCHEMA_HOTSPOTS = "asight.hotspots/1";
export const SCHEMA_SEARCH_SPACE = "asight.searchSpace/1";
export const SCHEMA_LOOP_VIEW = "asight.loopView/1";
export const SCHEMA_STAGE_GRAPH = "asight.stageGraph/1";
export const SCHEMA_PRINCIPLES = "asight.principles/1";
export const SCHEMA_COMPARE_RUNS = "asight.compareRuns/1";
export const SCHEMA_APPLY_SCHEDULE = "asight.applySchedule/1";
export const SCHEMA_COMMAND_RESULT = "asight.commandResult/1";
export const SCHEMA_CODE = "asight.code/1";
export const SCHEMA_CODE_DIFF = "asight.codeDiff/1";
export const SCHEMA_MODEL = "asight.model/1";

export const REQUEST_SCHEMAS = {
  [REQ_RUNS]: SCHEMA_RUNS, [REQ_HOTSPOTS]: SCHEMA_HOTSPOTS, [REQ_SEARCH_SPACE]: SCHEMA_SEARCH_SPACE,
  [REQ_LOOP_VIEW]: SCHEMA_LOOP_VIEW, [REQ_STAGE_GRAPH]: SCHEMA_STAGE_GRAPH, [REQ_PRINCIPLES]: SCHEMA_PRINCIPLES,
  [REQ_CODE]: SCHEMA_CODE, [REQ_CODE_DIFF]: SCHEMA_CODE_DIFF, [REQ_MODEL]: SCHEMA_MODEL,
} as const;
export const CODE_LEVELS = ["scheduled", "lowered", "llvm", "asm", "cuda", "ptx"] as const; // asight/code "level" (cuda/ptx: a GPU run's kernels)
export type CodeLevel = (typeof CODE_LEVELS)[number];

export const STATUS_OK = "ok";
export const STATUS_UNAVAILABLE = "unavailable"; // no builder yet / no run to show
export const STATUS_PARTIAL = "partial"; // some parts could not be computed

// ------------------------------------------------------------------------------ initialization
// initializationOptions keys (also the keys of the "asight" configuration section the server reads).
export const OPT_TRUSTED = "trusted"; // bool, default true; false refuses tune/profile
export const OPT_STORE_ROOT = "storeRoot"; // .asight directory; default <workspace>/.asight
export const OPT_WORKER_PYTHON = "workerPython"; // interpreter of the TVM worker and tuning jobs
export const OPT_TARGET = "target"; // default tuning target (null = host CPU)
export const OPT_TRIALS = "trials"; // default trial budget
export const OPT_DISABLED_FEATURES = "disabledFeatures"; // e.g. ["inlayHint", "tvmDiagnostics"]
export const OPT_DIAGNOSTICS_DELAY_MS = "diagnosticsDelayMs"; // debounce of TVM diagnostics
export const OPT_COUNTERS_BUDGET = "countersBudgetSeconds"; // GPU: tune collects Nsight Compute counters within this budget (0/null: off)
export const OPT_TUNE_MINUTES = "tuneMinutes"; // time budget of asight.tune (minutes; 0/null: the trial budget alone)
export const OPT_SESSION_TOKEN = "sessionToken"; // --tcp/--ws: the session's secret (docs/lsp.md "Network transports")

export const FEATURES = ["documentSymbol", "hover", "codeLens", "inlayHint", "codeAction", "tvmDiagnostics"] as const;
export type Feature = (typeof FEATURES)[number];

export const ERROR_INVALID_PARAMS = -32602;
export const ERROR_REQUEST_FAILED = -32803;

// ------------------------------------------------------------------------------ payload shapes
// Each interface has a runtime key list next to it; the type-level check below keeps list and
// interface equal, and the unit test compares the list with the Python TypedDict.

export interface UnavailablePayload {
  schema: string;
  status: string; // STATUS_UNAVAILABLE
  message: string;
}
export const UNAVAILABLE_PAYLOAD_KEYS = ["schema", "status", "message"] as const;

export type RunState = "queued" | "running" | "done" | "cancelled" | "failed";

/** Failed candidates of a tune with one reason (analysis/failures.py). */
export interface FailureGroup {
  reason: string; // the error's own line, addresses and numbers masked
  count: number;
  stage: "build" | "run" | string;
  log: string | null; // the run's failures.log: every failed candidate's full message
}
export const FAILURE_GROUP_KEYS = ["reason", "count", "stage", "log"] as const;

export interface RunSummary {
  id?: string;
  file?: string;
  function?: string;
  state?: RunState | string;
  trialsRequested?: number;
  trialsDone?: number;
  baselineUs?: number | null; // the measurement record's untuned median (docs/measurement.md)
  bestUs?: number | null; // its tuned median; while tuning, the best the runner saw so far
  speedup?: number | null; // untuned / tuned of the record (null before it exists)
  speedupCi?: number[] | null; // [low, high], 95 % bootstrap interval over paired rounds
  verdict?: "faster" | "slower" | "same" | string | null; // "same": the interval contains 1
  noisy?: boolean; // the machine was busy while measuring
  headline?: string; // the one line every client shows for the run
  target?: string;
  created?: number;
  finished?: number | null;
  stale?: boolean; // the function's source changed since the run
  error?: string | null;
  kind?: "tir" | "relax" | string;
  tasks?: string[]; // a Relax run's task names (one fused kernel each; views take one as "task")
  failures?: FailureGroup[]; // largest first
  shortfall?: string | null; // why fewer trials were measured than asked (analysis/shortfall.py)
  measurement?: MeasurementStamp | null; // which measurement the figures are (views/measured.py measurement_stamp)
  shipped?: boolean; // present (true) for a run this user did not make on this machine: read-only, never resumed
  status?: "live" | "fresh" | "stale" | "failed" | string; // a function's run (services/catalogue.py)
  reasons?: string[]; // why stale or failed, one line each
  movedFrom?: string | null; // the path the run recorded when found by its place in a moved or copied project
  unread?: string[]; // present when run.json sections were not read: one line each (store/record.py)
}
/** Which measurement a run's figures are: its measurement record (the headline every view starts from). */
export interface MeasurementStamp { taken: number; when: string; by: string; load: string; busy: boolean; text: string }
export const RUN_SUMMARY_KEYS = ["id", "file", "function", "state", "trialsRequested", "trialsDone",
  "baselineUs", "bestUs", "speedup", "speedupCi", "verdict", "noisy", "headline", "target", "created", "finished",
  "stale", "error", "kind", "tasks", "failures", "shortfall", "measurement", "shipped", "status", "reasons",
  "movedFrom", "unread"] as const;

/** `asight/runUpdated`: sent on every progress event and when a run ends. */
export interface RunUpdated {
  schema?: string; // SCHEMA_RUN_UPDATED
  uri?: string | null;
  event?: "started" | "progress" | "finished" | "profiled" | string; // profiled: a new measurement or per-call profile is shown
  run?: RunSummary;
}
export const RUN_UPDATED_KEYS = ["schema", "uri", "event", "run"] as const;

/** What `asight.tune` / `asight.profile` return once the job has ended. */
export interface CommandResult {
  schema?: string; // SCHEMA_COMMAND_RESULT
  command?: string;
  status?: "ok" | "cancelled" | "failed" | "refused" | string;
  message?: string;
  run?: RunSummary | null;
  data?: unknown;
}
export const COMMAND_RESULT_KEYS = ["schema", "command", "status", "message", "run", "data"] as const;

/** One generated line of an `asight.code/1` payload and the source line it came from. */
export interface CodeLink {
  line?: number; // generated line (0-based)
  sourceLine?: number; // source line (0-based)
  block?: string; // source block whose measured share the line shows (when known)
  share?: number; // that block's share of the measured latency (0..1)
  us?: number; // that block's latency (µs)
  lineShare?: number; // the source line's share of executed instructions (cachegrind), when profiled
  derivedBlock?: string | null; // the generated block a trace instruction derived (null: a loop the schedule made)
  derivedFrom?: string; // the source block it was derived from
  derivation?: string; // "sum — rfactor partial, init" (docs/codeview.md, lineage)
}
export const CODE_LINK_KEYS = [
  "line",
  "sourceLine",
  "block",
  "share",
  "us",
  "lineShare",
  "derivedBlock",
  "derivedFrom",
  "derivation",
] as const;

/** `asight/runs`: the runs, newest first; `notes`: why other runs are not shown (a linked store, an unreadable run.json). */
export interface RunsPayload {
  schema?: string;
  status?: string;
  runs?: RunSummary[];
  notes?: string[];
  shown?: string; // a function's runs: the one its lenses, hovers and panels show (services/catalogue.py)
}

/** `asight/status`: what the server is doing. */
export interface ServerStatus {
  status?: "starting" | "running" | "tuning" | "errored" | "exited" | string;
  trusted?: boolean;
  storeRoot?: string;
  workerPid?: number | null; // the TVM worker process (null until first needed)
  workerRestarts?: number;
  jobs?: RunSummary[]; // jobs this server started and still follows
  features?: string[]; // enabled feature names
  tvmImported?: boolean; // whether the LSP process itself imported TVM (it must not)
  workerSandbox?: { active: boolean; mechanism: string; reason: string | null; requested: boolean;
    layers?: Record<string, unknown>; selftest?: Record<string, string> } | null; // docs/sandbox.md (selftest: probe -> "refused (EPERM)")
}
export const SERVER_STATUS_KEYS = ["status", "trusted", "storeRoot", "workerPid", "workerRestarts", "jobs",
  "features", "tvmImported", "workerSandbox"] as const;

/** Python TypedDict name -> key list (what the mirror test compares). */
export const TYPED_DICTS = {
  UnavailablePayload: UNAVAILABLE_PAYLOAD_KEYS,
  FailureGroup: FAILURE_GROUP_KEYS,
  RunSummary: RUN_SUMMARY_KEYS,
  RunUpdated: RUN_UPDATED_KEYS,
  CommandResult: COMMAND_RESULT_KEYS,
  CodeLink: CODE_LINK_KEYS,
  ServerStatus: SERVER_STATUS_KEYS,
} as const;

// Compile-time: each key list names exactly the interface's keys.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Check<T extends true> = T;
export type _KeyChecks = [
  Check<Same<(typeof UNAVAILABLE_PAYLOAD_KEYS)[number], keyof UnavailablePayload>>,
  Check<Same<(typeof FAILURE_GROUP_KEYS)[number], keyof FailureGroup>>,
  Check<Same<(typeof RUN_SUMMARY_KEYS)[number], keyof RunSummary>>,
  Check<Same<(typeof RUN_UPDATED_KEYS)[number], keyof RunUpdated>>,
  Check<Same<(typeof COMMAND_RESULT_KEYS)[number], keyof CommandResult>>,
  Check<Same<(typeof SERVER_STATUS_KEYS)[number], keyof ServerStatus>>,
  Check<Same<(typeof CODE_LINK_KEYS)[number], keyof CodeLink>>,
];

/** Arguments of `asight.tune` (one object). */
export interface TuneArgs {
  uri: string;
  function?: string;
  trials?: number;
  /** A time budget (minutes): search until then, then measure; with `trials`, whichever ends first. */
  minutes?: number;
  target?: string;
  rpc?: string;
  guidedBy?: string;
  /** A design space function of the file (docs/spaces.md); runs user code, so trusted workspaces only. */
  space?: string;
  spaceMode?: "alone" | "union";
  /** GPU: seconds for Nsight Compute counters after tuning (docs/gpu.md); default: the setting. */
  countersBudget?: number;
}

/** Arguments of the view requests and show-commands. */
export interface ViewArgs {
  run?: string;
  uri?: string;
  function?: string;
  /** One task (fused kernel) of a Relax run: its candidates alone (docs/models.md). */
  task?: string;
}

/** The payload a request answers with when there is nothing to show yet. */
export function isUnavailable(payload: unknown): payload is UnavailablePayload {
  return typeof payload === "object" && payload !== null &&
    (payload as { status?: unknown }).status === STATUS_UNAVAILABLE;
}
