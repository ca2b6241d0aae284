"""The glossary is one list of plain words: the Python module (report), the webview's copy and docs/glossary.md."""
from __future__ import annotations

import json
import re
from pathlib import Path

from asight_lsp.views.glossary import LINKED_BY, TERMS, linked_by

ROOT = Path(__file__).resolve().parents[2]


def _ts_record(name: str) -> dict:
    text = (ROOT / "vscode-extension" / "src" / "webview" / "glossary.ts").read_text()
    body = re.search(rf"export const {name}: Record<string, string> = \{{(.*?)\n\}};", text, re.S).group(1)
    return json.loads("{" + body.rstrip().rstrip(",") + "}")


def test_webview_glossary_is_the_same_as_the_reports():
    assert _ts_record("TERMS") == TERMS
    assert _ts_record("LINKED_BY") == LINKED_BY


def test_docs_glossary_lists_every_term_and_link_kind():
    doc = (ROOT / "docs" / "glossary.md").read_text()
    for term, text in TERMS.items():
        assert f"- **{term}** — {text}" in doc, term
    for kind, words in LINKED_BY.items():
        assert f"| `{kind}` | {words} |" in doc, kind


def test_linked_by_says_match_kinds_in_plain_words():
    from asight_lsp.analysis.matching import common

    kinds = [common.GRAPH, common.GRAPH_NAMES, common.GRAPH_RELAXED, common.LABEL, common.NAME, common.LINEAGE, common.UNMATCHED]
    assert set(kinds) == set(LINKED_BY), "every kind the matcher can give has words"
    assert linked_by("graph") == "same dataflow" and linked_by(None) == "not linked"
    assert all("graph" not in linked_by(k) for k in kinds), "no 'graph' jargon left"
