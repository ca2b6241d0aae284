"""The clock the peak rule uses is measured on this host (issue 21: the nominal TSC put kernels above 100 %)."""
from asight_lsp.analysis.peak import core_clock, peak_figures
from asight_lsp.worker.host import host_info


def test_measured_clock_is_real_and_the_peak_names_it():
    host = host_info()
    clock = host["clock"]
    assert clock["measured_hz"] is not None and 0.5e9 < clock["measured_hz"] < 7e9
    ghz, source = core_clock(host)
    assert ghz * 1e9 >= max(clock["measured_hz"], host["tsc_hz"]) - 1   # the highest real clock
    peak = peak_figures(host)
    if peak["formula"]:
        assert source in peak["formula"]["source"] and peak["formula"]["ghz"] == ghz
