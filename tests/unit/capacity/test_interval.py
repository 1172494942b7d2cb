"""A level's verdict with its SLOs' intervals, and the knee's interval from the levels judged."""

from __future__ import annotations

import numpy as np

from loadwatch.capacity.interval import knee_interval, level_sureness, slo_interval
from loadwatch.capacity.output import interval_words
from loadwatch.metrics.capacity import Capacity
from loadwatch.metrics.slo import parse_slo


def records(ttfts_ms, failures: int = 0) -> list[dict]:
    rows = [{"start": i, "stage": "load", "failure": None, "ttft_s": t / 1000, "tpot_s": None, "elapsed_s": 1.0}
            for i, t in enumerate(ttfts_ms)]
    rows += [{"start": len(rows) + i, "stage": "load", "failure": "http_500", "ttft_s": None, "tpot_s": None,
              "elapsed_s": 0.1} for i in range(failures)]
    return rows + [{"start": -1, "stage": "warmup", "failure": None, "ttft_s": 99.0, "tpot_s": None, "elapsed_s": 99}]


def test_a_percentile_far_from_its_objective_is_sure_and_one_near_it_is_in_doubt():
    rng = np.random.default_rng(1)
    fast = rng.gamma(4, 50, size=400)  # p90 about 320 ms
    assert slo_interval(records(fast), parse_slo("ttft_p90_ms=1000")).verdict == "held"
    assert slo_interval(records(fast), parse_slo("ttft_p90_ms=100")).verdict == "broke"
    measured = float(np.percentile(fast, 90))
    near = slo_interval(records(fast), parse_slo(f"ttft_p90_ms={measured:.0f}"))
    assert near.verdict == "in doubt" and near.low < measured < near.high
    assert near.high < 2 * measured  # the warm-up's 99 s request is left out


def test_a_failure_ratio_gets_wilsons_interval():
    interval = slo_interval(records([100] * 95, failures=5), parse_slo("failure_ratio=0.04"))
    assert interval.verdict == "in doubt" and 0.01 < interval.low < 0.05 < interval.high < 0.12
    assert slo_interval(records([100] * 1000), parse_slo("failure_ratio=0.01")).verdict == "held"


def test_a_rejected_ratio_counts_refusals_apart_from_failures_and_hang_ups():
    rows = records([100] * 90, failures=5)
    rows += [{"start": 200 + i, "stage": "load", "failure": "rejected", "rejection": "max_num_queued_reqs",
              "ttft_s": None, "tpot_s": None, "elapsed_s": 0.01} for i in range(5)]
    rows.append({"start": 300, "stage": "load", "failure": "cancelled", "ttft_s": None, "tpot_s": None,
                 "elapsed_s": 0.3})
    rejected = slo_interval(rows, parse_slo("rejected_ratio=0.2"))
    failed = slo_interval(rows, parse_slo("failure_ratio=0.2"))
    assert rejected.verdict == failed.verdict == "held"  # 5 of 100 each: the hang-up in neither
    assert (rejected.low, rejected.high) == (failed.low, failed.high)


def test_an_slo_without_per_request_values_counts_as_measured():
    interval = slo_interval(records([100] * 50), parse_slo("itl_p99_ms=50"))
    assert interval.verdict is None
    assert level_sureness(True, None, [interval]) == "held" and level_sureness(False, None, [interval]) == "broke"
    assert level_sureness(True, "SLO over twice its limit", [interval]) == "broke"


def test_the_knee_interval_spans_every_level_in_doubt():
    # 128 held, 256 broke, 181 and 152 broke beyond doubt, 139 held, 145 in doubt, 148 and 146 in doubt
    levels = [(128, "held"), (256, "broke"), (181, "broke"), (152, "broke"), (139, "held"), (145, "in doubt"),
              (148, "in doubt"), (146, "in doubt")]
    assert knee_interval(levels) == (139, 148)
    assert knee_interval([(1, "held"), (2, "held"), (4, "held"), (8, "broke"), (6, "held"), (7, "broke")]) == (6, 6)
    assert knee_interval([(2, "in doubt"), (4, "broke")]) == (None, 2)  # nothing held beyond doubt
    assert knee_interval([(2, None), (4, "broke")]) == (None, None)
    # A level in doubt above one that broke beyond doubt cannot be sustained: the lower one bounds it.
    assert knee_interval([(4, "held"), (8, "broke"), (6, "in doubt"), (10, "in doubt")]) == (4, 6)


def test_the_interval_in_words():
    def words(unit: str, **keys) -> str:
        return interval_words(Capacity(mode="users" if unit == "users" else "rate", unit=unit, max_sustainable=None,
                                       **keys))

    assert words("users", max_sustainable_interval=[139, 148]) == \
        " (95 % interval 139 to 148 users, from its levels' own requests)"
    assert words("users", max_sustainable_interval=[6, 6]) == \
        " (95 % interval 6 to 6 users, from its levels' own requests)"
    assert words("req/s", max_sustainable_interval=[None, 2.5]) == \
        " (95 % interval below 2.5 req/s, from its levels' own requests)"
    assert words("users") == ""
    assert words("users", max_sustainable_interval=[8, 9], rerun_interval=[6, 12]) == \
        " (95 % interval 8 to 9 users, from its levels' own requests; a second search, on an engine within 25% " \
        "of this one's probe, may hold 6 to 12 users)"


def test_a_second_search_on_another_start_of_the_engine_may_land_as_far_as_its_speed_moves():
    """make run's three searches of 2026-11-27 on fresh starts: 8 [8, 9], 7 [7, 8], 7 [7, 8] users. The
    first's own interval missed the others' knees; each rerun interval holds every knee."""
    from loadwatch.capacity.interval import rerun_interval

    runs = {8: (8.0, 9.0), 7: (7.0, 8.0)}
    for interval in runs.values():
        low, high = rerun_interval(interval, "users")
        assert low is not None and high is not None and all(low <= knee <= high for knee in (8, 7, 7))
    assert rerun_interval((8.0, 9.0), "users") == (6.0, 12.0)  # 8 / 1.25 = 6.4 down, 9 / 0.75 = 12 up
    assert rerun_interval((None, 2.5), "req/s") == (None, 3.33)
    assert rerun_interval((None, None), "users") == (None, None)


def test_the_throughput_plateau_and_an_slo_that_leaves_decode_free():
    from loadwatch.capacity.levels import Level
    from loadwatch.capacity.output import decode_unbounded, plateau

    # The tune guide's prefix scenario of 2026-11-27: flat from 32 users on, the knee at 145.
    served = {32: 29.8, 64: 27.5, 128: 29.0, 145: 24.5, 256: 8.3, 8: 9.0}
    levels = [Level(i, users, "users", f"level-{i}", results={"request_throughput": rate})
              for i, (users, rate) in enumerate(served.items())]
    assert plateau(levels) == {"level": 32, "request_throughput": 29.8, "most_request_throughput": 29.8}
    assert plateau(levels[:1]) is None
    def unbounded(*texts: str) -> bool:
        return decode_unbounded([parse_slo(text) for text in texts])

    assert unbounded("ttft_p90_ms=1000") and unbounded("ttft_p99_ms=500", "failure_ratio=0.01")
    assert not unbounded("ttft_p90_ms=1000", "tpot_p99_ms=50") and not unbounded()
