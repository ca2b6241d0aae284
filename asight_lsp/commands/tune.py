"""``asight tune FILE``: tune a function with MetaSchedule in a background job and report the result.

The job is a process of its own (docs/tuning.md).  While ``asight tune`` follows it, Ctrl-C
(SIGINT), SIGTERM and a closed terminal (SIGHUP) cancel it (its records are kept; exit 130).
``--detach`` returns at once and says how to stop the job: ``asight tune --cancel RUN``.
"""
from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time

from ..errors import AsightError
from ..errors import InputError
from ..services.jobs import LIVE_STATES, TuneJob, cancel_run, failure_message
from ..services.tuning import TuneRequest, start_tune
from ..store.database import records_note
from ..store.library import library_lines
from ..store.record import UNMEASURED, TimeBudget
from ..views.text import event_budget_text, minutes_text
from ..store.runs import RunMeta, RunStore
from ..engine.targets import runs_here
from ..analysis.measurement import baseline_word, how_text, speedup_text
from .common import print_json

EXIT_CANCELLED = 130
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(Exception):
    """SIGTERM or SIGHUP reached ``asight tune`` while it followed a job."""


def progress_line(event: dict) -> str:
    """``progress_of`` and, with ``--compare-onnx``, onnxruntime's time measured at the start beside it."""
    onnx = f"  · onnxruntime {fmt_us(event['onnx_us'])}" if event.get("onnx_us") else ""
    return progress_of(event) + onnx


def progress_of(event: dict) -> str:
    """One progress line.  With several tasks, the batch's task and its own best come first; the sum
    over tasks (best x calls, MetaSchedule's runner) is labelled as the estimate it is."""
    head = f"  {event_budget_text(event)}"
    task = event.get("task")
    if task and task != "main" and event.get("task_best_us") is not None:
        total = event.get("best_us")
        rest = f"  (all tasks, runner estimate: {fmt_us(total)})" if total is not None else ""
        return f"{head}  task {task}: best {fmt_us(event['task_best_us'])}{rest}"
    return f"{head}  best so far {fmt_us(event.get('best_us'))}" + (f"  [{task}]" if task else "")


def add_parser(sub):
    p = sub.add_parser("tune", help="tune a PrimFunc, an IRModule's PrimFuncs or a Relax module (MetaSchedule)")
    add_tune_arguments(p)
    p.add_argument("--json", action="store_true", help="machine-readable output (the run's metadata)")
    p.add_argument("--detach", action="store_true", help="start the job and return at once; it keeps running "
                   "(stop it with `asight tune --cancel RUN`)")
    p.add_argument("--cancel", metavar="RUN", help="stop the tuning job of RUN (id, id prefix or run directory; "
                   "its records are kept) instead of tuning")
    p.add_argument("--no-profile", action="store_true", help="a model: do not time each kernel call once tuned "
                   "(hotspots, hints and the stage graph then measure it when first asked)")
    p.add_argument("--python", help="interpreter for the TVM worker that profiles a tuned model (default: this one)")
    return p


def add_tune_arguments(p, trials: int = 64) -> None:
    p.add_argument("file", nargs="?", help="the TVMScript file (not with --cancel)")
    p.add_argument("--func", help="function id/name (Mod.main, main) or unit name; default: the file's only unit")
    p.add_argument("--target", help='host CPU by default; "gpu" (this machine\'s NVIDIA GPU), "cuda", "nvidia/nvidia-h100", '
                   '"llvm -mcpu=znver3 -num-cores=2" or Target JSON')
    p.add_argument("--trials", type=int, help=f"total trials of the run (default {trials}, or as many as "
                   "--minutes allows); records of a resumed run count toward it")
    p.add_argument("--minutes", type=float, help="a time budget: search for MINUTES from the job's start, then "
                   "measure the best found as after any run; with --trials, whichever ends first")
    p.set_defaults(default_trials=trials)
    p.add_argument("--compare-onnx", metavar="MODEL.onnx", dest="compare_onnx", help="a model: time onnxruntime "
                   "on this ONNX file once at the start and show the model's estimate beside it while tuning")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight); a run is WORK_DIR/runs/<id>")
    p.add_argument("--rpc", metavar="HOST:PORT:KEY", help="measure through a TVM RPC tracker")
    p.add_argument("--seed", type=int, help="random seed of the search")
    p.add_argument("--new", action="store_true", help="start a new run instead of resuming the matching one")
    p.add_argument("--guided-by", metavar="RUN", help="steer the search by the design principles of RUN (a new run "
                   "seeded with RUN's records; --trials then counts the new trials)")
    p.add_argument("--space", metavar="FUNC", help="tune with the design space function FUNC of the file (a def "
                   "taking a schedule and calling sch.sample_*; runs your code in the tuning job, docs/spaces.md)")
    p.add_argument("--space-mode", choices=("alone", "union"), default="alone",
                   help="with --space: that space alone (default) or together with MetaSchedule's default rules")
    p.add_argument("--principles", metavar="FILE", help="with --guided-by: JSON list of principles/constraints "
                   "to guide by instead of the mined ones")
    p.add_argument("--counters-budget", type=float, metavar="SECONDS", help="GPU: after tuning, Nsight Compute "
                   "counters of the baseline and the best (always) and more candidates within SECONDS, into the "
                   "run's counters.jsonl (docs/gpu.md); without ncu or a GPU the run says why")


