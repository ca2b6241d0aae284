"""run.json's sections, typed: what a reader may take from ``RunMeta.extra`` (TVM-free).

``extra`` holds what the jobs and commands write (dicts: writers stay as they are); a *reader* takes
a section through these types (``RunMeta.adopted``, ``.space``, ``.build``, ``.shortfall``), never by
``extra["..."]``.  run.json is data a cloned repository can ship, so a section of the wrong shape is
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
from dataclasses import dataclass
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


class _Section:
    KEY: ClassVar[str]
    FIELDS: ClassVar[tuple]       # (attribute, JSON key, types, required)

    @classmethod
    def read(cls, extra) -> tuple:
        """``(section, None)``; ``(None, None)`` when absent (a run from before it); ``(None, why)``."""
        raw = extra.get(cls.KEY) if isinstance(extra, dict) else None
        if raw is None or raw == {}:       # {}: as absent, as the truthy checks before these types read it
            return None, None
        if not isinstance(raw, dict):
            return None, f"extra.{cls.KEY} is {json.dumps(raw, default=str)[:60]}, not an object"
        values = {}
        for attr, key, kinds, required in cls.FIELDS:
            value = raw.get(key)
            if value is None and not required:
                values[attr] = None
            elif value is None:
                return None, f"extra.{cls.KEY}.{key} is missing"
            elif not _fits(value, kinds):
                names = " or ".join(k.__name__ for k in kinds)
                return None, f"extra.{cls.KEY}.{key} is {json.dumps(value, default=str)[:60]}, not {names}"
            else:
                values[attr] = value
        return cls(**values), None

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


@dataclass(frozen=True)
class Build(_Section):
    """``extra.build``: the build a Relax run tuned and measured (worker/tune_job.py ``deployable``;
    analysis/deployable.py).  Absent: a run from before the deployable build, or of a PrimFunc."""
    deployable: bool = True
    weights: str | None = None
    bound: int | None = None
    weights_digest: str | None = None

    KEY: ClassVar[str] = "build"
    FIELDS: ClassVar[tuple] = (
        ("deployable", "deployable", _BOOL, True), ("weights", "weights", _STR, False), ("bound", "bound", _INT, False),
        ("weights_digest", "weights_digest", _STR, False))


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


SECTIONS = (Adopted, Space, Build, Shortfall, Levers)


def read_section(extra, section: type):
    """``(value, why)`` of one section class of ``SECTIONS`` (see ``_Section.read``)."""
    return section.read(extra)


def section_problems(meta) -> list[str]:
    """Which of a run's sections were not read and why (one line each); [] when all that are there fit."""
    extra = getattr(meta, "extra", None)
    return [why for why in (section.read(extra)[1] for section in SECTIONS) if why]
