from pathlib import Path

import pytest

from loadwatch.client.chunks import parse_chunk
from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.sse import SSEDecoder

SAMPLE = (Path(__file__).parents[1] / "data" / "vllm-0.32-chat-stream-sse.txt").read_bytes()


def decode_all(data: bytes, split: int) -> list[str]:
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(data), split):
        events += decoder.feed(data[i:i + split])
    return events + decoder.close()


@pytest.mark.parametrize("split", [1, 2, 7, 64, 1000, len(SAMPLE)])
def test_real_vllm_stream_decodes_the_same_in_any_split(split):
    events = decode_all(SAMPLE, split)
    assert events[-1] == "[DONE]"
    chunks = [parse_chunk(e, "chat") for e in events[:-1]]
    # The role-only first chunk (content "") is not generated text.
    assert chunks[0].has_text is False
    assert sum(c.has_text for c in chunks) == 16
    assert chunks[-1].completion_tokens == 16 and chunks[-1].prompt_tokens == 19


def test_crlf_comments_and_multiline_data():
    data = b": keep-alive\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent: x\nid: 3\ndata: [DONE]\n\n"
    assert decode_all(data, 3) == ['{"a":\n1}', "[DONE]"]


def test_event_without_final_blank_line_is_kept_at_close():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.close() == ["[DONE]"]


def test_multibyte_text_split_inside_a_character():
    data = 'data: {"choices":[{"delta":{"content":"ü日本"}}]}\n\n'.encode()
    events = decode_all(data, 1)
    assert parse_chunk(events[0], "chat").has_text


@pytest.mark.parametrize(
    ("data", "has_text"),
    [
        ('{"choices":[{"delta":{"content":""}}]}', False),
        ('{"choices":[{"delta":{}}]}', False),
        ('{"choices":[{"delta":{"role":"assistant"}}]}', False),
        ('{"choices":[{"delta":{"reasoning_content":"hmm"}}]}', True),
        ('{"choices":[{"delta":{"content":null,"reasoning_content":"hmm"}}]}', True),
        ('{"choices":[{"delta":{"content":"hi"}}]}', True),
        ('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}', False),
        # An agent's model answers with tool calls: their arguments are output; naming the function is not yet.
        ('{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
         '"function":{"name":"get_weather","arguments":""}}]}}]}', False),
        ('{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\""}}]}}]}', True),
    ],
)
def test_what_counts_as_generated_text(data, has_text):
    assert parse_chunk(data, "chat").has_text is has_text


def test_completions_endpoint_reads_text():
    assert parse_chunk('{"choices":[{"text":"x"}]}', "completions").has_text
    assert not parse_chunk('{"choices":[{"text":""}]}', "completions").has_text


def test_usage_chunk():
    chunk = parse_chunk('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}', "chat")
    assert (chunk.prompt_tokens, chunk.completion_tokens) == (3, 5)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("{not json", Reason.MALFORMED_CHUNK),
        ("[1, 2]", Reason.MALFORMED_CHUNK),
        ('{"choices": "nope"}', Reason.MALFORMED_CHUNK),
        ('{"error": {"message": "engine died"}}', Reason.STREAM_ERROR),
    ],
)
def test_bad_chunks_fail_with_a_reason(data, reason):
    with pytest.raises(RequestFailed) as failed:
        parse_chunk(data, "chat")
    assert failed.value.reason == reason
