import json

import pytest

from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import build, validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.sessions import STATIC_STAMP
from loadwatch.workloads.tokens import ApproximateTokenizer

TOKENS = ApproximateTokenizer()


def take(workload, n):
    return [workload() for _ in range(n)]


def test_jsonl_prompts_and_messages(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "hi", "max_tokens": 5}\n\n{"messages": [{"role": "user", "content": "yo"}]}\n')
    prompts = take(build(LoadSettings(dataset="jsonl", dataset_path=path), None), 2)
    assert {p.text for p in prompts} == {"hi", "yo"}
    assert {p.max_tokens for p in prompts} == {5, None}


@pytest.mark.parametrize(("line", "why"), [
    ("{not json", "not JSON"),
    ('{"prompt": ""}', "non-empty `prompt`"),
    ('{"prompt": "x", "max_tokens": 0}', "positive integer"),
    ('{"messages": [{"role": "robot", "content": "x"}]}', "role"),
])
def test_a_malformed_jsonl_line_is_named_by_number(tmp_path, line, why):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(DatasetError, match=f"bad.jsonl line 2: .*{why}"):
        validate(LoadSettings(dataset="jsonl", dataset_path=path))


def test_sharegpt_sample_is_deterministic_for_a_seed_and_filtered_like_vllm_bench(tmp_path):
    a = take(build(LoadSettings(dataset="sharegpt", seed=7, dataset_size=20), TOKENS), 20)
    b = take(build(LoadSettings(dataset="sharegpt", seed=7, dataset_size=20), TOKENS), 20)
    c = take(build(LoadSettings(dataset="sharegpt", seed=8, dataset_size=20), TOKENS), 20)
    assert a == b and a != c
    assert all(p.max_tokens >= 4 for p in a)
    short = tmp_path / "short.json"
    short.write_text(json.dumps([
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "a fine long answer indeed"}]},
        {"conversations": [{"from": "human", "value": "a question long enough to keep"},
                           {"from": "gpt", "value": "and an answer long enough too"}]},
        {"conversations": [{"from": "human", "value": "one turn only"}]},
    ]))
    prompts = take(build(LoadSettings(dataset="sharegpt", dataset_path=short), TOKENS), 3)
    assert {p.text for p in prompts} == {"a question long enough to keep"}
    fixed = build(LoadSettings(dataset="sharegpt", dataset_path=short, sharegpt_output_len=9), TOKENS)()
    assert fixed.max_tokens == 9


def test_agent_static_prefixes_are_identical_and_dynamic_ones_differ():
    static = take(build(LoadSettings(dataset="agent", agent_prefix="static", output_len=16), None), 3)
    dynamic = take(build(LoadSettings(dataset="agent", agent_prefix="dynamic"), None), 3)
    assert static[0] == static[1] == static[2]
    first = static[0].messages[0]["content"]
    assert first.startswith(STATIC_STAMP + " Step 1:")
    assert len(static[0].messages) == 15 and static[0].messages[-1]["role"] == "user"
    assert static[0].max_tokens == 16
    stamps = [p.messages[0]["content"][:19] for p in dynamic]
    assert len(set(stamps)) == 3
    # Everything after the stamp is the same conversation.
    assert {p.messages[0]["content"][19:] for p in dynamic} == {first[19:]}
    assert dynamic[0].messages[1:] == static[0].messages[1:]


def test_prefix_repetition_shares_n_prefixes():
    prompts = take(build(LoadSettings(dataset="prefix-repetition", num_prefixes=3, prefix_len=20, suffix_len=10,
                                      dataset_size=30), TOKENS), 30)
    prefixes = {p.text[: 20 * ApproximateTokenizer.CHARS_PER_TOKEN] for p in prompts}
    assert len(prefixes) == 3
    assert len({p.text for p in prompts}) == 30


def test_random_lengths_stay_within_the_range():
    prompts = take(build(LoadSettings(dataset="random", input_len=50, output_len=20, range_ratio=0.2,
                                      dataset_size=40), TOKENS), 40)
    assert all(40 <= TOKENS.count(p.text) <= 60 for p in prompts)
    assert all(16 <= p.max_tokens <= 24 for p in prompts)


