"""The tuning job process: ``python -m asight_lsp.worker.tune_job RUN_DIR``.

``jobs.start_tune`` prepares ``RUN_DIR`` (``run.json`` with the selection and budget,
``source.py`` = the text to tune) and starts this module in its own process group.  The job parses
the unit, measures the untuned baseline once, tunes with MetaSchedule into ``RUN_DIR`` and streams
``events.jsonl``; ``run.json`` follows along (state, trials_done, best_us, ...).

Cancel: SIGINT/SIGTERM wake a watcher thread at once (``signal.set_wakeup_fd``; the main thread
may be deep in MetaSchedule's C++ search), which records state ``cancelled`` and SIGKILLs the
whole process group — the job and its builder/runner workers — in one call.  Every record already
appended to the JSON database stays; a torn last line is set aside by ``Run.repair_db`` on resume
(and said); a damaged database is refused (``store/database.py``).
"""
from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import sys
import threading
import time
import traceback

from ..engine.targets import require_runs_here
from ..analysis.budget import planned_trials
from ..store.record import TimeBudget
from ..store.runs import Run, RunMeta
from . import lever_guard
from .sandbox import limit_memory, over_allowance, private_cwd
from .tune_plan import InputProblem, TunePlan

REMEASURE_TIMEOUT_S = 3600.0
JOB_MEMORY_SCALE = 2.0   # the job may add twice a worker's allowance (ASIGHT_WORKER_MEM_GB): a model's build
TUNING_SOURCE = ("MetaSchedule's runner while tuning (3 calls per trial, builders loading the cores): "
                 "kept for reference, not the headline")


