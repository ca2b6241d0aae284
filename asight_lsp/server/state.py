"""Per-document and per-server state of the language server (no LSP types, no TVM).

``ServerState`` owns the options, the open documents (text, incremental outline, function hashes),
the TVM worker client (started on first use), the run index and the tuning jobs started by this
server.  ``status`` follows esbonio's engine states so a client can show what the server does.
"""
from __future__ import annotations

import asyncio
import dataclasses
import enum
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pygls.uris import from_fs_path, to_fs_path

from ..store.runs import default_store_root
from ..tvmscript.hashing import constants_used, function_text, source_hash
from ..tvmscript.model import Function, Outline
from ..tvmscript.pysource import source_lines
from .budget import StoreRefresh
from .idle_gc import IdleCollector
from .options import ServerOptions
from ..tvmscript.outline_cache import DocumentOutline, OutlineCache
from ..services.results import FunctionResult, Results
from ..services.space_results import SpaceResult, space_result
from ..tvmscript.design_spaces import SpaceFunction, find_spaces, space_hash
from ..store.index import RunIndex


class Status(str, enum.Enum):
    STARTING = "starting"
    RUNNING = "running"
    TUNING = "tuning"
    ERRORED = "errored"
    EXITED = "exited"


class UnknownDocument(LookupError):
    """A request named a document that is neither open nor a readable file."""


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def editor_text(text: str) -> str:
    """A document's text as the server keeps it: a lone surrogate (JSON can carry half a pair, as an
    editor may send while typing) becomes U+FFFD.  Both are one UTF-16 code unit, so positions
    hold, and the text encodes as UTF-8 wherever it goes (hashes, the TVM worker)."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


@dataclass
class DocState:
    uri: str
    path: str
    text: str
    version: int | None = None
    cache: OutlineCache = field(default_factory=OutlineCache)
    outline: DocumentOutline | None = None
    outline_text: str | None = None
    hashes: dict = field(default_factory=dict)   # id(function) -> (function, source hash, constants used)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    tvm_diagnostics: dict = field(default_factory=dict)   # unit key -> [diagnostic dict], unit-relative lines
    diagnostics_task: asyncio.Task | None = None
    is_open: bool = True
    memo: dict = field(default_factory=dict)   # feature -> (key, value): answers reused while nothing changed
    build_s: float | None = None   # how long its last outline build took (``ServerState._build``)
    built_chars: int = 0
    opening: tuple | None = None   # (future, text): the outline of the opened text, being built
    _lines: tuple = field(default=(None, ()), repr=False)   # (text, source_lines(text))

    @property
    def lines(self) -> list[str]:
        """``source_lines(text)``, split once per text (read-only)."""
        if self._lines[0] is not self.text:
            self._lines = (self.text, source_lines(self.text))
        return self._lines[1]


@dataclass
class MonitoredJob:
    """A tuning job started by this server."""
    run_id: str
    uri: str | None
    function: str
    handle: Any                      # jobs.TuneJob
    token: str | None = None         # work-done progress token
    task: asyncio.Task | None = None
    last_event: dict | None = None


class ServerState:
    def __init__(self, options: ServerOptions | None = None):
        self.options = options or ServerOptions()
        self.root: str = os.getcwd()
        self.docs: dict[str, DocState] = {}
        self.jobs: dict[str, MonitoredJob] = {}
        self.status = Status.STARTING
        self._worker = None
        self._index: RunIndex | None = None
        self._results: Results | None = None
        self._index_root: str | None = None
        self.idle_gc = IdleCollector()
        self._store_root: tuple = (None, "")
        self._store_refresh = StoreRefresh()

    # -- configuration
    def configure(self, root: str | None, values: dict | None, trust: bool = True) -> None:
        if root:
            self.root = root
        self.options = self.options.updated(values, trust)

    def grant_trust(self) -> None:
        """The client says the user trusted the workspace (``asight/workspaceTrusted``)."""
        if not self.options.trust_locked and not self.options.network:
            self.options = dataclasses.replace(self.options, trusted=True)

    @property
    def store_root(self) -> str:
        """The run store's directory (asked once per function by every codeLens: memoised)."""
        key = (self.options.store_root, self.root, os.environ.get("ASIGHT_HOME"))
        if self._store_root[0] != key:
            self._store_root = (key, self.options.store_root or str(default_store_root(self.root)))
        return self._store_root[1]

    @property
    def index(self) -> RunIndex:
        if self._index is None or self._index_root != self.store_root:
            self._index_root = self.store_root
            self._index = RunIndex(self._index_root)
            self._index.scan_on_read = False      # read by ``fresh_store`` only, off the event loop
            self._results = Results(self._index)
        return self._index

    async def fresh_store(self, wait_s: float | None = None) -> bool:
        """The run index brought up to date off the event loop, within its budget (``budget.py``): every
        request that reads runs awaits this first.  ``wait_s``: wait at most that long, then return False
        (the index must not be read) instead of raising ``TooLarge``."""
        return await self._store_refresh.fresh(self.index, self._read_store, wait_s)

    def _read_store(self) -> None:
        """``RunIndex.refresh``, then each run's verdict (an adopted run's records checked), so that a
        request on the event loop finds them cached."""
        index, results = self.index, self.results
        index.refresh()
        for meta in index.metas():
            results.refusal(meta)

    @property
    def results(self) -> Results:
        """Which run speaks for which function (over ``index``; rebuilt with it)."""
        index = self.index
        return self._results if self._results is not None and self._results.index is index else Results(index)

    @property
    def worker(self):
        """The TVM worker client (imported lazily: the server never imports TVM itself)."""
        if self._worker is None:
            from ..engine.client import WorkerClient
            self._worker = WorkerClient(self.options.worker_interpreter())
        return self._worker

    @property
    def worker_started(self) -> bool:
        return self._worker is not None and self._worker.pid is not None

    def worker_failed(self, failed: bool) -> None:
        """``errored`` while the TVM worker cannot answer; back to running/tuning once it does."""
        if failed:
            self.status = Status.ERRORED
        elif self.status == Status.ERRORED:
            self.status = Status.TUNING if self.jobs else Status.RUNNING

    def close(self) -> None:
        for job in list(self.jobs.values()):
            if job.task is not None:
                job.task.cancel()
        if self._worker is not None:
            self._worker.close()
        self.status = Status.EXITED

    # -- documents
    def open(self, uri: str, text: str, version: int | None) -> DocState:
        text = editor_text(text)
        doc = self.docs.get(uri)
        if doc is None or not doc.is_open:
            doc = DocState(uri, to_fs_path(uri) or uri, text, version)
            self.docs[uri] = doc
            _start_opening_build(doc, text)
        else:   # opened again without a close: the next request outlines the new text
            doc.text, doc.version = text, version
        return doc

    def update(self, uri: str, text: str, version: int | None) -> DocState:
        doc = self.docs.get(uri)
        if doc is None:
            return self.open(uri, text, version)
        doc.text, doc.version = editor_text(text), version
        return doc

    def close_document(self, uri: str) -> DocState | None:
        doc = self.docs.pop(uri, None)
        if doc is not None and doc.diagnostics_task is not None:
            doc.diagnostics_task.cancel()
            doc.diagnostics_task = None   # no cycle (document -> task -> coroutine -> document) to outlive it
        if doc is not None and len(doc.text) > RELEASE_OFF_LOOP_CHARS:
            release_off_loop(doc)
        return doc

    def document(self, uri: str) -> DocState:
        """An open document, or a file on disk read on demand; ``UnknownDocument`` otherwise."""
        doc = self.docs.get(uri)
        if doc is not None:
            return doc
        path = to_fs_path(uri) if uri.startswith("file:") else None
        try:
            if not path or not Path(path).is_file():
                raise UnknownDocument(f"unknown document: {uri[:300]}")
            text = Path(path).read_bytes().decode("utf-8", errors="replace")
        except (OSError, ValueError) as err:   # a name too long, a NUL in it, unreadable
            raise UnknownDocument(f"cannot read {path[:300]}: {getattr(err, 'strerror', None) or err}") from None
        doc = DocState(uri, path, text, None, is_open=False)
        return doc

    async def outline(self, doc: DocState) -> DocumentOutline:
        """The document's outline for its current text (built off the event loop, cached)."""
        async with doc.lock:
            if doc.opening is not None:   # the opened text's outline, started at didOpen
                (future, opened), doc.opening = doc.opening, None
                (doc.outline, doc.build_s), doc.outline_text, doc.built_chars = await future, opened, len(opened)
            text = doc.text
            if doc.outline is None or doc.outline_text is not text:
                with self.idle_gc.building():
                    built = await self._build(doc, text)
                doc.outline, doc.outline_text = built, text
                if doc.text is text:
                    doc._lines = (text, built.lines)   # split once, in the build's thread
                if len(doc.hashes) > 2 * len(built.outline.functions) + 64:
                    doc.hashes = {}
                self.idle_gc.schedule()
            return doc.outline

    async def _build(self, doc: DocState, text: str) -> DocumentOutline:
        """``doc.cache.build``: on the event loop when it will be quick (the last build of this
        document was, and the text barely grew: a keystroke re-reads one chunk or method), else in
        a thread, so that a big file's first outline never stalls other requests.  A thread hop
        costs little itself, but while the build holds the GIL every read and write of the loop
        waits for it: a 3 ms build became 10-18 ms before the answer (issue 14)."""
        quick = doc.build_s is not None and doc.build_s < INLINE_BUILD_S and len(text) < INLINE_MAX_CHARS and \
            abs(len(text) - doc.built_chars) < INLINE_BUILD_CHARS
        built, doc.build_s = _timed_build(doc.cache, text, doc.path) if quick else \
            await asyncio.to_thread(_timed_build, doc.cache, text, doc.path)
        doc.built_chars = len(text)
        return built

    def hash_of(self, doc: DocState, fn: Function, lines: list[str] | None = None) -> str:
        """The function's source hash (cached per outline object); ``lines``: the text ``fn`` was
        outlined from, split (default: the document's outline text)."""
        return self._keyed(doc, fn, lines)[1]

    def constants_of(self, doc: DocState, fn: Function, lines: list[str] | None = None) -> dict:
        """The module constants ``fn`` uses (``hashing.constants_used``), cached with its hash: an
        outline object is made anew when the constants it sees change."""
        return self._keyed(doc, fn, lines)[2]

    def _keyed(self, doc: DocState, fn: Function, lines: list[str] | None) -> tuple:
        """``(fn, source hash, constants used)``, from one read of the function's text."""
        hit = doc.hashes.get(id(fn))
        if hit is None or hit[0] is not fn:   # an outline object stands for the same text while it lives
            text = doc.outline_text or doc.text
            if lines is None and text is doc.text:
                lines = doc.lines
            own = function_text(text, fn, lines)
            found = doc.outline.outline.constants if doc.outline is not None else {}
            hit = doc.hashes[id(fn)] = (fn, source_hash(own), constants_used(found, own))
        return hit

    def result(self, doc: DocState, fn: Function, details: bool = True,
               lines: list[str] | None = None) -> FunctionResult | None:
        results = self.results
        if not results.has_runs(doc.path, fn):
            return None   # most functions have no run: their source hash is not needed (after an Enter
            #               every function below it is a new object, and hashing them all cost ms)
        return results.result(doc.path, fn, self.hash_of(doc, fn, lines), with_details=details,
                              constants=self.constants_of(doc, fn, lines))

    def uri_of(self, path: str) -> str:
        for uri, doc in self.docs.items():
            if os.path.abspath(doc.path) == os.path.abspath(path):
                return uri
        return from_fs_path(os.path.abspath(path)) or path