def request_from(args) -> TuneRequest:
    minutes = getattr(args, "minutes", None)
    trials = args.trials if args.trials is not None or minutes is not None else args.default_trials
    return TuneRequest(file=args.file, function=args.func, target=args.target, trials=trials, minutes=minutes,
                       compare_onnx=getattr(args, "compare_onnx", None),
                       store_root=args.work_dir, rpc=args.rpc, seed=args.seed, resume=not args.new,
                       guided_by=args.guided_by, principles_file=args.principles,
                       space=getattr(args, "space", None), space_mode=getattr(args, "space_mode", "alone"),
                       counters_budget_s=getattr(args, "counters_budget", None))


def run(args) -> int:
    if args.cancel:
        return cancel(args)
    if not args.file:
        raise AsightError("the following arguments are required: file (or --cancel RUN)")
    try:
        job = start_tune(request_from(args))
    except InputError as err:
        print(f"asight: error: {err}", file=sys.stderr)
        return 1
    if args.detach:
        return detached(job, args)
    meta = follow(job, None if args.json else sys.stdout)
    nothing_measured = meta.state == "failed" and not meta.trials_done
    with contextlib.suppress(OSError):   # a closed terminal (SIGHUP): the run is recorded, nowhere to print
        if profiles_after(meta, args):
            profile_model(job, args, sys.stderr if args.json else sys.stdout)
        if args.json:
            print_json({**meta.to_dict(), "run_dir": str(job.run.path), "speedup": speedup(meta)})
        elif not nothing_measured:   # a failure before any trial: the one-line error says it all
            print_summary(job, meta)
    return exit_code(job, meta)


def profiles_after(meta: RunMeta, args) -> bool:
    """A model tuned to the end on this machine's CPU is profiled per kernel call, as the editor does after
    its own tune (``server/commands.profile_model``), unless ``--no-profile``."""
    return (meta.state == "done" and meta.kind == "relax" and not getattr(args, "no_profile", False)
            and runs_here(meta.target))


def profile_model(job: TuneJob, args, out) -> None:
    """Time each kernel call of the tuned model now and keep it in the run with its hotspots' graphs
    (``services/hotspots.prepare_model``): its hotspots, inlay hints and stage graph then open at once.  A failure or Ctrl-C leaves the run as tuned."""
    from ..engine.client import WorkerClient
    from ..services.hotspots import prepare_model
    print("profiling each kernel call of the tuned model (kept in the run; --no-profile skips it) ...",
          file=out, flush=True)
    try:
        with WorkerClient(getattr(args, "python", None), default_timeout=3600) as worker:
            prepare_model(job.run, worker)
    except (AsightError, OSError) as err:
        print(f"asight: note: the per-call profile and hotspots were not kept ({err}); the run stands as tuned, "
              "`asight model FILE` measures it", file=sys.stderr)
    except KeyboardInterrupt:
        print("asight: note: profile stopped; the run is kept as tuned (`asight model FILE` measures it)",
              file=sys.stderr)


def detached(job: TuneJob, args) -> int:
    """``--detach``: say that the job keeps running, where it writes, and how to stop it."""
    store = f" --work-dir {args.work_dir}" if args.work_dir else ""
    stop = f"asight tune --cancel {job.run.id}{store}"
    if args.json:
        print_json({"id": job.run.id, "run_dir": str(job.run.path), "pid": job.pid, "state": "running",
                    "detached": True, "cancel": stop})
        return 0
    print(f"run      {job.run.id}  ({job.run.path})")
    print(f"detached the tuning job (pid {job.pid}) goes on after this command returns; its records, run.json "
          "and events.jsonl grow in the run directory")
    print(f"stop it  {stop}")
    return 0