class TuningProcess:
    """One job process working on one run directory."""

    def __init__(self, run_dir: str):
        self.run = Run(run_dir)
        self.lock = threading.RLock()   # the cancel thread and the main thread both write run.json
        self.finished = False
        self.trials_done = 0
        self.best_us: float | None = None
        self.baseline_us: float | None = None
        self.budget = None     # metaschedule.TrialBudget of this session (known schedules it skipped)
        self.began = time.monotonic()   # a time budget (--minutes) counts from the job's start

    # -- bookkeeping
    def event(self, event_type: str, **fields) -> None:
        with self.lock:
            if not self.finished or event_type == "finished":
                self.run.append_event({"type": event_type, **fields, "time": time.time()})

    def update(self, **changes) -> RunMeta:
        """Change run.json, unless the job has already recorded its end (a cancel won the race)."""
        with self.lock:
            return self.run.load() if self.finished else self.run.update(**changes)

    def finish(self, state: str, error: str | None = None, error_kind: str | None = None) -> None:
        """Record the end of the job once (normal end, failure or cancel, whichever comes first)."""
        with self.lock:
            if self.finished:
                return
            self.finished = True
            from ..store.runs import read_records
            done = len(read_records(self.run.path))
            meta = self.run.load()
            meta.state, meta.error, meta.finished = state, error, time.time()
            meta.trials_done = done
            if self.best_us is not None:
                meta.best_us = self.best_us
            if error_kind:
                meta.extra["error_kind"] = error_kind
            if meta.sessions:
                meta.sessions[-1].update({"finished": meta.finished, "state": state, "trials_done": done})
            self.run.save(meta)
            self.event("finished", state=state, best_us=meta.best_us, baseline_us=meta.baseline_us,
                       trials_done=done, error=error)

    # -- cancel
    def watch_signals(self) -> None:
        """Turn SIGINT/SIGTERM into a prompt cancel, whatever the main thread is doing."""
        reader, writer = socket.socketpair()
        writer.setblocking(False)
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: None)  # the watcher thread acts; the main thread carries on
        threading.Thread(target=self._on_signal, args=(reader, writer), daemon=True, name="cancel").start()

    def _on_signal(self, reader: socket.socket, _writer: socket.socket) -> None:
        reader.recv(1)
        try:
            self.finish("cancelled")
        finally:
            from .sandbox import kill_own_group
            kill_own_group()

    # -- the work
    def main(self) -> int:
        self.watch_signals()
        return self._main()

    def _main(self) -> int:
        meta = self.update(state="running", pid=os.getpid(), started=time.time())
        try:
            self.tune(meta)
        except InputProblem as err:
            self.finish("failed", str(err), err.kind)
            return 1 if err.kind == "input" else 2
        except ConnectionError as err:   # RPC tracker unreachable or without servers for the key
            self.finish("failed", str(err), "rpc")
            return 2
        except Exception as err:  # noqa: BLE001  the run must say why it failed
            traceback.print_exc()
            from .steps import said
            self.finish("failed", said(err, failure_line(err)), "internal")
            return 2
        self.finish("done")
        return 0

    def tune(self, meta: RunMeta) -> None:
        from . import library
        from . import metaschedule as tuning
        job, meta, before = self.prepare(meta)
        plan, target, space = job.plan, job.target, job.space
        remaining = max(meta.trials_requested - before, 0)
        tracker = tuning.BestTracker(plan, before)
        database = tuning.open_database(str(self.run.path))
        tracker.seed_from_db(database)
        self.best_us = tracker.total_us()
        time_budget = TimeBudget.from_extra(meta.extra)
        self.budget = tuning.TrialBudget(remaining, [t.name for t in plan.tasks], self.deadline(time_budget))
        bound = TimeBudget.trial_bound(meta.extra, meta.trials_requested)     # None: the time alone
        self.event("started", run=self.run.id, trials=bound, seconds_left=self.budget.seconds_left(),
                   baseline_us=self.baseline_us, trials_done=before, remaining=remaining, kind=plan.kind,
                   tasks=[t.name for t in plan.tasks], target=str(target))

        onnx_us = self.onnxruntime_time(meta)

        def on_batch(task_id: int, latencies: list, errors: int, failures: list) -> None:
            if not latencies:
                return  # the search found nothing new for this task (small space exhausted)
            self.record_failures(tracker.trials_done, plan.tasks[task_id].name if plan.kind == "relax" else None,
                                 failures)
            tracker.add(task_id, latencies, errors)
            self.best_us = tracker.total_us()
            self.event("progress", trials_done=tracker.trials_done, trials=bound,
                       seconds_left=self.budget.seconds_left(), best_us=self.best_us, onnx_us=onnx_us, batch_errors=errors,
                       task=plan.tasks[task_id].name, task_best_us=tracker.per_task_us()[plan.tasks[task_id].name])
            self.update(trials_done=tracker.trials_done, best_us=self.best_us)

        started = time.perf_counter()
        transfers, wrap = self.twin_transfer(job)
        starts, start = library.start_wrap(job, self.budget, meta.extra)
        for note in starts.notes if starts is not None else []:
            self.event("status", stage="library", message=note)
        wrap = library.stacked(start, wrap)
        per_iter = tuning.trials_per_iter(planned_trials(time_budget, remaining), len(plan.tasks))
        shares, scheduler, watch = self.share_scheduler(job, per_iter)
        if remaining > 0:
            tuning.tune(plan, target, str(self.run.path), remaining, seed=meta.extra.get("seed"), rpc=meta.rpc,
                        on_batch=on_batch, database=database, constraints=meta.extra.get("constraints"),
                        space=space, budget=self.budget, wrap=wrap, per_iter=per_iter, scheduler=scheduler,
                        extra_callbacks=(watch,) if watch else ())
        self.keep_transfers(transfers)
        self.keep_outlook(shares)
        self.feed_library(job, starts)
        self.conclude(meta, job, tracker, database, time.perf_counter() - started)
        self.collect_counters()

    def deadline(self, budget: TimeBudget | None) -> float | None:
        """When this session's search must stop (``time.monotonic()``): ``--minutes`` after the job
        started (``store/record.TimeBudget``; its ``until`` written for the lens), None without one."""
        if budget is None:
            return None
        deadline = self.began + budget.minutes * 60
        until = time.time() + deadline - time.monotonic()
        extra = self.run.load().extra
        self.update(extra={**extra, TimeBudget.KEY: {**extra[TimeBudget.KEY], "until": until}})
        return deadline

    def collect_counters(self) -> None:
        """``asight tune --counters-budget S`` (``extra.counters_request``): Nsight Compute counters of the
        baseline and the best always, more candidates within S seconds, into counters.jsonl
        (``worker/counters.collect``); ``extra.counters`` says what was profiled or why nothing was (no
        GPU, no ncu, not permitted: the contour then stays the model, labelled as a model)."""
        from . import counters
        request = self.run.load().extra.get("counters_request")
        if not request:
            return
        self.event("status", stage="counters", message=f"collecting Nsight Compute counters "
                                                       f"(budget {request['budget_s']:.0f} s)")
        result = counters.collect_for_job(self.run.path, float(request["budget_s"]))
        self.update(extra={**self.run.load().extra, "counters": result})
        self.event("status", stage="counters", message=result["text"], counters=result)

    def twin_transfer(self, job: TunePlan):
        """Twin and sibling tasks learn from each other's best schedules (``worker/twins.py``)."""
        from . import twins
        return twins.transfer_wrap(job.plan, self.budget, job.levers_off)

    def onnxruntime_time(self, meta: RunMeta) -> float | None:
        """``--compare-onnx``: onnxruntime's time of the ONNX file, once before the search, in the sandboxed
        worker (``extra.versus_onnx``); progress shows the model's estimate beside it.  A failure is said."""
        from .onnx_compare import time_in_sandbox
        section = meta.extra.get("versus_onnx")
        if not isinstance(section, dict) or not section.get("model"):
            return None
        self.event("status", stage="onnxruntime", message="timing onnxruntime on the ONNX model once")
        figure, why = time_in_sandbox(section["model"])
        self.update(extra={**self.run.load().extra, "versus_onnx": {**section, **(figure or {"error": why})}})
        if why:
            self.event("status", stage="onnxruntime", message=why)
        return figure["median_us"] if figure else None

    def feed_library(self, job: TunePlan, starts) -> None:
        """The run's best schedules into the library; ``extra.library`` says what it did (``worker/library.py``)."""
        from . import library
        section, lines = library.run_section(job, self.run.path, starts, self.run.load().extra)
        if section is not None:
            self.update(extra={**self.run.load().extra, "library": section})
        for line in lines:
            self.event("status", stage="library", message=line)

    def share_scheduler(self, job: TunePlan, per_iter: int):
        """The scheduler that spends the budget where it saves most (``worker/budget.py``), or TVM's (refused)."""
        from . import budget
        if job.plan.kind != "relax":
            return None, None, None
        from ..analysis.peak import peak_figures
        from .host import host_info
        return lever_guard.either("budget", lambda: budget.scheduler_for(
            job.plan, per_iter, peak_figures(host_info()).get("gflops"), off=job.levers_off), lambda: (None, None, None))

    def keep_outlook(self, state) -> None:
        """``extra.budget`` in run.json: per task what the next batch is expected to save, and the order
        the batches went in."""
        if state is None:
            return
        self.update(extra={**self.run.load().extra, "budget": {
            "outlook": state.outlook(), "choices": [state.names[i] for i in state.choices], "batch": state.batch,
            "rule": "analysis/budget.py: weight x best x min(gap, 1 - (1 - rate)^batch)"}})

    def keep_transfers(self, log) -> None:
        """``extra.twins`` in run.json: the tasks' relations and what each transfer measured; a resumed
        session adds its transfers to the earlier ones."""
        from . import twins
        kept = twins.run_extra(log)
        if kept is None:
            return
        earlier = (self.run.load().extra.get("twins") or {}).get("transfers") or []
        self.update(extra={**self.run.load().extra, "twins": {**kept, "transfers": earlier + kept["transfers"]}})

    def record_failures(self, first_trial: int, task: str | None, failures: list) -> None:
        """Append each failed candidate's full message to ``failures.log`` and add the batch's groups
        (``analysis/failures.py``) to ``run.json`` ``extra.failures``; an unwritable log loses only the
        log, never the measurements."""
        if not failures:
            return
        from ..analysis import failures as fails
        log = fails.log_path(self.run.path)
        try:
            with open(log, "a", encoding="utf-8") as out:
                for f in failures:
                    out.write(fails.log_entry(first_trial + f["index"], task, f["stage"], f["message"]))
        except OSError:
            log = None
        groups = fails.group(failures, log)
        with self.lock:
            if not self.finished:
                meta = self.run.load()
                self.run.update(extra={**meta.extra, "failures": fails.merge(meta.extra.get("failures") or [], groups)})

    def record_shortfall(self, meta: RunMeta, tracker) -> dict | None:
        """Why this session measured fewer valid trials than it asked for (``analysis/shortfall.py``),
        in ``run.json`` ``extra.shortfall`` and a status event; None (and the key removed) when it did not."""
        from ..analysis import shortfall as sf
        from .search import logged_rejections
        proposed = tracker.trials_done - tracker.trials_before
        requested = max(meta.trials_requested - tracker.trials_before, 0)
        if self.budget is not None and (self.budget.deadline_hit or
                                        TimeBudget.trial_bound(meta.extra, meta.trials_requested) is None):
            requested = min(requested, proposed)    # the time budget, not a failure, set how many were tried
        extra = self.run.load().extra
        summary = sf.summarise(requested, proposed, tracker.errors, extra.get("failures") or [],
                               self.budget.ended if self.budget else [], logged_rejections(self.run.path))
        with self.lock:
            if not self.finished:
                extra = {k: v for k, v in self.run.load().extra.items() if k != "shortfall"}
                self.run.update(extra={**extra, **({"shortfall": summary} if summary else {})})
        if summary:
            self.event("status", stage="shortfall", message=summary["text"], shortfall=summary)
        return summary

    def top_failure(self, said: str = "") -> str:
        """``; most often: <reason> (full messages: <log>)`` from run.json's failure groups, or ''
        (only the log's part when ``said`` already names that reason)."""
        groups = self.run.load().extra.get("failures") or []
        if not groups:
            return ""
        top = groups[0]
        log = f" (full messages: {top['log']})" if top.get("log") else ""
        if top["reason"] in said:
            return log
        return f"; most often ({top['count']} × {top['stage']}): {top['reason']}{log}"

    def prepare(self, meta: RunMeta) -> tuple[TunePlan, RunMeta, int]:
        """Parse, resolve the target, plan the tasks, check the device (and, over RPC, the baseline):
        (the session's ``TunePlan``, run.json, records before this session).  The levers are the run's
        (``tune_plan.request_levers``: a resumed run keeps the layouts it was made with)."""
        from . import rpc_baseline as baseline
        from . import metaschedule as tuning
        from .remeasure import device_of
        from .tune_plan import parse_selection, request_levers
        from ..store.runs import read_records
        off = request_levers(str(self.run.path))
        parsed, member = parse_selection(self.run, meta, self.update)
        parsed, build = self.deployable(parsed, member, meta)
        try:
            target = tuning.resolve_target(meta.extra.get("target_spec"))
            require_runs_here(str((target.host or target).attrs.get("mtriple") or ""))
        except tuning.TargetError as err:
            raise InputProblem(str(err), "usage") from None
        self.check_database()
        try:
            plan = tuning.gpu_ready(tuning.plan_for(parsed, member, target, off=off), target)
        except ValueError as err:
            raise InputProblem(str(err)) from None
        from .userspace import job_space     # refused there if unread
        space = job_space(self.run, meta, plan, target, self.update) if meta.extra.get("space") else None
        before = len(read_records(self.run.path))
        meta = self.update(kind=plan.kind, tasks=plan.task_records(), target=tuning.target_json(target),
                           trials_done=before, **({"extra": {**meta.extra, "build": build}} if plan.kind == "relax" else {}))
        lever_guard.record(meta.extra, self.update, self.event)      # the levers TVM refused in this job
        meta = self.run.load()
        if meta.rpc:
            tuning.rpc_servers(*tuning.parse_rpc(meta.rpc))   # fail fast: tracker down or no server
        elif not device_of(target).exist:
            raise InputProblem(f"no {target.kind.name} device on this machine; measure on one with --rpc", "usage")
        self.baseline_us = meta.baseline_us
        if meta.rpc and self.baseline_us is None:   # measured on the remote device; no re-measurement there
            self.event("status", stage="baseline", message="measuring the untuned latency on the RPC device")
            self.baseline_us, detail = baseline.baseline_us(plan, target, meta.rpc)
            meta = self.update(baseline_us=self.baseline_us, extra={**meta.extra, "baseline_detail": detail})
        return TunePlan(plan, target, space, off, member), meta, before

    def deployable(self, parsed, member, meta: RunMeta):
        """The unit as ``asight export`` builds it (a Relax model's weights file bound,
        ``relax_pipeline.deployable``), so the tasks tuned are the exported library's kernels; and
        what run.json records of it (``extra.build``: the headline's build, docs/models.md)."""
        from ..engine.wire import weights_beside, weights_digest
        from .relax_pipeline import deployable
        weights = weights_beside(meta.file)
        module, bound = deployable(parsed, member, weights)
        return module, {"deployable": True, "weights": weights if bound else None, "bound": len(bound),
                        "weights_digest": weights_digest(weights) if bound else None}

    def check_database(self) -> None:
        """Set a torn last line aside (said in an event and run.json), refuse a damaged database
        (exit 2) before TVM meets it (``store/database.py``)."""
        from ..store.database import require_intact
        from ..store.runs import DamagedDatabase
        dropped = self.run.repair_db()
        try:
            health = require_intact(self.run.path)
        except DamagedDatabase as err:
            raise InputProblem(str(err), "usage") from None
        if dropped:
            self.event("status", stage="repair", message=f"set aside {dropped} torn line of the records file (a write "
                       f"cut short); {health.records} measured records kept")

    def conclude(self, meta: RunMeta, job: TunePlan, tracker, database, tune_s: float) -> None:
        """Keep what tuning measured, then re-measure: the best per task and untuned vs tuned
        (end to end for Relax) through the harness; that record is the run's headline."""
        space = job.space
        tracker.seed_from_db(database)
        shortfall = self.record_shortfall(meta, tracker)
        if shortfall and all(b is None for b in tracker.best) and space is None:
            raise InputProblem(shortfall["text"] + self.top_failure(shortfall["text"]), "tuning")
        if space is not None and tracker.total_us() is None:
            raise InputProblem(f"design space '{meta.extra['space']['function']}' produced no valid candidate "
                               f"({tracker.trials_done} measured, {tracker.errors} failed to build or run)"
                               + self.top_failure())
        tuning = {"best_us": tracker.total_us(), "best_tasks_us": tracker.per_task_us(), "seconds": tune_s,
                  "failed": tracker.errors, "source": TUNING_SOURCE,
                  "repeats_skipped": self.budget.repeats_skipped if self.budget else 0,
                  "deadline_hit": bool(self.budget and self.budget.deadline_hit)}
        if tuning["deadline_hit"]:
            done = tracker.trials_done - tracker.trials_before
            self.event("status", stage="deadline", message=f"the time budget ended the search after {done} "
                       f"trial{'s' if done != 1 else ''} this session ({tune_s:.0f} s of tuning)")
        meta = self.run.load()
        kept = meta.measured if tracker.trials_done == tracker.trials_before else None   # no trial since: it stands
        record = kept.raw if kept is not None else None
        if record is None and not meta.rpc and any(b is not None for b in tracker.best):
            self.event("status", stage="measure", message="re-measuring the best candidates, then untuned vs tuned")
            record = self.measure(job)
        self.update(extra={**self.run.load().extra, "tuning": tuning})
        if record is not None and record.get("untuned") and record is not meta.measurement:
            with self.lock:   # the run's new headline; the record it replaces goes to the history
                if not self.finished:
                    self.run.set_measurement(record)
        elif record is not None and record.get("error"):
            self.update(measurement=record)
        self.best_us = record["tuned"]["median_us"] if record and record.get("tuned") else tracker.total_us()
        self.baseline_us = record["untuned"]["median_us"] if record and record.get("untuned") else self.baseline_us
        self.update(best_us=self.best_us, baseline_us=self.baseline_us)
        self.check_estimate(tracker.total_us(), record)

    def check_estimate(self, estimate_us: float | None, record: dict | None) -> None:
        """The estimate progress showed (each task's best from the runner, weighted by calls) against the
        measured headline, said at the end (``extra.tuning.estimate``)."""
        from ..analysis.measurement import estimate_text
        if not estimate_us or not record or not record.get("tuned"):
            return
        measured = record["tuned"]["median_us"]
        check = {"estimate_us": estimate_us, "measured_us": measured, "off": measured / estimate_us - 1}
        extra = self.run.load().extra
        self.update(extra={**extra, "tuning": {**extra.get("tuning", {}), "estimate": check}})
        self.event("status", stage="estimate", message=estimate_text(check))

    def measure(self, job: TunePlan) -> dict | None:
        """The run's measurement record (``worker/remeasure.measure_run``); a failure is recorded, not fatal.
        On the CPU it runs in the sandboxed worker (which works with the run's levers, as this job does):
        the programs timed are the file's native code."""
        from . import remeasure
        from ..engine.wire import weights_beside
        plan, target = job.plan, job.target
        weights = weights_beside(self.run.load().file)
        try:
            if remeasure.is_gpu(target):   # the GPU needs its driver's ioctls, which the sandbox refuses
                record = remeasure.measure_run(plan.kind, [(t.name, t.mod) for t in plan.tasks], self.run.path, target,
                                               "tuning job", program=plan.program, entry=plan.entry, weights=weights,
                                               off=job.levers_off)
            else:
                record = self.measure_sandboxed(plan, target, weights)
            if record is not None and plan.kind == "relax":   # the figure is of the deployable build
                record["build"] = self.run.load().extra.get("build")
            return record
        except Exception as err:  # noqa: BLE001 - the records stay; the headline says it was not measured
            traceback.print_exc()
            first = failure_line(err)
            self.event("status", stage="measure", message=f"re-measurement failed: {first}")
            return {"schema": "asight.measurement/1", "error": f"{type(err).__name__}: {first}"}

    def measure_sandboxed(self, plan, target, weights: str | None) -> dict | None:
        from ..engine.wire import REMEASURE
        from .compat import save_ir
        from .metaschedule import target_json
        from .parse import sandboxed_worker
        reply = sandboxed_worker().request(REMEASURE, {
            "kind": plan.kind, "tasks": [[t.name, save_ir(t.mod)] for t in plan.tasks],
            "program": save_ir(plan.program) if plan.program is not None else None, "entry": plan.entry,
            "run_dir": str(self.run.path), "target": target_json(target), "by": "tuning job", "weights": weights},
            timeout=REMEASURE_TIMEOUT_S)
        lever_guard.record(self.run.load().extra, self.update, self.event, reply.get("levers_refused"))
        return reply["record"]


def failure_line(err: BaseException) -> str:
    """One line for a failure: running out of the job's memory cap said as such, else the first line."""
    return over_allowance(err, JOB_MEMORY_SCALE) or (str(err).strip().splitlines() or [type(err).__name__])[0]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m asight_lsp.worker.tune_job RUN_DIR", file=sys.stderr)
        return 2
    os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    os.environ.setdefault("ASIGHT_WORKER_CPU_S", "7200")   # the sandboxed worker re-measures a whole model
    from . import compat  # noqa: F401  (TVM loaded: the memory cap adds to that size)
    limit_memory(JOB_MEMORY_SCALE)
    run = TuningProcess(os.path.abspath(argv[0]))
    atexit.register(shutil.rmtree, private_cwd(), True)   # compilers and tools started here use a folder of ours only
    return run.main()


if __name__ == "__main__":
    sys.exit(main())
