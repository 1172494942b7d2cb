"""Each endpoint's request body from one prompt: its own field names for the input and the output limit."""

from __future__ import annotations

from loadwatch.loadgen.sending.user import build_payload
from loadwatch.settings import LoadSettings
from loadwatch.workloads.prompt import Prompt

PROMPT = Prompt(({"role": "system", "content": "Be terse."}, {"role": "user", "content": "Capital of France?"}))


def test_chat_and_completions_ask_for_the_usage_in_the_stream():
    chat = build_payload(LoadSettings(max_tokens=16), "m", PROMPT)
    assert chat == {"model": "m", "messages": list(PROMPT.messages), "max_tokens": 16, "stream": True,
                    "stream_options": {"include_usage": True}}
    completions = build_payload(LoadSettings(endpoint="completions", max_tokens=16), None, PROMPT)
    assert completions["prompt"] == "Be terse.\nCapital of France?" and "messages" not in completions


def test_responses_take_the_conversation_as_input_and_max_output_tokens():
    body = build_payload(LoadSettings(endpoint="responses", max_tokens=16, ignore_eos=True, temperature=0.0), "m",
                         PROMPT)
    assert body == {"model": "m", "input": list(PROMPT.messages), "max_output_tokens": 16, "stream": True,
                    "ignore_eos": True, "temperature": 0.0}