def cancel(args) -> int:
    """``--cancel RUN``: stop a run's job (SIGTERM, then SIGKILL of its process group); records are kept."""
    run = RunStore(args.work_dir).get(args.cancel)
    meta = cancel_run(run)
    if meta.extra.get("cancel") == "not running":
        print(f"run {run.id} is not tuning (state {meta.state}): nothing to stop")
        return 0
    print(f"run {run.id}: {meta.state}; {meta.trials_done} records kept ({run.path})")
    return 0 if meta.state not in LIVE_STATES else 2


def follow(job: TuneJob, out=None) -> RunMeta:
    """Print progress until the job ends; Ctrl-C, SIGTERM or a closed terminal cancel it (records are kept)."""
    with _stop_signals() as quiet:
        try:
            while not job.done:
                _print_events(job, out)
                time.sleep(0.2)
        except (KeyboardInterrupt, Stopped):
            quiet()
            with contextlib.suppress(OSError):
                if out:
                    print("\ncancelling ...", file=out, flush=True)
            job.cancel()
    with contextlib.suppress(OSError):
        _print_events(job, out)
    return job.wait(10)


@contextlib.contextmanager
def _stop_signals():
    """SIGTERM/SIGHUP raise ``Stopped`` (SIGINT raises KeyboardInterrupt); the context value ignores all
    three while the job is being cancelled.  Only in the main thread (where Python runs handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return

    def stop(signum, _frame):
        raise Stopped(signum)

    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        yield lambda: [signal.signal(sig, signal.SIG_IGN) for sig in STOP_SIGNALS]
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def _print_events(job: TuneJob, out) -> None:
    for event in job.poll_events():
        if out is None:
            continue
        kind = event.get("type")
        if kind == "status" and event.get("message"):
            print(f"{event['message']} ...", file=out, flush=True)
        elif kind == "started":
            done = event.get("trials_done") or 0
            resumed = f", resuming with {done} records" if done else ""
            base = f"; untuned {fmt_us(event['baseline_us'])}" if event.get("baseline_us") else ""
            trials = f"{event['trials']} trials" if event.get("trials") else "as many trials as fit"
            left = f" in {minutes_text(event['seconds_left'])}" if event.get("seconds_left") is not None else ""
            print(f"tuning {job.run.id}: {trials}{left}{resumed}{base}", file=out, flush=True)
        elif kind == "progress":
            errors = event.get("batch_errors") or 0
            print(progress_line(event) + (f"  ({errors} failed in batch)" if errors else ""), file=out, flush=True)


def print_summary(job: TuneJob, meta: RunMeta, out=None) -> None:
    out = out or sys.stdout
    print(f"run      {meta.id}  ({job.run.path})", file=out)
    print(f"state    {meta.state}" + (f": {meta.error}" if meta.error else ""), file=out)
    failed = (meta.extra.get("tuning") or {}).get("failed")
    print(f"trials   {trials_done_text(meta)}" + (f" ({failed} failed)" if failed else ""), file=out)
    short = meta.shortfall
    if short:
        print(f"why      {short.text}", file=out)
    for line in failure_lines(meta):
        print(line, file=out)
    for line in library_lines(meta.extra):
        print(f"library  {line}", file=out)
    for line in refusal_lines(meta.extra):
        print(line, file=out)
    unread = records_note(job.run, meta)
    if unread:
        print(f"records  {unread}", file=out)
    for line in headline_lines(meta):
        print(line, file=out)
    counters = meta.extra.get("counters") if meta.extra.get("counters_request") else None
    if counters:
        print(f"counters {counters['text']}", file=out)
    space = meta.space
    if space:
        print(f"space    {space.function} ({space.mode})", file=out)
    guidance = meta.extra.get("guidance")
    if guidance:
        print(f"guided   by run {guidance['guided_by']} ({meta.extra.get('seeded_records', 0)} records seeded):",
              file=out)
        for principle in guidance["principles"]:
            print(f"           {principle['text']}", file=out)


def refusal_lines(extra: dict) -> list[str]:
    """The levers TVM refused in the run, one line each (``analysis.levers.refusal_lines``)."""
    from ..analysis.levers import refusal_lines as lines
    return lines(extra)


def failure_lines(meta: RunMeta) -> list[str]:
    """Failed candidates grouped by reason, with the log of their full messages (``analysis/failures``)."""
    from ..analysis.failures import summary_lines
    return [("failed   " if i == 0 else "         ") + line.strip() for i, line in
            enumerate(summary_lines(meta.extra.get("failures") or []))]


def headline_lines(meta: RunMeta) -> list[str]:
    """The run's measurement record in words: what was measured, how, and under what load."""
    measured = meta.measured or UNMEASURED
    record = measured.raw
    tuning = meta.extra.get("tuning") or {}
    lines = []
    if measured.tuned:
        scope = {"program": "end to end", "module": "sum of its PrimFuncs"}.get(measured.scope, "")
        lines.append(f"measured {baseline_word(record)} {fmt_us(measured.untuned_us)} -> tuned "
                     f"{fmt_us(measured.tuned_us)}{' (' + scope + ')' if scope else ''}: "
                     f"{speedup_text(record)}")
        lines.append(f"         how: {how_text(record)}")
        lines += [f"gpu      {line}" if i == 0 else f"         {line}"
                  for i, line in enumerate((measured.gpu or {}).get("lines") or [])]
        lines += build_lines(meta)
        if measured.busy:
            lines.append(f"         the machine was busy: the figures are noisy; re-measure later with "
                         f"`asight profile {meta.file} --run {meta.id} --remeasure`")
        if measured.check and not measured.check.get("ok"):
            lines.append("         !!! the tuned program's outputs differ from the untuned one's !!!")
    elif measured.error:
        lines.append(f"measured not re-measured: {measured.error}")
    elif meta.baseline_us:
        lines.append(f"untuned  {fmt_us(meta.baseline_us)} (before tuning)")
    if tuning.get("best_us"):
        lines.append(f"while tuning: best {fmt_us(tuning['best_us'])} [MetaSchedule's runner, builders loading "
                     "the cores; not the headline]")
    return lines


