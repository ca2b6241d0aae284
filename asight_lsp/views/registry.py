"""The analytics payloads: what the webviews, the HTML report and the PNG draw, by schema.

=====================  ==========================  =====================================
schema                 builder                     language-server request
=====================  ==========================  =====================================
asight.searchSpace/1   ``searchspace.search_space``  ``asight/searchSpace``
asight.loopView/1      ``loops.loop_view``           ``asight/loopView``
asight.stageGraph/1    ``loops.stage_graph``         ``asight/stageGraph``
asight.principles/1    ``principles.principles``     ``asight/principles``
=====================  ==========================  =====================================

Each builder takes a ``context.RunData`` (``services.run_data.load_run``); ``stage_graph_of(function)`` needs only a
``tvmscript.outline.Function`` (a stage graph before any run); ``services.run_data.build_view``
loads a run and builds one payload.  Every payload has ``schema``, ``status``
(``ok`` / ``unavailable``), ``run`` and ``notes``; ``REQUIRED`` lists the keys an ``ok`` payload has.
"""
from __future__ import annotations

from .loops import LOOP_VIEW_SCHEMA, STAGE_GRAPH_SCHEMA, loop_view, stage_graph
from .principles import SCHEMA as PRINCIPLES_SCHEMA, principles
from .searchspace import SCHEMA as SEARCH_SPACE_SCHEMA, search_space

BUILDERS = {"searchSpace": search_space, "loopView": loop_view, "stageGraph": stage_graph,
            "principles": principles}
SCHEMAS = {"searchSpace": SEARCH_SPACE_SCHEMA, "loopView": LOOP_VIEW_SCHEMA, "stageGraph": STAGE_GRAPH_SCHEMA,
           "principles": PRINCIPLES_SCHEMA}
COMMON = ("schema", "status", "run", "notes")
REQUIRED = {
    SEARCH_SPACE_SCHEMA: COMMON + ("features", "reduction", "clustering", "hex", "categories", "cells",
                                   "boundaries", "color_scale", "best", "candidates", "contour"),
    LOOP_VIEW_SCHEMA: COMMON + ("function", "stages", "sources"),
    STAGE_GRAPH_SCHEMA: COMMON + ("function", "nodes", "edges"),
    PRINCIPLES_SCHEMA: COMMON + ("principles", "constraints", "tested", "settings"),
}


def missing_keys(payload: dict) -> list[str]:
    """Keys an ``ok`` payload of its schema must have but lacks (``[]`` = well-formed)."""
    if payload.get("status") != "ok":
        return [k for k in ("schema", "status", "message") if k not in payload]
    return [k for k in REQUIRED.get(payload.get("schema"), COMMON) if k not in payload]
