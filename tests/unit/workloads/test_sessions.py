"""Sessions grow with the model's answers; tool calls get results; turns are counted and bounded."""

import pytest

from loadwatch.settings import LoadSettings
from loadwatch.workloads.datasets import SAMPLES, build, tools, validate
from loadwatch.workloads.errors import DatasetError
from loadwatch.workloads.sessions import MAX_TOOL_ROUNDS, STATIC_STAMP, Script, Session, Sessions
from loadwatch.workloads.tokens import ApproximateTokenizer

TOKENS = ApproximateTokenizer()
CALL = {"role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}


def answer(text):
    return {"role": "assistant", "content": text}


def test_each_turn_sends_the_history_with_the_models_own_answers():
    session = Session(Script("sys", ["one", "two", "three"]), "", None, lambda: STATIC_STAMP, "result")
    first = session.next()
    assert first.turn == 1
    assert [m["role"] for m in first.messages] == ["system", "user"]
    assert first.messages[0]["content"] == f"{STATIC_STAMP} sys"
    session.answered(answer("real answer 1"))
    second = session.next()
    assert second.turn == 2
    assert [m.get("content") for m in second.messages[1:]] == ["one", "real answer 1", "two"]
    # The earlier turn is a prefix of the later one, message by message: what prefix caching finds.
    assert second.messages[:2] == first.messages
    session.answered(answer("a2"))
    assert session.next().turn == 3
    session.answered(answer("a3"))
    assert session.next() is None  # its user has nothing more to say


def test_a_tool_call_is_answered_with_its_result_then_the_user_goes_on():
    session = Session(Script(None, ["one", "two"]), "", None, lambda: STATIC_STAMP, "42 degrees")
    session.next()
    session.answered(CALL)
    after_call = session.next()
    assert after_call.messages[-2:] == (CALL, {"role": "tool", "tool_call_id": "c1", "content": "42 degrees"})
    session.answered(answer("it is warm"))
    assert session.next().messages[-1] == {"role": "user", "content": "two"}


def test_a_model_that_only_calls_tools_still_moves_on_and_ends():
    session = Session(Script(None, ["one", "two"]), "", None, lambda: STATIC_STAMP, "r")
    turns = 0
    while (prompt := session.next()) is not None:
        turns += 1
        session.answered(CALL)
        assert turns < 20
    # Each user turn gets MAX_TOOL_ROUNDS rounds of results; the last one's calls get none.
    assert turns == 2 * (MAX_TOOL_ROUNDS + 1)
    assert prompt is None


def test_a_failed_turn_ends_the_session_and_turns_are_capped():
    session = Session(Script(None, ["one", "two"]), "", None, lambda: STATIC_STAMP, "r")
    session.next()
    session.answered(None)
    assert session.next() is None
    capped = Session(Script(None, ["a", "b", "c"]), "", 2, lambda: STATIC_STAMP, "r")
    capped.next()
    capped.answered(answer("x"))
    capped.next()
    capped.answered(answer("y"))
    assert capped.next() is None


def test_a_dynamic_stamp_changes_every_request_and_a_static_one_never():
    for static, differ in ((True, False), (False, True)):
        sessions = Sessions([Script("sys", ["a", "b"])], None, static, "r", [], label=False)
        session = sessions.start()
        first = session.next().messages[0]["content"]
        session.answered(answer("x"))
        second = session.next().messages[0]["content"]
        assert (first != second) is differ


def test_generated_sessions_share_the_system_prompt_and_tools_only():
    workload = build(LoadSettings(dataset="sessions", turns=3, system_len=40, turn_len=8, max_tokens=16), TOKENS)
    a, b = workload.start().next(), workload.start().next()
    assert a.messages[0] == b.messages[0] and a.messages[0]["role"] == "system"
    assert a.messages[1] != b.messages[1]  # each session says who it is first
    assert [t["function"]["name"] for t in a.body["tools"]] == ["query_metrics", "read_log"]
    assert workload.prompts[0].messages[-1]["role"] == "user"  # the longest: three turns, two answers
    assert sum(m["role"] == "assistant" for m in workload.prompts[0].messages) == 2
    assert build(LoadSettings(dataset="sessions", tools="none"), TOKENS).start().next().body is None


def test_sessions_from_a_jsonl_file_and_from_sharegpt(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"system": "be brief", "turns": ["hi", "bye"], "max_tokens": 7, "top_k": 3}\n')
    session = build(LoadSettings(dataset="sessions", dataset_path=path, tools="none"), TOKENS).start()
    prompt = session.next()
    assert prompt.messages[1] == {"role": "user", "content": "hi"} and prompt.max_tokens == 7
    assert prompt.body == {"top_k": 3}
    agent = build(LoadSettings(dataset="sessions", dataset_path=SAMPLES / "agent-conversation.json"), TOKENS)
    first = agent.start().next()
    assert first.messages[0]["content"].startswith(f"{STATIC_STAMP} Step 1:")


def test_the_processes_of_a_run_start_at_their_own_part_of_a_files_conversations(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(f'{{"turns": ["conversation {n}"]}}\n' for n in range(4)))
    settings = LoadSettings(dataset="sessions", dataset_path=path, tools="none")

    def firsts(sessions, n):  # the first message begins with the date-time stamp; its number ends it
        return [int(sessions.start().next().messages[-1]["content"].rsplit(" ", 1)[1]) for _ in range(n)]

    alone = firsts(build(settings, TOKENS), 4)  # in the order of the seed
    parts = []
    for part in range(2):
        sessions = build(settings, TOKENS)
        sessions.share(part, 2)
        parts.append(firsts(sessions, 3))
    assert parts == [alone[:3], alone[2:] + alone[:1]]


@pytest.mark.parametrize(("options", "why"), [
    ({"endpoint": "completions"}, "need --endpoint chat or responses"),
    ({"request_rate": 2.0}, "closed loops"),
    ({"endpoint": "responses", "tools": str(SAMPLES / "tools.json")}, "--tools needs --endpoint chat"),
])
def test_sessions_refuse_what_they_cannot_be(options, why):
    with pytest.raises(DatasetError, match=why):
        validate(LoadSettings(dataset="sessions", **options))


def test_sessions_over_the_responses_api_offer_no_sample_tools():
    assert tools(LoadSettings(dataset="sessions"))
    assert tools(LoadSettings(dataset="sessions", endpoint="responses")) is None
    validate(LoadSettings(dataset="sessions", endpoint="responses"))


def test_a_split_of_models_is_read_and_checked():
    assert LoadSettings(model="a=0.7,b=0.3").models() == [("a", 0.7), ("b", 0.3)]
    assert LoadSettings(model="plain").models() == []
    for bad in ("a=0.7,b", "a=0,b=1", "a=1,a=2", "=1"):
        with pytest.raises(ValueError):
            LoadSettings(model=bad)
