"""The extension in a real VS Code (code-server): lenses, hover, inlay hints, Tune with progress, panels.

One drive (conftest.session) walks the whole story; each test checks one part of it, and a failure
earlier in the drive is reported by every later test with the drive's error.
"""
from __future__ import annotations

import re


def reached(facts: dict, step: str) -> None:
    assert step in facts["steps"], f"the drive stopped before '{step}': {facts.get('error')}"


def test_code_lenses_and_hover(session):
    reached(session, "hover")
    assert all(w in session["lenses"] for w in ("Tune", "Profile", "Search space", "Loop view")), session["lenses"]
    assert session["hover"].startswith("block C in matmul64 · iterators SSR")
    assert "524,288 FLOPs" in session["hover"]


def test_tune_shows_cancellable_progress_and_status_bar(session):
    reached(session, "tuned")
    assert re.fullmatch(r"ASight: tuning matmul64: \d+/8 trials( · best .+)?", session["progressText"]), session["progressText"]
    assert session["cancelButton"], "the progress notification has a Cancel button"
    assert session["statusBar"].startswith("ASight matmul64: "), session.get("statusBar")
    assert "8/8" in session["trialsSeen"] or session["result"].endswith("8 trials")
    assert re.fullmatch(r"ASight: tuned matmul64: [\d.]+ (µs|ms) · [\d.]+× vs untuned( · noisy)? · 8 trials", session["result"]), \
        session["result"]


def test_result_lens_and_inlay_hints_after_tuning(session):
    reached(session, "inlay hints")
    assert re.match(r"[\d.]+ (µs|ms) · [\d.]+× vs untuned( · noisy)? · 8 trials", session["resultLens"]), session["resultLens"]
    assert any(re.search(r"split|parallel|vector", h) for h in session["inlayHints"]), session["inlayHints"]


def test_scheduled_code_beside_the_source_with_linked_highlight(session):
    reached(session, "code view linked")
    assert re.search(r"matmul64\.trial-\d+-best\.scheduled\.py", session["codeTab"]), session["codeTab"]
    by_side = {entry["code"]: entry["lines"] for entry in session["codeHighlight"]}
    store = "C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]"
    assert by_side[False] == [store], session["codeHighlight"]          # the source editor: the cursor line
    # the same statement; a cache_write schedule stores into C_global (the store keeps the source span)
    same = re.compile(r"C(_\w+)?\[vi, vj\] = C(_\w+)?\[vi, vj\] \+ A\[vi, vk\] \* B\[vk, vj\]")
    assert by_side[True] and all(same.fullmatch(line) for line in by_side[True]), session["codeHighlight"]


def test_crashed_server_restarts_with_a_message(session):
    reached(session, "server back")
    assert len(session["killed"]) == 1, session["killed"]
    assert session["crashMessage"].startswith("ASight: the language server stopped unexpectedly; restarting it (1 of 5")


def test_search_space_panel_cells_and_candidates(session):
    reached(session, "candidates")
    assert session["cells"] >= 1 and session["legend"]
    assert re.match(r"\d+ candidates? · mean ", session["tooltip"])
    assert session["candidateRows"] >= 1


def test_candidate_schedule_opens_in_an_editor(session):
    reached(session, "schedule opened")
    assert re.search(r"trial-\d+\.py", session["scheduleTab"])


def test_no_page_errors(session):
    assert session["pageErrors"] == []   # (how long the drive took is in session["wall_s"]: not asserted)


def test_design_space_lens_tunes_and_hints_its_sampling_calls(session):
    reached(session, "space hints")
    # matmul_space.py samples three 2-way tiles and an unroll step: e.g. "best [8, 8]", "best 64"
    assert any(re.fullmatch(r"best \[\d+, \d+\]", h) for h in session["spaceHints"]), session["spaceHints"]
    assert all(h.startswith("best ") and "?" not in h for h in session["spaceHints"]), session["spaceHints"]


def test_candidate_code_from_the_search_space_panel(session):
    reached(session, "candidate code")
    trial = session["steps"]["candidate code"]["trial"]
    assert re.search(rf"trial-{trial}(-best)?\.scheduled\.py", session["candidateCodeTab"]), session["candidateCodeTab"]
