"""No PyTorch in a process until a request needs it.

``import tvm`` imports ``torch`` first wherever it is installed (tvm_ffi's workaround of a Windows
symbol clash): 2 of the 2.9 CPU-seconds a TVM process spent starting on this project's machine, paid
by every worker, tuning job, builder and runner though only the import of a ``.pt2`` uses it.
``install()`` puts a finder first on ``sys.meta_path`` that refuses ``torch`` (ModuleNotFoundError,
which tvm_ffi ignores); nothing is put in ``sys.modules``, so libraries that look for a loaded
``torch`` there (scipy) see none.  ``allow()`` takes it away again (``worker/compat.load_torch``).

Installed by ``engine/spawn.BOOT`` in the product's own processes and by ``sitecustomize`` (this
folder is on the ``PYTHONPATH`` of TVM's pool workers, ``spawn.isolated_env``).
"""
import sys


class NoTorch:
    """A meta path finder that refuses ``torch`` and its submodules."""
    asight_no_torch = True

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("PyTorch is not loaded in this process until a request needs it", name=name)
        return None


def install() -> None:
    if not any(getattr(finder, "asight_no_torch", False) for finder in sys.meta_path):
        sys.meta_path.insert(0, NoTorch)


def allow() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "asight_no_torch", False)]