def _start_opening_build(doc: DocState, text: str) -> None:
    """Outline the opened text in a thread at once.  An editor may send a change right behind
    didOpen (both are read before any task runs): the opened text must still be outlined, as the
    last good outline that stands in for a half-typed unit (``OutlineCache``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return   # no event loop (a direct call): the first request builds it
    doc.opening = (loop.run_in_executor(None, _timed_build, doc.cache, text, doc.path), text)


def _timed_build(cache: OutlineCache, text: str, path: str) -> tuple[DocumentOutline, float]:
    """The build and its CPU time in this thread (waits for the GIL do not count)."""
    started = time.thread_time()
    built = cache.build(text, path)
    return built, time.thread_time() - started


INLINE_BUILD_S = 0.008        # a build this quick may run on the event loop next time (``_build``)
INLINE_BUILD_CHARS = 4_000    # unless the text grew or shrank by more than this (a paste)
INLINE_MAX_CHARS = 400_000    # nor in a bigger file: one keystroke (a stray triple quote) may make
#                               the next build parse the whole file (~0.2 s at this size, seconds at 4 MB)
RELEASE_OFF_LOOP_CHARS = 1_000_000   # ~25,000 lines of TVMScript


def release_off_loop(doc: DocState) -> None:
    """Let go of a closed document's outline and caches in a thread: freeing a 100,000-line
    file's ~3*10^6 outline objects takes 1-5 s, which on the event loop would stall every other
    request (the thread shares the GIL with the loop in 5 ms slices, as the outline's build does)."""
    heavy = [doc.outline, doc.cache, doc.hashes, doc.memo, doc._lines]
    doc.outline, doc.cache, doc.hashes, doc.memo, doc._lines = None, OutlineCache(), {}, {}, (None, ())
    threading.Thread(target=heavy.clear, name="asight-release", daemon=True).start()


OFF_LOOP_FUNCTIONS = 300   # answers about bigger outlines are written in a thread


async def off_loop_if_big(functions: int, work, *args):
    """``work(*args)``, in a thread when the outline has more than ``OFF_LOOP_FUNCTIONS`` functions:
    writing the symbols or lenses of a 100,000-line file takes a second, and the event loop must
    answer other documents meanwhile; for a small outline the thread hop would cost more than it saves."""
    if functions > OFF_LOOP_FUNCTIONS:
        return await asyncio.to_thread(work, *args)
    return work(*args)


def find_function(outline: Outline, name: str | None, line: int | None = None) -> Function | None:
    """A function by id or name (a unit's name: its only function, as a run tuned without ``--func``
    names it), or the one containing ``line``, or the only one."""
    if name:
        found = outline.function(name)
        members = [fn for fn in outline.functions if fn.unit == name] if found is None else []
        return members[0] if len(members) == 1 else found
    if line is not None:
        for fn in outline.functions:
            if fn.range["start"]["line"] <= line <= fn.range["end"]["line"]:
                return fn
    return outline.functions[0] if len(outline.functions) == 1 else None


def document_spaces(doc) -> list[SpaceFunction]:
    """The document's space functions, memoised per text."""
    cached = doc.memo.get("spaces")
    if cached is None or cached[0] is not doc.text:
        found = find_spaces(doc.text, doc.path) if ".sample_" in doc.text else []   # most files: no parse
        cached = doc.memo["spaces"] = (doc.text, found)
    return cached[1]


def document_space_hash(doc, space: SpaceFunction) -> str:
    """``spaces.space_hash`` of one of the document's spaces, memoised per text: it parses the whole
    file, and hovers and inlay hints ask for it on every request."""
    cached = doc.memo.get("spaceHashes")
    if cached is None or cached[0] is not doc.text:
        cached = doc.memo["spaceHashes"] = (doc.text, {})
    if space.name not in cached[1]:
        cached[1][space.name] = space_hash(doc.text, space)
    return cached[1][space.name]


def space_result_of(index, doc: DocState, space: SpaceFunction, stats: bool = True) -> SpaceResult | None:
    """The latest run of one of the document's design spaces (``services.space_results``)."""
    return space_result(index, doc.path, space, document_space_hash(doc, space), stats)
