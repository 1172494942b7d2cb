import pytest

from loadwatch.loadgen.sending.schedule import plan, stage_at


def levels(stages):
    return [(s.name, s.level) for s in stages]


def test_step_climbs_by_step_size_and_ends_at_the_peak():
    assert levels(plan("step", 10, 30, step_size=4)) == [("step-1", 4), ("step-2", 8), ("step-3", 10)]


def test_step_defaults_to_four_steps():
    assert levels(plan("step", 8, 30)) == [("step-1", 2), ("step-2", 4), ("step-3", 6), ("step-4", 8)]


def test_ramp_climbs_linearly_then_holds():
    stages = plan("ramp", 10, 20)
    assert stage_at(stages, 0)[1] == 0
    assert stage_at(stages, 5) == (stages[0], 2.5)
    assert stage_at(stages, 25) == (stages[1], 10)
    assert stage_at(stages, 40) is None


def test_spike_returns_to_its_base():
    assert levels(plan("spike", 12, 10, spike_base=3)) == [("baseline", 3), ("spike", 12), ("recovery", 3)]


def test_sweep_runs_each_level_for_a_stage_in_order():
    stages = plan("sweep", 0, 5, sweep=[1, 2, 4])
    assert [stage_at(stages, t)[0].name for t in (0, 4.99, 5, 14.9)] == ["sweep-1", "sweep-1", "sweep-2", "sweep-3"]
    assert stage_at(stages, 15) is None


@pytest.mark.parametrize(("args", "message"), [
    (("sweep", 4, 10), "needs --sweep"),
    (("spike", 4, 10, None, 4), "--spike-base must be"),
    (("step", 4, 0), "--stage-duration"),
    (("sweep", 4, 10, None, None, [2, 0]), "above 0"),
])
def test_impossible_shapes_say_which_option_is_wrong(args, message):
    with pytest.raises(ValueError, match=message):
        plan(*args)
