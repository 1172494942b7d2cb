"""Traces as others write them (issue 41), on our own small samples of each format: known by their
file, read into entries in time order, and a bad one named by its line, row or request and field."""

from __future__ import annotations

import json

import pytest

from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.tokens import ApproximateTokenizer
from loadwatch.workloads.trace import Trace
from loadwatch.workloads.trace_formats import read_trace

AZURE_2023 = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:46.6805900,374,44
"""
AZURE_2024 = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 00:00:00.009930+00:00,2162,5
2024-05-10 00:00:01.509930+00:00,123,18
"""
WEKA = {"id": "t", "block_size": 64, "hash_id_scope": "local", "requests": [
    {"t": 0.0, "type": "n", "in": 130, "out": 20, "hash_ids": [1, 2, 3]},
    {"t": 10.0, "type": "subagent", "requests": [
        {"t": 0.0, "type": "n", "in": 70, "out": 5, "hash_ids": [1, 2]},
        {"t": 4.0, "type": "s", "in": 90, "out": 6, "hash_ids": [1, 2, 3], "ttft": 0.5}]},
    {"t": 12.0, "type": "n", "in": 200, "out": 7, "hash_ids": [1, 2, 3, 4]}]}
OTEL_SPANS = {"trace_id": "t", "spans": [
    {"span_id": "b", "start_time": "2026-02-25T10:00:02.500000", "attributes": {
        "gen_ai.input.messages": json.dumps([{"role": "user", "content": "and then?"}]),
        "gen_ai.usage.prompt_tokens": 12, "gen_ai.usage.completion_tokens": 9}},
    {"span_id": "tool", "start_time": "2026-02-25T10:00:01", "attributes": {"gen_ai.operation.name": "execute_tool"}},
    {"span_id": "a", "start_time": "2026-02-25T10:00:00", "attributes": {
        "gen_ai.input.messages": json.dumps([{"role": "system", "content": "be brief"},
                                             {"role": "user", "parts": [{"type": "text", "content": "hi there"}]}]),
        "gen_ai.request.max_tokens": 50}}]}
OTLP = {"resourceSpans": [{"scopeSpans": [{"spans": [
    {"spanId": "x", "startTimeUnixNano": "1700000001000000000", "attributes": [
        {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps([{"role": "user", "content": "q"}])}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}}]}]}]}]}


def write(tmp_path, name: str, content: str | dict) -> object:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


@pytest.mark.parametrize(("content", "lengths", "gap_ms"), [
    (AZURE_2023, [(374, 44), (396, 109)], 4314.579),
    (AZURE_2024, [(2162, 5), (123, 18)], 1500.0),
])
def test_an_azure_trace_of_either_year_is_known_and_read_in_time_order(tmp_path, content, lengths, gap_ms):
    trace = read_trace(write(tmp_path, "azure.csv", content))
    assert trace.format == "azure" and [(e.input_length, e.output_length) for e in trace.entries] == lengths
    assert trace.entries[1].timestamp - trace.entries[0].timestamp == pytest.approx(gap_ms)
    assert trace.entries[0].where.startswith("row ")


def test_a_weka_trace_runs_its_subagents_from_their_start_in_a_hash_scope_of_their_own(tmp_path):
    trace = read_trace(write(tmp_path, "weka.json", WEKA))
    assert (trace.format, trace.block_tokens) == ("weka", 64)
    assert [(e.timestamp, e.input_length, e.where) for e in trace.entries] == [
        (0.0, 130, "request 1"), (10000.0, 70, "request 2 request 1"), (12000.0, 200, "request 3"),
        (14000.0, 90, "request 2 request 2")]
    parent, sub = trace.entries[0], trace.entries[1]
    assert parent.hash_ids == (1, 2, 3) and not set(sub.hash_ids) & set(parent.hash_ids)
    # Within the subagent, its requests share their blocks: the same ids, as in the file.
    assert trace.entries[3].hash_ids[:2] == sub.hash_ids
    built = Trace(trace, ApproximateTokenizer(), 512, seed=1)
    assert built.block_tokens == 64 and built.prompt(2).text.startswith(built.prompt(0).text[:100])


@pytest.mark.parametrize("content", [OTEL_SPANS, OTLP])
def test_otel_spans_are_requests_of_their_own_messages_at_their_start(tmp_path, content):
    trace = read_trace(write(tmp_path, "otel.json", content))
    assert trace.format == "otel"
    built = Trace(trace, ApproximateTokenizer(), 512, seed=1)
    if content is OTLP:
        assert [(e.output_length, e.messages) for e in trace.entries] == [(7, ({"role": "user", "content": "q"},))]
        return
    first, second = trace.entries  # the tool's span is no model request
    assert first.messages == ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"})
    assert (first.output_length, second.input_length, second.output_length) == (50, 12, 9)
    assert second.timestamp - first.timestamp == 2500.0 and built.prompt(1).max_tokens == 9


def test_a_mooncake_trace_is_still_known_by_its_lines(tmp_path):
    path = write(tmp_path, "t.jsonl", '{"timestamp": 5, "input_length": 3, "output_length": 2, "hash_ids": [1]}\n')
    assert read_trace(path).format == "mooncake" and read_trace(path, "mooncake").entries[0].where == "line 1"


@pytest.mark.parametrize(("name", "content", "fmt", "why"), [
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,x\n", "auto",
     "a.csv row 2: GeneratedTokens must be an integer, not 'x'"),
    ("a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,374,4\n", "auto", "a.csv row 2: TIMESTAMP must be"),
    ("a.csv", "TIMESTAMP,Tokens\n1,2\n", "azure", "a.csv row 1: the header lacks ContextTokens, GeneratedTokens"),
    ("w.json", {"block_size": 64, "requests": [{"t": 0, "in": 5, "out": 1}, {"t": -1, "in": 5, "out": 1}]}, "auto",
     "w.json request 2: t must be a number of seconds"),
    ("w.json", {"block_size": 64, "requests": [{"t": 0, "type": "subagent", "requests": [{"t": 1, "in": 0}]}]},
     "auto", "w.json request 1 request 1: in must be an integer of at least 1"),
    ("o.json", {"spans": [{"span_id": "s", "attributes": {"gen_ai.input.messages": "[{\"role\": \"user\"}]"}}]},
     "auto", "o.json span 1 \\(s\\): gen_ai.input.messages: each message needs a role and text content"),
    ("o.json", {"spans": [{"attributes": {}}]}, "otel", "no span carries gen_ai.input.messages"),
    ("x.txt", "hello\n", "auto", "not a trace loadwatch knows \\(--trace-format: mooncake"),
    ("m.json", "{\"requests\": [", "weka", "m.json line 1: not JSON"),
])
def test_a_trace_it_cannot_read_is_refused_naming_where_and_which_field(tmp_path, name, content, fmt, why):
    with pytest.raises(DatasetError, match=why):
        read_trace(write(tmp_path, name, content), fmt)