@pytest.mark.parametrize("dataset", ["random", "prefix-repetition"])
def test_the_processes_of_a_run_send_each_prompt_once_before_any_again(dataset):
    """Each process builds the same prompts from the same seed; from its own part of them, three
    processes sending a third each send every prompt once, and then start over as one would."""
    settings = LoadSettings(dataset=dataset, input_len=8, prefix_len=8, suffix_len=8, dataset_size=30)
    parts = []
    for part in range(3):
        workload = build(settings, TOKENS)
        workload.share(part, 3)
        parts.append([p.text for p in take(workload, 11)])
    alone = [p.text for p in take(build(settings, TOKENS), 30)]
    assert sorted(text for sent in parts for text in sent[:10]) == sorted(alone)
    assert [sent[10] for sent in parts] == [alone[10], alone[20], alone[0]]


def test_a_jsonl_line_carries_its_own_request_fields(tmp_path):
    path = tmp_path / "p.jsonl"
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    path.write_text(json.dumps({"prompt": "hi", "tools": tools, "response_format": {"type": "json_object"},
                                "top_k": 5}) + "\n" + '{"prompt": "plain"}\n')
    prompts = {p.text: p for p in take(build(LoadSettings(dataset="jsonl", dataset_path=path), None), 2)}
    assert prompts["hi"].body == {"tools": tools, "response_format": {"type": "json_object"}, "top_k": 5}
    assert prompts["plain"].body is None


@pytest.mark.parametrize(("line", "why"), [
    ('{"prompt": "x", "stream": false}', "stream is set by loadwatch"),
    ('{"prompt": "x", "tools": [{"type": "function"}]}', "tools must be a list of OpenAI tool definitions"),
])
def test_a_jsonl_line_may_not_take_what_loadwatch_sets(tmp_path, line, why):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(DatasetError, match=f"bad.jsonl line 1: {why}"):
        validate(LoadSettings(dataset="jsonl", dataset_path=path))


def test_tools_from_a_file_go_with_every_prompt_and_a_line_keeps_its_own(tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text('[{"type": "function", "function": {"name": "g"}}]')
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n{"prompt": "b", "tools": [{"type": "function", "function": {"name": "h"}}]}\n')
    prompts = {p.text: p for p in take(build(LoadSettings(dataset="jsonl", dataset_path=path, tools=str(tools)),
                                             None), 2)}
    assert prompts["a"].body["tools"][0]["function"]["name"] == "g"
    assert prompts["b"].body["tools"][0]["function"]["name"] == "h"
    tools.write_text("{broken")
    with pytest.raises(DatasetError, match="tools.json line 1: not JSON"):
        validate(LoadSettings(tools=str(tools)))


def test_a_dataset_is_one_class_and_every_dataset_is_an_option_with_its_help():
    from loadwatch.locust_options import argument
    from loadwatch.workloads.datasets import DATASETS, Dataset
    from loadwatch.workloads.prompt import Cycle, Prompt

    class Echo(Dataset):
        name, summary = "echo-test", "one prompt, again and again"

        def make(self, settings, tokenizer, rng, offered):
            return Cycle([Prompt.user_text("echo", settings.max_tokens)])

    try:
        _, kwargs = argument("dataset", LoadSettings.model_fields["dataset"])
        assert kwargs["choices"] == list(DATASETS) and "echo-test" in kwargs["choices"]
        assert "echo-test, one prompt, again and again" in kwargs["help"]
        assert "trace, a timestamped trace (Mooncake, Azure, WEKA or OpenTelemetry)" in kwargs["help"]
        assert build(validate(LoadSettings(dataset="echo-test", max_tokens=3)), None)().text == "echo"
    finally:
        del DATASETS["echo-test"]


def test_an_unknown_dataset_is_refused_with_the_choices():
    with pytest.raises(DatasetError, match="'nope' is none of builtin, sharegpt, random, random-mm, prefix-repetition"):
        validate(LoadSettings(dataset="nope"))


def test_a_dataset_without_a_sample_needs_a_path():
    from loadwatch.workloads.datasets import DATASETS

    with pytest.raises(DatasetError, match="the random dataset needs --dataset-path"):
        DATASETS["random"].path(LoadSettings(dataset="random"))
