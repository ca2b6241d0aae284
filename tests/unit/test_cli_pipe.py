"""The CLI when the process reading its output goes away (``asight … | head``): outside probe F13 saw
"asight: internal error: BrokenPipeError" after the work was done."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CODE = """
import sys
from asight_lsp import cli
class Command:
    def run(args):
        sys.stdout.write("x" * (64 << 20))    # more than any pipe holds
        sys.stdout.flush()
class Parser:
    def parse_args(self, argv):
        return Command
cli.build_parser = Parser
sys.exit(cli.main([]))
"""


def test_a_reader_that_goes_away_ends_the_cli_quietly_with_sigpipes_status(tmp_path):
    (tmp_path / "cmd.py").write_text(CODE)
    script = (f'"{sys.executable}" "{tmp_path / "cmd.py"}" 2> "{tmp_path / "err"}" | head -c 10 > /dev/null; '
              'echo "${PIPESTATUS[0]}"')
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert proc.stdout.strip() == "141" and (tmp_path / "err").read_text() == ""
