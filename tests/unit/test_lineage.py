"""Block lineage from replayed trace events (pure, no TVM): which source block each derived block
comes from and how, and derived tags in printed code.  The events have the shape
``worker/lineage.py`` records (names TVM reported before/after each instruction)."""
from asight_lsp.analysis.block_origin import derivation_label, lineage, span_role
from asight_lsp.analysis.codelinks import derived_in_text, label_links, strip_tags
from asight_lsp.engine.wire import tag


def ev(kind, inputs=(), after=None, outputs=()):
    return {"kind": kind, "inputs": [list(x) for x in inputs],
            "after": [list(x) for x in (after if after is not None else inputs)], "outputs": list(outputs)}


LAYERNORM = [  # recorded from replaying an rfactor + decompose schedule of fixtures/lineage.py
    ev("GetSBlock", outputs=["sum"]), ev("GetLoops", [["sum"]]), ev("Split", [[], []]),
    ev("RFactor", [["sum"]], outputs=["sum_rf"]),
    ev("GetLoops", [["sum_rf"]]),
    ev("DecomposeReduction", [["sum_rf"], []], after=[["sum_rf_update"], []], outputs=["sum_rf_init"]),
    ev("GetSBlock", outputs=["sum"]),
    ev("DecomposeReduction", [["sum"], []], after=[["sum_update"], []], outputs=["sum_init"]),
    ev("GetSBlock", outputs=["normalize"]), ev("GetLoops", [["normalize"]]), ev("Parallel", [[]]),
]


def by_block(entries):
    return {e["block"]: e for e in entries}


def test_rfactor_and_decompose_chain_back_to_the_source_block():
    got = by_block(lineage(LAYERNORM, ["sum", "sqsum", "normalize"]))
    assert {name: e["label"] for name, e in got.items()} == {
        "sum_rf_init": "sum — rfactor partial, init", "sum_rf_update": "sum — rfactor partial, update",
        "sum_init": "sum — rfactor combine, init", "sum_update": "sum — rfactor combine, update"}
    assert all(e["source"] == "sum" for e in got.values())
    assert got["sum_rf_init"]["derivation"] == ["rfactor partial", "init"]


def test_untouched_and_only_looked_up_blocks_are_not_derived():
    got = by_block(lineage(LAYERNORM, ["sum", "sqsum", "normalize"]))
    assert "normalize" not in got and "sqsum" not in got and "sum" not in got   # sum was renamed sum_update


def test_cache_write_compute_at_and_inline():
    events = [ev("GetSBlock", outputs=["matmul"]),
              ev("CacheWrite", [["matmul"]], outputs=["C_global"]),
              ev("ReverseComputeAt", [["C_global"], []]),
              ev("CacheRead", [["matmul"]], outputs=["A_global"]),
              ev("ComputeAt", [["A_global"], []]),
              ev("ComputeInline", [["bias"]], after=[[]]),
              ev("GetSBlock", outputs=["relu"])]
    got = by_block(lineage(events, ["matmul", "bias", "relu"]))
    assert got["C_global"]["label"] == "matmul — cache write, reverse-compute-at"
    assert got["A_global"]["label"] == "matmul — cache read, compute-at"
    assert "bias" not in got and "relu" not in got


def test_names_alone_never_link():
    """A block called like a derived one but made by no instruction of the trace has no lineage."""
    events = [ev("GetSBlock", outputs=["sum_rf"]), ev("GetLoops", [["sum_rf"]])]
    assert lineage(events, ["sum", "sum_rf"]) == []
    assert lineage([ev("RFactor", [["x", "y"]], outputs=["x_rf"])], ["x", "y"]) == []   # two candidates: no guess


def test_blockize_and_unknown_instruction_creating_a_block():
    events = [ev("Blockize", [["conv"]], outputs=["conv_o"]), ev("FutureThing", [["conv_o"]], outputs=["conv_o_x"])]
    got = by_block(lineage(events, ["conv"]))
    assert got["conv_o"]["label"] == "conv — blockize"
    assert got["conv_o_x"]["label"] == "conv — blockize, futurething"


def test_span_roles_and_label():
    assert derivation_label("sum", ["rfactor partial", "init"]) == "sum — rfactor partial, init"
    assert span_role(["rfactor partial", "init"], False) == "init"
    assert span_role(["rfactor combine"], True) == "init"
    assert span_role(["rfactor combine"], False) == "update"
    assert span_role(["cache write", "reverse-compute-at"], False) == "header"


TAGGED = f"""\
        for k_1_init in range(8):  # {tag(12, 12, False)}:d2
            # {tag(12, 16, True)}:d0
            with T.sblock("sum_rf_init"):
                vk_1, vi = T.axis.remap("SS", [k_1_init, i])
                total_rf[vk_1, vi] = T.float32(0.0)  # {tag(15, 15, False)}:d0
        for k_0 in range(96):
            # {tag(12, 16, True)}:d1
            with T.sblock("sum_rf_update"):
                total_rf[vk_1, vi] = total_rf[vk_1, vi] + A[vi, k_0]  # {tag(16, 16, False)}:d1
            # {tag(24, 28, True)}
            with T.sblock("normalize"):
                Out[0] = A[0]  # {tag(26, 26, False)}
"""
ENTRIES = [{"block": "sum_rf_init", "source": "sum", "derivation": ["rfactor partial", "init"],
            "label": "sum — rfactor partial, init"},
           {"block": "sum_rf_update", "source": "sum", "derivation": ["rfactor partial", "update"],
            "label": "sum — rfactor partial, update"},
           {"block": None, "loop": True, "source": "sum", "derivation": ["loop"], "label": "sum — loop made by the schedule"}]


def test_derived_tags_label_links_and_block_bodies():
    text, links = strip_tags(TAGGED)
    lines = text.splitlines()
    got = {lines[link["line"]].strip(): link for link in label_links(links, ENTRIES)}
    assert got['with T.sblock("sum_rf_init"):']["derivation"] == "sum — rfactor partial, init"
    assert got['with T.sblock("sum_rf_init"):']["sourceLine"] == 11
    assert got['vk_1, vi = T.axis.remap("SS", [k_1_init, i])']["derivedBlock"] == "sum_rf_init"   # body inherits
    assert got["total_rf[vk_1, vi] = T.float32(0.0)"]["sourceLine"] == 14
    assert got["total_rf[vk_1, vi] = total_rf[vk_1, vi] + A[vi, k_0]"]["derivation"] == "sum — rfactor partial, update"
    assert got["for k_1_init in range(8):"]["derivation"] == "sum — loop made by the schedule"
    assert "derivation" not in got["Out[0] = A[0]"] and "derived" not in got["Out[0] = A[0]"]
    assert derived_in_text(text, ENTRIES) == {"sum_rf_init": 1, "sum_rf_update": 5}


def test_out_of_range_derived_index_is_left_plain():
    links = label_links([{"line": 0, "sourceLine": 3, "derived": 9}], ENTRIES)
    assert links == [{"line": 0, "sourceLine": 3, "derived": 9}]
