import pytest

from loadwatch.metrics.timing import RawTiming, request_metrics


def test_ttft_itl_e2e_tpot_follow_the_design():
    m = request_metrics(RawTiming(t0=10.0, content_arrivals=(10.5, 10.6, 10.8, 11.1),
                                  prompt_tokens=7, completion_tokens=4))
    assert m.ttft == pytest.approx(0.5)
    assert m.itl == pytest.approx((0.1, 0.2, 0.3))
    assert m.e2e == pytest.approx(1.1)
    assert m.tpot == pytest.approx((1.1 - 0.5) / 3)


def test_tpot_uses_usage_tokens_not_the_chunk_count():
    # Two chunks carried eight tokens between them (e.g. speculative decoding batches them).
    m = request_metrics(RawTiming(0.0, (1.0, 2.0), None, 8))
    assert m.tpot == pytest.approx(1.0 / 7)
    assert m.itl == pytest.approx((1.0,))


@pytest.mark.parametrize("tokens", [1, None])
def test_no_tpot_for_one_token_or_unknown_count(tokens):
    m = request_metrics(RawTiming(0.0, (0.25,), None, tokens))
    assert m.tpot is None
    assert m.ttft == m.e2e == 0.25
    assert m.itl == ()


def test_no_text_is_not_a_latency():
    with pytest.raises(ValueError):
        request_metrics(RawTiming(0.0, (), 3, 0))
