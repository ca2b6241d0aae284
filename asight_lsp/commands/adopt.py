"""``asight adopt WORK_DIR --file SOURCE.py [--func F] [--counters FILE.jsonl] [--work-dir D] [--json]``.

Makes a run of a MetaSchedule work folder tuned elsewhere, so that ``space``, ``loops``,
``principles``, ``report``, ``code`` and the editor work on it here (``services/adopt.py``).
"""
from __future__ import annotations

from ..errors import AsightError
from ..views.text import gpu_unmeasured
from .common import print_json


def add_parser(sub):
    p = sub.add_parser("adopt", help="make a run of a MetaSchedule work folder tuned elsewhere (no re-tuning)")
    p.add_argument("folder", metavar="WORK_DIR", help="folder with database_workload.json and "
                                                      "database_tuning_record.json")
    p.add_argument("--file", required=True, help="the TVMScript file of the tuned function")
    p.add_argument("--func", help="function id/name (default: the only unit)")
    p.add_argument("--counters", help="counters.jsonl (measured hardware counters; default: WORK_DIR's, if any)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    p.add_argument("--json", action="store_true", help="print the new run's run.json")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    from ..services.adopt import adopt
    try:
        with WorkerClient(args.python, default_timeout=300) as worker:
            new = adopt(args.folder, args.file, worker, args.func, args.counters, args.work_dir)
    except OSError as err:
        raise AsightError(f"{err.filename or args.file}: {err.strerror}") from None
    meta = new.load()
    if args.json:
        print_json(meta.to_dict())
        return 0
    info = meta.adopted                  # this command's own run, just written and loaded: never None
    best = f"{meta.best_us:.1f} µs" if meta.best_us else "n/a"
    print(f"run      {meta.id}  ({new.path})")
    print(f"adopted  {info.records} records ({info.measured} measured) of {meta.function} from {info.source}"
          f" [matched by {info.how}]")
    for key in ("note", "earlier", "blocks_note"):
        if getattr(info, key):
            print(f"note     {getattr(info, key)}")
    print(f"target   {meta.target_label}")
    print(f"best     {best} [MetaSchedule's runner on the machine that tuned]")
    measured = meta.measured
    unmeasured = gpu_unmeasured(meta.target_label, measured.raw if measured else None)
    if unmeasured:
        print(f"note     {unmeasured}")
    print(f"counters {info.counters or 'none (views use the model, labelled as a model)'}")
    for key in ("counters_note", "counters_lack"):
        if getattr(info, key):
            print(f"note     {getattr(info, key)}")
    return 0
