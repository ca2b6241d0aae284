"""The builder MetaSchedule tunes with: ``fast_build`` in a pool of worker processes kept across
batches, each candidate exported as a shared library into the builder's own folder.

``fast_build`` lives in an importable module that needs only ``import tvm`` (0.8 s), so cloudpickle
sends it to the builder workers *by reference* (docs/tvm.md §0/§2).
"""
from __future__ import annotations

import functools
import os

from .compat import PopenPoolExecutor, RemoveWeightLayoutRewriteBlock, StatusKind, builder_job, derived_object, ms, tvm
from .sandbox import limit_memory


def export_shared(mod, root: str | None = None) -> str:
    """The builder's export: a shared library the runner only ``dlopen``s (MetaSchedule's default, a
    tar, makes the runner run the linker, which its sandbox forbids).  ``root``: the builder's own
    folder (``PooledBuilder.root``), removed with the builder."""
    import tempfile
    path = os.path.join(tempfile.mkdtemp(prefix="asight-build-", dir=root), "candidate.so")
    mod.export_library(path)
    return path


_BUILD_ROOTS: set = set()


def remove_build_roots() -> None:
    """Remove every builder's folder of this process: MetaSchedule removes a candidate's library after
    running it, but a cancelled or failed job left the libraries of its last batch in /tmp."""
    import shutil
    for root in list(_BUILD_ROOTS):
        shutil.rmtree(root, ignore_errors=True)
        _BUILD_ROOTS.discard(root)


def fast_build(mod, target, _params):
    """``ms.builder.default_build`` minus its ``import tvm.s_tir.tensor_intrin`` (19 s per worker).

    ``tvm.tirx.build`` (not ``tvm.compile``) returns a module that the default export can save.
    """
    from .parse import checked_for_build
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(checked_for_build(mod, target, "a candidate"))
    return tvm.tirx.build(mod, target=target)


def cores() -> int:
    """CPU cores this process may use (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def make_builder(max_workers: int | None = None, timeout_sec: float = 30.0, pooled: bool = True):
    """The builder we tune with: ``fast_build`` in a worker pool kept across batches.

    ``LocalBuilder`` starts a fresh pool for every batch (and one more for a sanity check), so each
    batch pays ``import tvm`` (0.8 s CPU) per worker; ``PooledBuilder`` pays it once per worker.
    """
    if pooled:
        return PooledBuilder(max_workers=max_workers or cores(), timeout_sec=timeout_sec)
    return ms.builder.LocalBuilder(max_workers=max_workers or cores(), timeout_sec=timeout_sec, f_build=fast_build)


def remove_orphan_roots(tmp: str) -> list[str]:
    """Remove builders' folders (``asight-builds-<pid>-*``) of processes that are gone: a job killed
    with SIGKILL runs no atexit and left its last batch's libraries in /tmp.  Returns those removed."""
    import shutil
    removed = []
    for entry in os.scandir(tmp):
        parts = entry.name.split("-")
        if len(parts) < 4 or parts[:2] != ["asight", "builds"] or not parts[2].isdigit():
            continue
        if not entry.is_dir(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_uid != os.getuid():
            continue
        try:
            os.kill(int(parts[2]), 0)
            continue                             # its process lives (or another user's: not ours to judge)
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(entry.path)
    return removed


@derived_object
class PooledBuilder(ms.builder.PyBuilder):
    """``LocalBuilder`` with ``fast_build`` whose worker processes live across batches.

    Workers are recycled after ``max_uses`` builds (LLVM's memory grows) and replaced when a build
    times out, as ``PopenPoolExecutor`` does.  Results and error texts match ``LocalBuilder``.
    """

    def __init__(self, max_workers: int, timeout_sec: float = 30.0, max_uses: int = 64):
        super().__init__()
        self.max_workers, self.timeout_sec, self.max_uses = max_workers, timeout_sec, max_uses
        self._pool = None
        self.root = None

    def _root(self) -> str:
        if self.root is None:
            import atexit
            import tempfile
            remove_orphan_roots(tempfile.gettempdir())
            self.root = tempfile.mkdtemp(prefix=f"asight-builds-{os.getpid()}-")
            if not _BUILD_ROOTS:
                atexit.register(remove_build_roots)
            _BUILD_ROOTS.add(self.root)
        return self.root

    def _executor(self):
        if self._pool is None:
            self._pool = PopenPoolExecutor(max_workers=self.max_workers, timeout=self.timeout_sec,
                                           maximum_process_uses=self.max_uses, initializer=limit_memory)
        return self._pool

    def build(self, build_inputs: list) -> list:
        export = functools.partial(export_shared, root=self._root())
        jobs = [builder_job(fast_build, item, export) for item in build_inputs]
        results = []
        for outcome in self._executor().map_with_error_catching(lambda job: job[0](*job[1]), jobs):
            if outcome.status == StatusKind.COMPLETE:
                results.append(ms.builder.BuilderResult(outcome.value, None))
            elif outcome.status == StatusKind.TIMEOUT:
                results.append(ms.builder.BuilderResult(
                    None, f"LocalBuilder: Timeout, killed after {self.timeout_sec} seconds"))
            else:
                results.append(ms.builder.BuilderResult(
                    None, "LocalBuilder: An exception occurred\n" + str(outcome.value)))
        return results

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self.root is not None:
            import shutil
            shutil.rmtree(self.root, ignore_errors=True)
            _BUILD_ROOTS.discard(self.root)
            self.root = None
