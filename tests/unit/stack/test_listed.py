"""The replicas of a fleet of the user's own, as its router lists them: named by their answers where
--replica gives patterns, else a, b, ... with a replica already known keeping its name across a scaling
and a new one taking a name no replica had (its series are not an earlier replica's)."""

from __future__ import annotations

import pytest

from loadwatch.fleet.options import FleetOptions
from loadwatch.fleet.routers import RouterError, VllmRouter
from loadwatch.stack import stack


def listed(monkeypatch, urls, options, known=None, answers=None):
    monkeypatch.setattr(VllmRouter, "workers", lambda self, url: urls)  # the router as it would list them
    monkeypatch.setattr(stack, "answered_name", lambda url: (answers or {})[url])
    return stack._listed("http://router:8000", options.program, options.patterns, known)


def test_listed_replicas_keep_their_names_and_new_ones_take_a_new_one(monkeypatch):
    options = FleetOptions(router="vllm-router")
    assert listed(monkeypatch, ["http://x:1", "http://y:1"], options) == {"a": "http://x:1", "b": "http://y:1"}
    # x scaled away, z new: y stays b, z takes c
    assert listed(monkeypatch, ["http://y:1", "http://z:1"], options, {"a": "http://x:1", "b": "http://y:1"}) == \
        {"b": "http://y:1", "c": "http://z:1"}


def test_a_pattern_names_each_by_its_answer_and_refuses_one_it_does_not_match(monkeypatch):
    options = FleetOptions(replica=["vllm-*"])
    answers = {"http://x:1": "vllm-abc", "http://y:1": "vllm-def"}
    assert listed(monkeypatch, list(answers), options, answers=answers) == {"vllm-abc": "http://x:1",
                                                                            "vllm-def": "http://y:1"}
    with pytest.raises(RouterError, match="answers as 'vllm-0.32.0-abc', which --replica vllm-\\* does not name"):
        listed(monkeypatch, ["http://x:1"], options, answers={"http://x:1": "vllm-0.32.0-abc"})
    with pytest.raises(RouterError, match="lists no replica"):
        listed(monkeypatch, [], options)
