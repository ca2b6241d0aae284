"""run.json's sections, typed: what a reader may take from ``RunMeta.extra`` (TVM-free).

``extra`` holds what the jobs and commands write (dicts: writers stay as they are); a *reader* takes
a section through these types (``RunMeta.adopted``, ``.space``, ``.build``, ``.shortfall``), never by
``extra["..."]``.  The run's measurement record (``RunMeta.measurement``, top level) is read the same
way, through ``Measurement`` (``RunMeta.measured``).  run.json is data a cloned repository can ship, so a section of the wrong shape is
never an exception: ``read_section`` gives ``(None, why)`` and ``section_problems`` says which
sections of a run were not read and why.

Versions.  run.json carries ``schema: "asight.run/1"`` (``RUN_SCHEMA``):

* no ``schema`` (or null): a run from before the field, read as ``/1``;
* another schema: refused when it is loaded (``require_schema``, called by ``folders.meta_json``, so
  ``Run.load`` raises ``AsightError`` "run.json is unreadable (its schema is ...)");
* a section missing: a run from before that section (or one that never had it: a run not adopted,
  tuned on MetaSchedule's own space, of a PrimFunc, measured in full): the accessor gives None and
  ``section_problems`` says nothing;
* a section that is ``{}``: as absent;
* a section present but of the wrong shape: None, and ``section_problems`` names the field.

``extra.adopted`` is also checked when run.json is loaded (``folders.require_meta_types``: not an
object, or no integer ``workload``, refuses the run), so a loaded run's ``adopted`` is never None
while its ``extra`` holds one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

RUN_SCHEMA = "asight.run/1"

_INT, _NUM, _STR, _DICT, _LIST, _BOOL = (int,), (int, float), (str,), (dict,), (list,), (bool,)


def require_schema(data: dict) -> None:
    """ValueError when run.json names a schema this asight does not read (None or absent: ``/1``)."""
    schema = data.get("schema")
    if schema is not None and schema != RUN_SCHEMA:
        raise ValueError(f"its schema is {json.dumps(schema)[:60]}, not {RUN_SCHEMA} (the one this asight reads: "
                         "a run written by another version of asight)")


def _fits(value, kinds: tuple) -> bool:
    return isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))


def _said(value) -> str:
    return json.dumps(value, default=str)[:60]


def _read_fields(raw: dict, fields: tuple, where: str) -> tuple[dict, str | None]:
    """``(values, None)`` of ``fields`` (attribute, JSON key, types, required) in ``raw``, an absent optional
    field left out (its dataclass default); ``({}, why)`` naming ``where.key`` when one does not fit."""
    values = {}
    for attr, key, kinds, required in fields:
        value = raw.get(key)
        if value is None and required:
            return {}, f"{where}.{key} is missing"
        if value is not None and not _fits(value, kinds):
            return {}, f"{where}.{key} is {_said(value)}, not {' or '.join(k.__name__ for k in kinds)}"
        if value is not None:
            values[attr] = value
    return values, None


class _Section:
    KEY: ClassVar[str]
    FIELDS: ClassVar[tuple]       # (attribute, JSON key, types, required)

    @classmethod
    def read(cls, extra, where: str = "extra") -> tuple:
        """``(section, None)``; ``(None, None)`` when absent (a run from before it); ``(None, why)``.
        ``where``: what holds the section, as a problem names it (``extra``, or ``measurement`` for
        the build older runs kept in their measurement record)."""
        raw = extra.get(cls.KEY) if isinstance(extra, dict) else None
        if raw is None or raw == {}:       # {}: as absent, as the truthy checks before these types read it
            return None, None
        if not isinstance(raw, dict):
            return None, f"{where}.{cls.KEY} is {_said(raw)}, not an object"
        values, why = _read_fields(raw, cls.FIELDS, f"{where}.{cls.KEY}")
        return (None, why) if why else (cls(**values), None)

    @classmethod
    def from_extra(cls, extra):
        """The section of ``extra`` (a ``RunMeta.extra``), None when absent or of the wrong shape."""
        return cls.read(extra)[0]


@dataclass(frozen=True)
class Adopted(_Section):
    """``extra.adopted``: written by ``asight adopt`` (services/adopt.py) for a run of records from a
    work folder tuned elsewhere."""
    workload: int | None = None         # the line of database_workload.json adopt matched the function to
    #                                     (a loaded run always has one: folders.require_meta_types)
    source: str | None = None           # "from": the work folder
    from_size: int | None = None        # its records file's size at adopt
    how: str | None = None              # how the workload was matched
    flops: float | None = None
    dtypes: list | None = None
    records: int | None = None
    measured: int | None = None
    counters: str | None = None         # the counters file adopted, None: none
    counters_note: str | None = None
    counters_lack: str | None = None
    note: str | None = None
    earlier: str | None = None
    blocks_note: str | None = None
    digest: dict | None = None          # file name -> digest at adopt; None: adopted before the digest
    set_aside: int | None = None

    KEY: ClassVar[str] = "adopted"
    FIELDS: ClassVar[tuple] = (
        ("workload", "workload", _INT, False), ("source", "from", _STR, False), ("from_size", "from_size", _INT, False),
        ("how", "how", _STR, False), ("flops", "flops", _NUM, False), ("dtypes", "dtypes", _LIST, False),
        ("records", "records", _INT, False), ("measured", "measured", _INT, False),
        ("counters", "counters", _STR, False), ("counters_note", "counters_note", _STR, False),
        ("counters_lack", "counters_lack", _STR, False), ("note", "note", _STR, False),
        ("earlier", "earlier", _STR, False), ("blocks_note", "blocks_note", _STR, False),
        ("digest", "digest", _DICT, False), ("set_aside", "set_aside", _INT, False))

    def work(self) -> dict:
        """What adopt matched (``adopt_checks.require_adoptable``'s reply): workload, FLOPs, types."""
        return {"workload": self.workload, "flops": self.flops, "dtypes": self.dtypes}


@dataclass(frozen=True)
class Space(_Section):
    """``extra.space``: the user design space a run tuned with (services/tuning.py ``user_space``;
    ``mapping`` added by the job, worker/tune_job.py).  Absent: MetaSchedule's own space."""
    function: str
    mode: str | None = None
    hash: str | None = None
    line: int | None = None
    mapping: dict | None = None
    applies_to: str | None = None
    sites: list | None = None

    KEY: ClassVar[str] = "space"
    FIELDS: ClassVar[tuple] = (
        ("function", "function", _STR, True), ("mode", "mode", _STR, False), ("hash", "hash", _STR, False),
        ("line", "line", _INT, False), ("mapping", "mapping", _DICT, False), ("applies_to", "applies_to", _STR, False),
        ("sites", "sites", _LIST, False))

    def key(self) -> tuple:
        """What a resumed run must share: ``(function, mode, hash)``."""
        return self.function, self.mode, self.hash

    @classmethod
    def key_of(cls, extra) -> tuple | None:
        """The key of the design space a run tuned with (docs/spaces.md), None for MetaSchedule's own."""
        space = cls.from_extra(extra)
        return space.key() if space else None


@dataclass(frozen=True)
class Build(_Section):
    """``extra.build``: the build a Relax run tuned and measured (worker/tune_job.py ``deployable``;
    analysis/deployable.py).  Absent: a run from before the deployable build, or of a PrimFunc.  Runs
    before ``extra.build`` kept it in their measurement record (``Measurement.build``)."""
    deployable: bool = True             # a build without the key is the deployable one (every writer says True)
    weights: str | None = None
    bound: int | None = None
    weights_digest: str | None = None

    KEY: ClassVar[str] = "build"
    FIELDS: ClassVar[tuple] = (
        ("deployable", "deployable", _BOOL, False), ("weights", "weights", _STR, False), ("bound", "bound", _INT, False),
        ("weights_digest", "weights_digest", _STR, False))

    def as_dict(self) -> dict:
        """The section as run.json holds it (``analysis.deployable.headline_build`` takes the dict)."""
        return {"deployable": self.deployable, "weights": self.weights, "bound": self.bound,
                "weights_digest": self.weights_digest}


@dataclass(frozen=True)
class Shortfall(_Section):
    """``extra.shortfall``: why fewer trials were measured than asked (analysis/shortfall.py
    ``summarize``).  Absent: every asked trial was measured, or a run from before it."""
    text: str
    requested: int
    measured: int
    reasons: list | None = None

    KEY: ClassVar[str] = "shortfall"
    FIELDS: ClassVar[tuple] = (
        ("text", "text", _STR, True), ("requested", "requested", _INT, True), ("measured", "measured", _INT, True),
        ("reasons", "reasons", _LIST, False))


@dataclass(frozen=True)
class TimeBudget(_Section):
    """``extra.time_budget``: this session's time budget (``asight tune --minutes``, services/tuning.py).
    The job searches until ``minutes`` after it started, then measures as after any run; ``trials``
    says whether the trials asked also bound it (else ``trials_requested`` is only a ceiling).
    Absent: a session bounded by its trials alone."""
    minutes: float
    trials: bool = False
    until: float | None = None          # the deadline (epoch seconds), written by the job when it starts

    KEY: ClassVar[str] = "time_budget"
    FIELDS: ClassVar[tuple] = (("minutes", "minutes", _NUM, True), ("trials", "trials", _BOOL, False),
                               ("until", "until", _NUM, False))

    @classmethod
    def trial_bound(cls, extra, trials_requested: int) -> int | None:
        """The trials that bound a session: ``trials_requested``, or None where its time alone bounds it."""
        budget = cls.from_extra(extra)
        return trials_requested if budget is None or budget.trials else None


@dataclass(frozen=True)
class Levers:
    """``extra.levers_off`` and ``extra.pipeline_levers`` (two keys, written by services/tuning.py): the
    model levers off when the run was made, and the pipeline levers that existed then
    (analysis/levers.py ``run_levers_off``: a resumed run keeps the kernels it was tuned with).
    Absent: a run made before the record (its workloads tell which layouts it has)."""
    off: tuple | None = None            # None: the levers off were not recorded (a run from before the record)
    known: tuple | None = None          # None: a run from before ``pipeline_levers``

    OFF_KEY: ClassVar[str] = "levers_off"
    KNOWN_KEY: ClassVar[str] = "pipeline_levers"

    @classmethod
    def read(cls, extra) -> tuple:
        """``(Levers, None)``; ``(None, None)`` for a run made before either key; ``(None, why)``."""
        extra = extra if isinstance(extra, dict) else {}
        off, known = extra.get(cls.OFF_KEY), extra.get(cls.KNOWN_KEY)
        for key, value in ((cls.OFF_KEY, off), (cls.KNOWN_KEY, known)):
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                return None, f"extra.{key} is {json.dumps(value, default=str)[:60]}, not a list of lever names"
        if off is None and known is None:
            return None, None
        return cls(tuple(off) if off is not None else None, tuple(known) if known is not None else None), None

    @classmethod
    def from_extra(cls, extra) -> "Levers | None":
        return cls.read(extra)[0]


@dataclass(frozen=True)
class Measurement:
    """run.json's ``measurement`` (top level, not under ``extra``; ``RunMeta.measured``): the record
    the run's figures are (``analysis.measurement.comparison_record``, extended by the tuning job,
    ``worker/remeasure.measure_run``, and ``asight profile``, services/profiling.py).  Absent (None or
    ``{}``): not measured yet, or re-measurement was not run (an RPC run).  A record of the wrong
    shape reads as absent, and ``section_problems`` names the field.  Every field may be absent: a
    record whose measurement failed holds ``error`` alone."""
    raw: dict = field(repr=False)       # the record as run.json holds it: what the pure functions of
    #                                     analysis/measurement.py and analysis/deployable.py take
    schema: str | None = None           # asight.measurement/1
    scope: str | None = None            # function | module (its PrimFuncs summed) | program (end to end)
    by: str | None = None               # who measured: "tuning job", "asight profile", ...
    taken: float | None = None          # when (seconds since the epoch)
    harness: dict | None = None         # {method, rounds, threads, calls_per_repeat, seconds}
    load: dict | None = None            # {other_cores, steal, busy, reasons}
    untuned: dict | None = None         # the untuned side (DLight's on a GPU: ``baseline``): {median_us, p25_us, ...}
    tuned: dict | None = None           # the tuned side, as ``untuned``
    parts: dict | None = None           # label -> the same summary, per program timed
    speedup: dict | None = None         # {estimate, ci, confidence, rounds, method}: untuned / tuned
    verdict: str | None = None          # faster | slower | same
    chosen: list | None = None          # [{task, workload, trial, ...}] the records re-measurement chose; []: it
    #                                     measured and every task kept its default schedule (None: no choice)
    defaults: list | None = None        # [{task, default, default_us, measured_us, ...}] the tasks that kept it
    trials: int | None = None           # the run's records when it was measured (``is_current``)
    applied: dict | None = None         # a model: which records the tuned build applied
    check: dict | None = None           # the tuned outputs against the untuned ones ({ok, buffers, ...})
    baseline: dict | None = None        # a GPU record: {kind: "dlight", label}
    vendor: dict | None = None          # a GPU kernel: the vendor library's time, or a note
    gpu: dict | None = None             # a GPU record in words: {lines, kept, baseline, vendor_ratio}
    kept: dict | None = None            # a GPU record whose DLight side won: {program: "dlight", text}
    build: Build | None = None          # a run before ``extra.build``: the build its figures are of
    error: str | None = None            # why the run was not measured

    KEY: ClassVar[str] = "measurement"
    FIELDS: ClassVar[tuple] = (
        ("schema", "schema", _STR, False), ("scope", "scope", _STR, False), ("by", "by", _STR, False),
        ("taken", "taken", _NUM, False), ("harness", "harness", _DICT, False), ("load", "load", _DICT, False),
        ("untuned", "untuned", _DICT, False), ("tuned", "tuned", _DICT, False), ("parts", "parts", _DICT, False),
        ("speedup", "speedup", _DICT, False), ("verdict", "verdict", _STR, False), ("chosen", "chosen", _LIST, False),
        ("defaults", "defaults", _LIST, False), ("trials", "trials", _INT, False),
        ("applied", "applied", _DICT, False), ("check", "check", _DICT, False), ("baseline", "baseline", _DICT, False),
        ("vendor", "vendor", _DICT, False), ("gpu", "gpu", _DICT, False), ("kept", "kept", _DICT, False),
        ("error", "error", _STR, False))
    ENTRIES: ClassVar[tuple] = ("chosen", "defaults")    # lists whose entries readers take as objects
    SIDES: ClassVar[tuple] = ("untuned", "tuned")        # summaries whose ``median_us`` readers take as a number

    @classmethod
    def read(cls, value) -> tuple:
        """``(Measurement, None)``; ``(None, None)`` when absent; ``(None, why)`` when of the wrong shape."""
        if value is None or value == {}:
            return None, None
        if not isinstance(value, dict):
            return None, f"{cls.KEY} is {_said(value)}, not an object"
        values, why = _read_fields(value, cls.FIELDS, cls.KEY)
        build, build_why = Build.read(value, cls.KEY)
        whys = [why] + [_entry_problem(key, values[key]) for key in cls.ENTRIES if key in values] + \
            [_median_problem(side, values[side]) for side in cls.SIDES if values.get(side)] + [build_why] + \
            [_read_fields(values[key], fields, f"{cls.KEY}.{key}")[1] for key, fields in _INNER if values.get(key)] + \
            [_ci_problem(values.get("speedup"))]
        why = next((why for why in whys if why), None)
        return (None, why) if why else (cls(raw=value, build=build, **values), None)

    @classmethod
    def of(cls, value) -> "Measurement | None":
        """The record of ``value`` (a ``RunMeta.measurement``, or a profile's copy of it), None when absent
        or of the wrong shape."""
        return cls.read(value)[0]

    @property
    def headline(self) -> bool:
        """It measured the untuned side: its figures are the run's (a failed one's ``error`` is not)."""
        return bool(self.untuned)

    @property
    def untuned_us(self) -> float | None:
        return self.untuned["median_us"] if self.untuned else None

    @property
    def tuned_us(self) -> float | None:
        return self.tuned["median_us"] if self.tuned else None

    @property
    def speedup_estimate(self) -> float | None:
        """Untuned / tuned, None without a tuned side."""
        estimate = (self.speedup or {}).get("estimate")
        return estimate if _fits(estimate, _NUM) else None

    @property
    def busy(self) -> bool:
        """Other work competed for the cores while it measured: its figures are noisy."""
        return bool((self.load or {}).get("busy"))

    @property
    def default_tasks(self) -> set:
        """The tasks whose default schedule re-measured faster than every trial (what ships for them)."""
        return {d.get("task") for d in self.defaults or []}

    @property
    def picks(self) -> list:
        """``chosen`` then ``defaults``: how each task's schedule was picked."""
        return list(self.chosen or []) + list(self.defaults or [])


# the fields of the record's objects that the words about it read (analysis/measurement.py: speedup_text,
# how_text, load_verdict): (attribute, JSON key, types, required), as ``_read_fields`` takes them
_INNER = (
    ("speedup", (("estimate", "estimate", _NUM, False), ("ci", "ci", _LIST, False),
                 ("confidence", "confidence", _NUM, False), ("rounds", "rounds", _INT, False))),
    ("harness", (("rounds", "rounds", _INT, False), ("calls_per_repeat", "calls_per_repeat", _DICT, False),
                 ("threads", "threads", _INT, False), ("method", "method", _STR, False))),
    ("load", (("busy", "busy", _BOOL, False), ("reasons", "reasons", _LIST, False),
              ("other_cores", "other_cores", _NUM, False), ("steal", "steal", _NUM, False))),
)


def _ci_problem(speedup: dict | None) -> str | None:
    ci = (speedup or {}).get("ci")
    if ci is None or (len(ci) == 2 and all(_fits(v, _NUM) for v in ci)):
        return None
    return f"measurement.speedup.ci is {_said(ci)}, not two numbers"


UNREAD_KEY = "measurement_unread"     # extra.measurement_unread: {"why", "record"}, set aside at load


def set_aside_measurement(data: dict) -> None:
    """run.json's ``measurement`` as loaded (``data``: its object, types checked) is a record every reader
    can take, or None: one of the wrong shape is moved to ``extra.measurement_unread`` with why, kept in
    the run and never read, and ``section_problems`` names it.  The run stays shown (its records, its
    profiles), as a run with no measurement yet."""
    record = data.get("measurement")
    why = Measurement.read(record)[1]
    if why is None:
        return
    data["extra"] = {**(data.get("extra") or {}), UNREAD_KEY: {"why": why, "record": record}}
    data["measurement"] = None


def _unread_measurement(extra) -> str | None:
    unread = extra.get(UNREAD_KEY) if isinstance(extra, dict) else None
    why = unread.get("why") if isinstance(unread, dict) else None
    return f"{why} (set aside in extra.{UNREAD_KEY}; measure again: asight profile FILE --remeasure)" \
        if isinstance(why, str) else None


def _entry_problem(key: str, entries: list) -> str | None:
    bad = next((i for i, entry in enumerate(entries) if not isinstance(entry, dict)), None)
    return None if bad is None else f"measurement.{key}[{bad}] is {_said(entries[bad])}, not an object"


def _median_problem(side: str, summary: dict) -> str | None:
    median = summary.get("median_us")
    if median is None:
        return f"measurement.{side}.median_us is missing"
    return None if _fits(median, _NUM) else f"measurement.{side}.median_us is {_said(median)}, not int or float"


UNMEASURED = Measurement(raw={})        # every figure None: what a summary shows of a run before a measurement


def measured_headline(meta) -> Measurement | None:
    """A run's measurement when its figures are the run's headline (it measured the untuned side; a
    failed one holds only its ``error``), else None."""
    measured = Measurement.of(getattr(meta, "measurement", None))
    return measured if measured is not None and measured.headline else None


def build_of(meta) -> Build | None:
    """The build a run's figures are of: ``extra.build``, else the one a run before it kept in its
    measurement record; None for neither (a run from before the deployable build, or of a PrimFunc)."""
    measured = Measurement.of(getattr(meta, "measurement", None))
    return Build.from_extra(getattr(meta, "extra", None)) or (measured.build if measured else None)


SECTIONS = (Adopted, Space, Build, Shortfall, TimeBudget, Levers)


def read_section(extra, section: type):
    """``(value, why)`` of one section class of ``SECTIONS`` (see ``_Section.read``)."""
    return section.read(extra)


def section_problems(meta) -> list[str]:
    """Which of a run's sections (and its measurement record) were not read and why (one line each); []
    when all that are there fit."""
    extra = getattr(meta, "extra", None)
    whys = [section.read(extra)[1] for section in SECTIONS] + [Measurement.read(getattr(meta, "measurement", None))[1],
                                                               _unread_measurement(extra)]
    return [why for why in whys if why]
