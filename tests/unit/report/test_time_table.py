""""Where the time goes": every engine row from one source, and the table says which. `make run`
once printed an exact engine TTFT of 723 ms beside a queue of 730 ms read from vLLM's histograms over
other requests: parts larger than the whole."""

from loadwatch.report.attribution import exact_engine_ttft
from loadwatch.report.markdown import where_the_time_goes

HISTOGRAMS = {"engine_mean_ttft_ms": 740.0, "engine_p99_ttft_ms": 2500.0, "engine_mean_queue_ms": 730.3,
              "engine_mean_prefill_ms": 8.9, "queue_time_share": 0.5, "prefill_time_share": 0.1,
              "decode_time_share": 0.4}
SPLIT = {"engine_mean_ttft_ms": 723.0, "engine_median_ttft_ms": 700.0, "engine_p99_ttft_ms": 1500.0,
         "parts": [{"part": "engine_queue_s", "mean_ms": 715.0, "median_ms": 690.0, "p99_ms": 1490.0},
                   {"part": "engine_prefill_s", "mean_ms": 8.0, "median_ms": 7.5, "p99_ms": 20.0}]}


def rows(lines: list[str]) -> dict[str, list[str]]:
    return {cells[0]: cells[1:] for line in lines if line.startswith("| engine")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}


def test_with_each_requests_account_every_engine_row_comes_from_it_and_adds_up():
    engine = dict(HISTOGRAMS)
    exact_engine_ttft(engine, SPLIT)
    lines = where_the_time_goes({}, engine)
    table = rows(lines)
    assert table["engine: TTFT (queued + prefill)"] == ["723.0 ms", "700.0 ms", "1500.0 ms"]
    assert table["engine: queued"] == ["715.0 ms", "690.0 ms", "1490.0 ms"]
    assert table["engine: prefill"][0] == "8.0 ms"
    assert any("from each request's own account" in line for line in lines)


def test_without_it_every_engine_row_comes_from_the_histograms_and_says_so():
    lines = where_the_time_goes({}, dict(HISTOGRAMS))
    table = rows(lines)
    assert table["engine: queued"] == ["730.3 ms", "", ""] and table["engine: TTFT (queued + prefill)"][0] == "740.0 ms"
    assert any("from vLLM's histograms over the window" in line for line in lines)
