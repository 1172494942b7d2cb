import pytest

from loadwatch.capacity.command import MIN_REQUESTS, needed_requests
from loadwatch.capacity.diagnose import Diagnosis
from loadwatch.capacity.levels import Level, lost
from loadwatch.capacity.output import conclusion, markdown
from loadwatch.capacity.search import Search
from loadwatch.metrics.slo import parse_slo


def knee_of(capacity: float, search: Search) -> tuple[float | None, list[float]]:
    tried = []
    while (level := search.next()) is not None:
        tried.append(level)
        search.record(level, level <= capacity)
    return search.best, tried


def test_the_ramp_doubles_then_bisection_stops_within_the_precision():
    best, tried = knee_of(27.0, Search(1.0, integer=False, precision=0.1))
    assert tried[:6] == [1, 2, 4, 8, 16, 32]
    broken = min(t for t in tried if t > 27.0)
    assert best <= 27.0 and broken / best - 1 <= 0.1
    assert len(tried) <= 10


def test_users_bisect_to_one_user():
    best, tried = knee_of(11, Search(2, integer=True))
    assert best == 11 and 12 in tried and all(t == int(t) for t in tried)


def test_a_first_level_that_breaks_searches_down_and_may_find_nothing():
    best, tried = knee_of(0.3, Search(1.0, integer=False))
    assert tried[:3] == [1.0, 0.5, 0.25] and 0.25 <= best <= 0.3
    assert knee_of(0.01, Search(1.0, integer=False))[0] is None


def test_a_level_is_lost_when_an_slo_is_far_over_or_the_generator_saturates():
    slo = [{"name": "ttft_p99_ms", "limit": 500.0, "measured": 1200.0, "passed": False}]
    assert "over 2 times its limit" in lost({"completed": 30, "failed": 0, "slo": slo})
    assert lost({"completed": 5, "failed": 0, "slo": slo}) is None  # too few requests to say
    assert lost({"completed": 30, "slo": [{**slo[0], "measured": 900.0}]}) is None
    assert "saturated" in lost({"saturated": {"local": "its event loop ran late"}})


@pytest.mark.parametrize(("slos", "needed"), [
    ([], MIN_REQUESTS), (["ttft_median_ms=500"], MIN_REQUESTS), (["ttft_p90_ms=200"], 50),
    (["ttft_p90_ms=200", "e2el_p99_ms=9000", "failure_ratio=0.01"], 500), (["tpot_mean_ms=50"], MIN_REQUESTS)])
def test_a_level_needs_five_requests_beyond_its_tightest_percentile(slos, needed):
    assert needed_requests([parse_slo(text) for text in slos]) == needed


def test_a_search_that_could_not_judge_a_level_says_so_instead_of_a_knee():
    held = Level(1, 2.0, "users", "level-01", results={"completed": 40, "slo": []})
    unjudged = Level(2, 4.0, "users", "level-02", results={"completed": 3, "slo": []},
                     problem="too few requests to judge: 3 of the 20 needed completed in 8 s")
    result = conclusion("users", "users", [held, unjudged], 2.0, Diagnosis("slo_only", {}), 0.8,
                        "the rule", undecided="level-02 (4 users) could not be judged: too few requests")
    text = markdown(result)
    assert result.undecided and "The knee was not located" in text and "2 users held" in text
    assert "is the most this server sustained" not in text and "too few requests to judge: 3 of the 20" in text



def test_a_rate_search_starts_where_its_first_level_can_complete_what_a_percentile_needs():
    from loadwatch.capacity.command import first_level
    from loadwatch.capacity.options import CapacityOptions
    p99 = needed_requests([parse_slo("ttft_p99_ms=600")])
    assert p99 == 500
    assert first_level(CapacityOptions(level_duration=15), p99) == 5.21  # 1.25 x 500 / (8 x 15 s)
    assert first_level(CapacityOptions(level_duration=15), needed_requests([parse_slo("ttft_p90_ms=600")])) == 1.0
    assert first_level(CapacityOptions(level_duration=15, start=0.5), p99) == 0.5  # the user's own
    assert first_level(CapacityOptions(mode="users"), p99) == 2.0


def test_levels_too_short_to_judge_send_the_search_higher_and_never_count_as_held():
    search = Search(1.0, integer=False, precision=0.1)
    assert search.next() == 1.0
    search.too_few(1.0)  # under its SLOs on what it completed
    assert search.next() == 2.0
    search.record(2.0, True)
    search.record(4.0, False)
    assert search.best == 2.0 and search.next() == 2.83
    short = Search(1.0, integer=False, precision=0.1)
    short.too_few(1.0)
    short.record(2.0, False)  # broke right above a level that could not be judged
    assert short.best is None and short.next() == 1.41  # bisected above the floor, never below it
    short.record(1.41, False)
    short.too_few(1.1)
    assert short.next() == 1.25
    short.record(1.25, False)
    assert short.next() == 1.17
    short.too_few(1.17)
    assert short.next() is None and short.best is None  # within the precision: undecided, not held


def test_the_cost_per_token_is_quoted_at_the_held_level_nearest_the_operating_point():
    def level(i: int, rate: float, cost: float, passed: bool = True) -> Level:
        slo = [{"name": "ttft_p99_ms", "limit": 500.0, "measured": 100.0 if passed else 900.0, "passed": passed}]
        return Level(i, rate, "req/s", f"level-0{i}", results={
            "completed": 400, "slo": slo, "price_per_hour": 4.0, "cost_per_million_output_tokens": cost,
            "cost_per_million_total_tokens": cost / 10})
    levels = [level(1, 2.0, 9.0), level(2, 4.0, 5.0), level(3, 8.0, 3.0), level(4, 16.0, 2.5, passed=False)]
    result = conclusion("rate", "req/s", levels, 8.0, Diagnosis("slo_only", {}), 0.8, "the rule")
    assert result.recommended == 6.4 and result.cost_level == 4.0
    assert (result.cost_per_million_output_tokens, result.cost_per_million_output_tokens_at_max) == (5.0, 3.0)
    assert "At $4 an hour: **$5 per 1M output tokens** ($0.5 per 1M total tokens) at 4 req/s" in markdown(result)
    unpriced = conclusion("rate", "req/s", levels[:1], 2.0, Diagnosis("slo_only", {}), 0.8, "the rule")
    assert "an hour" not in markdown(unpriced)


def test_a_price_an_hour_over_tokens_a_second_is_dollars_per_million_tokens():
    from loadwatch.metrics.cost import per_million_tokens
    assert per_million_tokens(3.6, 1000.0) == pytest.approx(1.0)
    assert per_million_tokens(None, 1000.0) is None and per_million_tokens(3.6, 0.0) is None
