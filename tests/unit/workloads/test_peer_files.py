"""Prompt files as GuideLLM and AIPerf write them (issue 41), on our own samples of their documented
formats: known from the file, their token counts as max_tokens and never as body fields, and a bad
line named."""

from __future__ import annotations

import json

import pytest

from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.files import read_sharegpt
from loadwatch.workloads.peer_files import detect, read_aiperf_sessions, read_prompts


def write(tmp_path, name: str, *lines: object) -> object:
    path = tmp_path / name
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def test_guidellms_jsonl_sends_its_prompt_with_its_output_count_as_max_tokens_and_nothing_else(tmp_path):
    path = write(tmp_path, "g.jsonl", {"prompt": "Hello, how are you?", "output_tokens_count": 5, "extra": "foo"},
                 {"prompt": "What is your name?", "output_tokens_count": 3, "prompt_tokens_count": 6})
    prompts, how = read_prompts(path)
    assert detect(path) == "guidellm" and "GuideLLM's" in how and "2 prompts" in how
    assert [(p.messages[0]["content"], p.max_tokens, p.body) for p in prompts] == [
        ("Hello, how are you?", 5, None), ("What is your name?", 3, None)]


def test_guidellms_csv_is_read_by_its_header(tmp_path):
    path = write(tmp_path, "g.csv", "prompt,output_tokens_count,additional_column", "Hello there,5,foo",
                 '"A, quoted prompt",,bar')
    prompts, _ = read_prompts(path)
    assert [(p.messages[0]["content"], p.max_tokens) for p in prompts] == [("Hello there", 5),
                                                                           ("A, quoted prompt", None)]
    bad = write(tmp_path, "b.csv", "prompt,output_tokens_count", "Hi,five")
    with pytest.raises(DatasetError, match="b.csv row 2: output_tokens_count must be a whole number of tokens"):
        read_prompts(bad)


def test_aiperfs_single_and_multi_turn_files(tmp_path):
    single = write(tmp_path, "s.jsonl", {"text": "What is deep learning?"},
                   {"texts": ["Who are you?", "Hello world"]},
                   {"texts": [{"name": "query", "contents": ["What is AI?"]}], "delay": 1234})
    prompts, how = read_prompts(single)
    assert detect(single) == "aiperf" and "AIPerf's single_turn" in how
    assert [p.messages[0]["content"] for p in prompts] == ["What is deep learning?", "Who are you?\nHello world",
                                                           "What is AI?"]
    multi = write(tmp_path, "m.jsonl", {"session_id": "a", "turns": [{"text": "Hello", "delay": 0},
                                                                     {"text": "Hi there", "delay": 1000}]})
    assert [s["turns"] for s in read_aiperf_sessions(multi)] == [["Hello", "Hi there"]]
    with pytest.raises(DatasetError, match="m.jsonl line 1: an AIPerf multi_turn session: replay it with --dataset "
                                           "sessions"):
        read_prompts(multi)
    with pytest.raises(DatasetError, match="line 1: expected `text` or `texts`"):
        read_prompts(write(tmp_path, "x.jsonl", {"text": ""}), "aiperf")


def test_our_own_lines_and_vllms_custom_stay_as_they_were(tmp_path):
    path = write(tmp_path, "c.jsonl", {"prompt": "Summarise this.", "top_k": 20})
    prompts, how = read_prompts(path)
    assert detect(path) == "loadwatch" and prompts[0].body == {"top_k": 20}
    # Named as GuideLLM's, the same line sends no body field.
    assert read_prompts(path, "guidellm")[0][0].body is None


def test_sharegpt_of_first_turns_only_serves_with_an_output_length(tmp_path):
    path = tmp_path / "first.json"
    path.write_text(json.dumps([{"id": "1", "conversations": [{"from": "human", "value": "Tell me a story."}]}]))
    with pytest.raises(DatasetError, match="with --sharegpt-output-len N its first human turns are sent"):
        read_sharegpt(path)
    assert read_sharegpt(path, 1) == [[{"role": "user", "content": "Tell me a story."}]]
    validate(LoadSettings(dataset="sharegpt", dataset_path=path, sharegpt_output_len=64))
