"""The report's plot shows the latency the run measured: TTFT, or E2E for a run that streamed nothing."""

from loadwatch.report.plots import plot_latency_against_engine, plotted_latency

ENGINE = {"kv_usage": [(1795000000.0, 0.1)], "kv_usage_peak": [(1795000000.0, 0.2)],
          "waiting": [(1795000000.0, 0.0)]}
POINTS = [(1795000000.0 + t, 0.05) for t in range(10)]


def test_a_streamed_run_plots_ttft():
    assert plotted_latency({**ENGINE, "ttft_p99": POINTS, "e2e_p99": POINTS}) == "TTFT"


def test_an_embeddings_run_plots_e2e(tmp_path):
    data = {**ENGINE, "ttft_p99": [], "e2e_p99": POINTS}
    assert plotted_latency(data) == "E2E"
    path = plot_latency_against_engine(data, [], 1795000000.0, 1795000010.0, tmp_path / "plot.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_with_neither_keeps_the_ttft_title():
    assert plotted_latency({**ENGINE, "ttft_p99": [], "e2e_p99": []}) == "TTFT"
