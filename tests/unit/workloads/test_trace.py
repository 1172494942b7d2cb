"""Mooncake traces: read and checked by line, equal hash ids made equal prompt blocks, entries due
at their own times."""

import pytest

from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import build, validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.tokens import ApproximateTokenizer
from loadwatch.workloads.trace_formats import read_trace


def write(tmp_path, *lines):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_equal_hash_ids_are_equal_blocks_and_entries_are_due_at_their_times(tmp_path):
    path = write(tmp_path,
                 '{"timestamp": 1000, "input_length": 20, "output_length": 5, "hash_ids": [1, 2, 3]}',
                 '{"timestamp": 0, "input_length": 16, "output_length": 7, "hash_ids": [1, 2]}',
                 '{"timestamp": 3000, "input_length": 5, "output_length": 2, "hash_ids": [9]}')
    settings = LoadSettings(dataset="trace", dataset_path=path, trace_block_tokens=8)
    trace = build(settings, ApproximateTokenizer())
    first, second, third = (trace.prompt(i) for i in range(3))  # in time order
    assert (first.max_tokens, second.max_tokens) == (7, 5)
    # Blocks 1 and 2 (8 tokens each) open both prompts; the second adds 4 tokens of block 3.
    assert second.text.startswith(first.text + " ")
    assert ApproximateTokenizer().count(first.text) == pytest.approx(16, abs=2)
    assert ApproximateTokenizer().count(third.text) == pytest.approx(5, abs=1)
    assert [trace.due(i, 2.0) for i in range(3)] == [0.0, 0.5, 1.5]
    assert validate(settings).num_requests == 3
    assert validate(settings.model_copy(update={"num_requests": 2})).num_requests == 2


@pytest.mark.parametrize(("line", "why"), [
    ('{"timestamp": -1, "input_length": 5, "output_length": 2}', "timestamp must be a number"),
    ('{"timestamp": 0, "input_length": 0, "output_length": 2}', "input_length must be an integer of at least 1"),
    ('{"timestamp": 0, "input_length": 5, "output_length": 2, "hash_ids": ["a"]}', "hash_ids must be a list"),
])
def test_a_bad_trace_line_is_named(tmp_path, line, why):
    path = write(tmp_path, '{"timestamp": 0, "input_length": 5, "output_length": 2}', line)
    with pytest.raises(DatasetError, match=f"trace.jsonl line 2: {why}"):
        read_trace(path)


def test_a_trace_keeps_its_own_pace_and_counts(tmp_path):
    with pytest.raises(DatasetError, match="--request-rate, --warmup-requests cannot go with it"):
        validate(LoadSettings(dataset="trace", request_rate=2.0, warmup_requests=3))
    validate(LoadSettings(dataset="trace"))  # the shipped sample
