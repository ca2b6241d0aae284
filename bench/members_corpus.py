"""Member-by-member reading of ``@I.ir_module`` classes against the whole class, on TVM's tests.

    python bench/members_corpus.py [REPO]

Every multi-method class of apache/tvm's ``tests/python`` (``bench/gate_corpus.items_of``, nested
ones included, each as a standalone file) is outlined twice: member by member (``members.py``, the
language server's path) and whole.  Prints how many classes were cut into members and how many
outlines (units, functions, gate verdicts, syntax errors) differ; the ids of those that do.
"""
from __future__ import annotations

import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gate_corpus import MIRROR, items_of, read, test_files  # noqa: E402

from asight_lsp.tvmscript import outline as outline_module  # noqa: E402
from asight_lsp.tvmscript.members import split_class  # noqa: E402
from asight_lsp.tvmscript.outline import ChunkCache, build_outline  # noqa: E402
from asight_lsp.tvmscript.pysource import split_chunks  # noqa: E402


def main(argv: list[str]) -> int:
    repo = argv[0] if argv else MIRROR
    cut = same = problems = 0
    differ = []
    for path in test_files(repo):
        text = read(repo, path)
        if "ir_module" not in text:
            continue
        for item in items_of(path, text, nested=True):
            lines = item["text"].splitlines()
            if item["kind"] != "ir_module" or not any(split_class(lines, s, e) for s, e in split_chunks(lines)):
                continue
            by_member = build_outline(item["text"], chunks=ChunkCache())
            with mock.patch.object(outline_module, "split_class", lambda *args: None):
                whole = build_outline(item["text"], chunks=ChunkCache())
            cut += 1
            problems += sum(len(u.problems) for u in whole.units)
            if by_member == whole:
                same += 1
            else:
                differ.append(item["id"])
    print(f"classes read member by member: {cut}; outlines equal to the whole class's: {same}; "
          f"gate refusals among them: {problems}")
    for item_id in differ[:20]:
        print("differs:", item_id)
    return 0 if not differ else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