def build_lines(meta: RunMeta) -> list[str]:
    """A model's headline names its build: the deployable one (weights bound, what `asight export`
    writes), or a warning when the exported build would differ (docs/models.md)."""
    if meta.kind != "relax":
        return []
    from ..services.export import headline_of
    from ..analysis.deployable import search_credit, unrecorded_text
    build = headline_of(meta)
    measured = meta.measured or UNMEASURED
    untried = unrecorded_text([t["name"] for t in meta.tasks or []], measured.picks)
    credit = search_credit(len(meta.tasks or []), measured.chosen)
    return [f"         build: {'!!! ' if build['stale'] else ''}{build['text']}"] + \
        ([f"         kernels: {credit}"] if credit else []) + ([f"         !!! {untried}"] if untried else [])


def speedup(meta: RunMeta) -> float | None:
    """The measured speed-up (untuned / tuned) of the run's measurement record."""
    measured = meta.measured
    return measured.speedup_estimate if measured else None


def exit_code(job: TuneJob, meta: RunMeta) -> int:
    """0 done, 130 cancelled, 1 the source has errors, 2 any other failure."""
    if meta.state == "done":
        return 0
    if meta.state == "cancelled":
        return EXIT_CANCELLED
    if meta.state == "failed":
        with contextlib.suppress(OSError):
            print(f"asight: error: {failure_message(job.run, meta)}", file=sys.stderr)
        return 1 if meta.extra.get("error_kind") == "input" else 2
    raise AsightError(f"the tuning job did not end (state {meta.state})")


def trials_done_text(meta: RunMeta) -> str:
    """``37 of 64``; with a time budget ``37 (10 min budget; it ended the search)``."""
    budget = TimeBudget.from_extra(meta.extra)
    if budget is None:
        return f"{meta.trials_done} of {meta.trials_requested}"
    bound = f" of {meta.trials_requested}" if TimeBudget.trial_bound(meta.extra, meta.trials_requested) else ""
    ended = "; it ended the search" if (meta.extra.get("tuning") or {}).get("deadline_hit") else ""
    return f"{meta.trials_done}{bound} ({minutes_text(budget.minutes * 60)} budget{ended})"


def fmt_us(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value >= 1000:
        return f"{value / 1000:.3f} ms"
    return f"{value:.1f} µs" if value >= 10 else f"{value:.3g} µs"
