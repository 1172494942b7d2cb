"""The experiment's summary states how long its cells ran, not only what was asked."""

from loadwatch.experiment.summary import ran_for


def test_cells_that_ran_as_asked_say_so_and_stretched_ones_say_how_long_and_why():
    assert ran_for([], 4.0) == "4 s"
    assert ran_for([4.1, 4.3], 4.0) == "4 s"
    # Against a server that takes 12.5 s a request, 4 s cells rightly ran 207 s each: the summary
    # once said "2 runs each of 4 s".
    assert ran_for([207.2, 206.9], 4.0) == "207 s (asked 4 s: stretched until each completed enough requests to judge)"
    assert ran_for([30.0, 207.0], 4.0).startswith("30 to 207 s (asked 4 s")
