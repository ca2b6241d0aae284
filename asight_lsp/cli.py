"""``asight``: the headless CLI.  Exit 0 ok, 1 the input has errors, 2 usage or internal error.

Each sub-command lives in ``asight_lsp/commands/<name>.py`` with ``add_parser(sub)`` and
``run(args) -> int``; errors reach the user as one line, never as a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .errors import AsightError

COMMANDS = ["check", "outline", "tune", "profile", "hotspots", "space", "loops", "principles", "report",
            "demo", "serve", "code", "import", "export", "model", "adopt",
            "counters", "runs", "library"]
MODULES = {"import": "import_model"}   # a command whose module name differs (``import`` is a keyword)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: one line, exit 2
        self.exit(2, f"asight: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="asight", description="Auto-scheduling insight for Apache TVM (TVMScript)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        try:
            module = importlib.import_module(f".commands.{MODULES.get(name, name)}", __package__)
        except ModuleNotFoundError as err:
            if err.name and err.name.endswith(f"commands.{MODULES.get(name, name)}"):
                continue  # command not built yet
            raise
        command_parser = module.add_parser(sub)
        command_parser.set_defaults(run=module.run)
    return parser


def stdout_closed() -> bool:
    """Did the process reading our output go away?  Then stdout is pointed at /dev/null, so the
    interpreter's last flush does not fail again."""
    import os
    import select
    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        closed = any(event & select.POLLERR for _, event in poll.poll(0))   # a pipe without a reader
    except (OSError, ValueError):
        return False
    if closed:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return closed


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args.run(args) or 0)
    except AsightError as err:
        print(f"asight: error: {str(err).removeprefix('error: ')}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("asight: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError as err:
        if not stdout_closed():
            print(f"asight: internal error: BrokenPipeError: {err}", file=sys.stderr)
            return 2
        return 141     # the reader went away (``| head``): what was done is kept; a shell's SIGPIPE status
    except Exception as err:  # an internal error still gets one line; details with ASIGHT_DEBUG=1
        import os
        if os.environ.get("ASIGHT_DEBUG"):
            raise
        print(f"asight: internal error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
