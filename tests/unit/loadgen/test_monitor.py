

from loadwatch.loadgen.monitor import CPU_LIMIT, LAG_LIMIT, LATE_ARRIVALS, verdict


def test_a_process_is_saturated_by_a_late_loop_a_spent_core_or_late_arrivals():
    assert verdict([0.001] * 50, 0.3, 0) is None
    assert verdict([0.001] * 45 + [LAG_LIMIT * 2] * 5, 0.3, 0) is None  # a pause or two is not saturation
    assert verdict([0.001] * 30 + [0.04] * 20, 0.8, 0) == "its event loop ran late (40 ms at worst)"
    assert "other processes on the machine took the CPU" in verdict([0.001] * 30 + [0.04] * 20, 0.1, 0)
    assert "95% of a CPU core" in verdict([0.001] * 50, max(CPU_LIMIT + 0.01, 0.95), 0)
    assert "open-loop arrivals" in verdict([0.001] * 50, 0.3, LATE_ARRIVALS)
