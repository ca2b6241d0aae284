"""How the product starts its Python processes: isolated from the workspace (docs/sandbox.md §Import path).

A process started as ``python -m module`` puts its working directory first on ``sys.path``; an
editor starts the server in the workspace, so a ``msgpack.py`` or ``pyseccomp.py`` beside the
user's files would be imported by our own processes, before (or instead of) any sandbox.  Every
Python process the product starts therefore runs

* with ``-I`` (isolated: neither the working directory nor the script's directory on ``sys.path``,
  every ``PYTHON*`` variable and the user site-packages ignored);
* in a working directory that is not the workspace (``NEUTRAL_CWD``, or a directory of our own);
* with ``asight_lsp`` loaded from ``PACKAGE_ROOT`` by file location (``BOOT``), without putting
  that directory on ``sys.path`` (in a source checkout it also holds tests/, bench/ ...);
* with an environment whose ``PYTHON*`` variables are ours only (``isolated_env``), so that
  grandchildren started without ``-I`` (TVM's builder and runner pools) are not steered by the
  user's ``PYTHONPATH``/``PYTHONSTARTUP`` either, and never put their working directory first
  (``PYTHONSAFEPATH=1``);
* without PyTorch until a request needs it (``startup/no_torch.py``: ``import tvm`` would import it
  in every process, 2 CPU-seconds each); TVM's pool workers get the same from
  ``startup/sitecustomize.py``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)
NEUTRAL_CWD = "/"   # exists everywhere, holds no module; a process that needs a folder makes its own

STARTUP_DIR = str(Path(__file__).resolve().parent / "startup")   # its sitecustomize: no_torch.install()

# run ``module`` as __main__ with asight_lsp taken from argv[1] (by file location, not via sys.path),
# with no PyTorch until a request needs it (``startup/no_torch.py``)
BOOT = ("import importlib.util as u, runpy, sys\n"
        "root, module = sys.argv[1], sys.argv[2]\n"
        "if 'asight_lsp' not in sys.modules:\n"
        "    spec = u.spec_from_file_location('asight_lsp', root + '/asight_lsp/__init__.py',"
        " submodule_search_locations=[root + '/asight_lsp'])\n"
        "    pkg = sys.modules['asight_lsp'] = u.module_from_spec(spec)\n"
        "    spec.loader.exec_module(pkg)\n"
        "import asight_lsp.engine.startup.no_torch as no_torch\n"
        "no_torch.install()\n"
        "sys.argv = [module] + sys.argv[3:]\n"
        "runpy.run_module(module, run_name='__main__', alter_sys=True)\n")


def module_argv(module: str, *args: str, python: str | None = None) -> list[str]:
    """``python -I`` running ``module`` (an ``asight_lsp`` module) with ``args``, as ``-m`` would."""
    return [python or sys.executable, "-I", "-c", BOOT, PACKAGE_ROOT, module, *args]


def script_argv(script: str, *args: str, python: str | None = None) -> list[str]:
    """``python -I script args``: the script's own folder is not put on ``sys.path`` either."""
    return [python or sys.executable, "-I", script, *args]


def isolated_env(base: dict | None = None) -> dict:
    """The environment for a product process: the caller's, less the user's ``PYTHON*`` variables.

    ``PYTHONPATH`` names ``PACKAGE_ROOT``, for grandchildren without ``-I`` that unpickle our
    functions (TVM's popen pools), and ``STARTUP_DIR`` (their ``sitecustomize``: no PyTorch);
    ``PYTHONSAFEPATH`` keeps their working directory off ``sys.path``.
    """
    env = {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join((PACKAGE_ROOT, STARTUP_DIR))
    env["PYTHONSAFEPATH"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    return env
