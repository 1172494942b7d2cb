from pathlib import Path

import pytest

from loadwatch.client.chunks import parse_chunk
from loadwatch.client.failures import Reason, RequestFailed
from loadwatch.client.sse import SSEDecoder

SAMPLE = (Path(__file__).parents[2] / "data" / "vllm-0.32-chat-stream-sse.txt").read_bytes()
RESPONSES = (Path(__file__).parents[2] / "data" / "vllm-0.32-responses-stream-sse.txt").read_bytes()


def decode_all(data: bytes, split: int) -> list[bytes]:
    decoder = SSEDecoder()
    events = []
    for i in range(0, len(data), split):
        events += decoder.feed(data[i:i + split])
    return events + decoder.close()


@pytest.mark.parametrize("split", [1, 2, 7, 64, 1000, len(SAMPLE)])
def test_real_vllm_stream_decodes_the_same_in_any_split(split):
    events = decode_all(SAMPLE, split)
    assert events[-1] == b"[DONE]"
    chunks = [parse_chunk(e, "chat") for e in events[:-1]]
    # The role-only first chunk (content "") is not generated text.
    assert chunks[0].has_text is False
    assert sum(c.has_text for c in chunks) == 16
    assert chunks[-1].usage.completion_tokens == 16 and chunks[-1].usage.prompt_tokens == 19


def test_one_event_a_read_as_vllm_writes_them_decodes_as_the_whole_stream_does():
    decoder = SSEDecoder()
    events = [event for piece in SAMPLE.split(b"\n\n")[:-1] for event in decoder.feed(piece + b"\n\n")]
    assert events == decode_all(SAMPLE, len(SAMPLE)) and len(events) == 19


def test_an_event_whose_last_line_comes_in_a_read_of_its_own_keeps_its_first():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"data: b\n\n") == [b"a\nb"]


def test_a_crlf_line_ending_just_before_the_blank_line_is_not_part_of_the_payload():
    assert SSEDecoder().feed(b"data: [DONE]\r\n\n") == [b"[DONE]"]
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]\r") == [] and decoder.close() == [b"[DONE]"]


def test_crlf_comments_and_multiline_data():
    data = b": keep-alive\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\nevent: x\nid: 3\ndata: [DONE]\n\n"
    assert decode_all(data, 3) == [b'{"a":\n1}', b"[DONE]"]


def test_event_without_final_blank_line_is_kept_at_close():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: [DONE]") == []
    assert decoder.close() == [b"[DONE]"]


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
    assert (chunk.usage.prompt_tokens, chunk.usage.completion_tokens, chunk.usage.cached_tokens) == (3, 5, None)


def test_usage_details_say_what_was_cached_and_reasoned():
    # vLLM with --enable-prompt-tokens-details; reasoning tokens where a server counts them.
    chunk = parse_chunk('{"choices":[],"usage":{"prompt_tokens":281,"completion_tokens":24,'
                        '"prompt_tokens_details":{"cached_tokens":256,"created_cache_tokens":0},'
                        '"completion_tokens_details":{"reasoning_tokens":20}}}', "chat")
    assert (chunk.usage.cached_tokens, chunk.usage.reasoning_tokens) == (256, 20)
    empty = parse_chunk('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5,'
                        '"prompt_tokens_details":null,"completion_tokens_details":null}}', "chat")
    assert (empty.usage.cached_tokens, empty.usage.reasoning_tokens) == (None, None)
    with pytest.raises(RequestFailed):
        parse_chunk('{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":-1}}}', "chat")


def test_thoughts_are_output_but_not_the_answer():
    thought = parse_chunk('{"choices":[{"delta":{"reasoning_content":"hmm"}}]}', "chat")
    assert thought.has_text and not thought.has_answer
    answer = parse_chunk('{"choices":[{"delta":{"content":"Paris"}}]}', "chat")
    assert answer.has_text and answer.has_answer


def test_a_stream_of_tool_calls_is_put_back_together():
    from loadwatch.client.answer import Answer

    answer = Answer()
    for data in ('{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function",'
                 '"function":{"name":"get_weather","arguments":""}}]}}]}',
                 '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"city\\""}}]}}]}',
                 '{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c2",'
                 '"function":{"name":"get_time","arguments":"{}"}}]}}]}',
                 '{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":": \\"Paris\\"}"}}]}}]}'):
        answer.add(parse_chunk(data, "chat"))
    assert answer.tool_calls == 2
    message = answer.message()
    assert message["content"] is None
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("c1", "get_weather", '{"city": "Paris"}'), ("c2", "get_time", "{}")]


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


@pytest.mark.parametrize("split", [1, 7, 1000, len(RESPONSES)])
def test_a_real_vllm_responses_stream_decodes_the_same_in_any_split(split):
    events = decode_all(RESPONSES, split)
    chunks = [parse_chunk(e, "responses") for e in events]
    assert [c.final for c in chunks] == [False] * (len(chunks) - 1) + [True]  # no [DONE]: its last event ends it
    assert sum(c.has_text for c in chunks) == 7 and not chunks[0].has_text
    last = chunks[-1]
    assert (last.usage.prompt_tokens, last.usage.completion_tokens, last.usage.cached_tokens) == (22, 8, 0)
    assert last.engine.prefill == pytest.approx(0.010065, rel=1e-3)


RESPONSE_EVENTS = [  # the events of tests/data/vllm-0.32-responses-stream-sse.txt, shortened
    '{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","status":"in_progress"}}',
    '{"type":"response.output_item.added","sequence_number":2,"output_index":0,'
    '"item":{"type":"message","id":"msg_1","role":"assistant","content":[]}}',
    '{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,'
    '"content_index":0,"delta":" Paris","logprobs":[]}',
    '{"type":"response.output_text.done","sequence_number":5,"text":" Paris"}',
    '{"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","status":"completed",'
    '"usage":{"input_tokens":12,"input_tokens_details":{"cached_tokens":8},"output_tokens":1,'
    '"output_tokens_details":{"reasoning_tokens":0},"total_tokens":13},'
    '"metrics":{"queue_time_ms":1.5,"time_to_first_token_ms":20.0}}}',
]


def test_a_responses_stream_is_text_at_its_deltas_and_ends_at_its_completed_event():
    chunks = [parse_chunk(e, "responses") for e in RESPONSE_EVENTS]
    assert [c.has_text for c in chunks] == [False, False, True, False, False]
    assert chunks[2].content == " Paris" and not any(c.final for c in chunks[:-1])
    last = chunks[-1]
    assert last.final and (last.usage.prompt_tokens, last.usage.completion_tokens) == (12, 1)
    assert (last.usage.cached_tokens, last.usage.reasoning_tokens) == (8, 0)
    assert last.engine.queue == pytest.approx(0.0015)


def test_a_responses_function_call_is_output_at_its_arguments_and_named_by_its_item():
    from loadwatch.client.answer import Answer

    opened = parse_chunk('{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call",'
                         '"call_id":"call_9","name":"get_weather","arguments":""}}', "responses")
    argument = parse_chunk('{"type":"response.function_call_arguments.delta","output_index":1,"delta":"{}"}',
                           "responses")
    thought = parse_chunk('{"type":"response.reasoning_text.delta","output_index":0,"delta":"hmm"}', "responses")
    assert not opened.has_text and argument.has_answer and thought.has_text and not thought.has_answer
    answer = Answer()
    for chunk in (opened, argument):
        answer.add(chunk)
    assert answer.message()["tool_calls"][0] == {"id": "call_9", "type": "function",
                                                 "function": {"name": "get_weather", "arguments": "{}"}}


def test_a_reasoning_summary_is_output_and_a_finish_reason_is_the_generations_end():
    summary = parse_chunk('{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"**Plan"}',
                          "responses")
    assert summary.has_text and not summary.has_answer
    end = parse_chunk('{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,'
                      '"completion_tokens":2}}', "chat")
    going = parse_chunk('{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}', "chat")
    assert end.finished and end.usage is not None and end.usage.completion_tokens == 2 and not going.finished


@pytest.mark.parametrize("data", [
    '{"type":"error","code":"server_error","message":"engine died"}',
    '{"type":"response.failed","response":{"status":"failed","error":{"code":"x","message":"engine died"}}}',
])
def test_a_responses_error_event_fails_the_request_with_its_message(data):
    with pytest.raises(RequestFailed) as failed:
        parse_chunk(data, "responses")
    assert failed.value.reason == Reason.STREAM_ERROR and "engine died" in str(failed.value)


def test_a_responses_completed_event_without_usage_is_malformed():
    with pytest.raises(RequestFailed) as failed:
        parse_chunk('{"type":"response.completed","response":{"status":"completed"}}', "responses")
    assert failed.value.reason == Reason.MALFORMED_CHUNK


def _outcome(read, data, endpoint):
    try:
        return read(data, endpoint)
    except RequestFailed as failed:
        return failed.reason, str(failed)


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_the_fast_reading_of_a_chunk_says_what_the_careful_one_does(endpoint):
    """msgspec reads a well-formed chunk (parse_chunk), orjson and Python checks read anything else
    (_parse): over vLLM's own chunks and malformed ones, both come out the same, failures in the same words."""
    from loadwatch.client.chunks import _parse

    real = decode_all(SAMPLE, len(SAMPLE))[:-1]
    odd = [
        b'{"choices":[{"delta":{"content":"a\xff"}}]}', b'{"x":"a\xff","choices":[{"delta":{"content":"a"}}]}',
        b'{"choices":[],"x":' + b"[" * 2000 + b"]" * 2000 + b"}", '{"choices":[{"delta":{"content":"日本"}}]}'.encode(),
        b'{"choices":[{"delta":{"content":5}}]}', b'{"choices":[{"delta":"hi"}]}', b'{"choices":[7]}',
        b'{"choices":[{"text":5}]}', b'{"choices":[{"text":"x","finish_reason":"length"}]}',
        b'{"choices":[{"delta":{"content":"x"}},"garbage"]}', b'{"error":{"message":"engine died"}}',
        b'{"error":"plain","choices":[]}', b'{"error":null,"choices":[{"delta":{"content":"x"}}]}',
        b'{"choices":[],"usage":[1]}', b'{"choices":[],"usage":{"completion_tokens":true}}',
        b'{"choices":[],"usage":{"completion_tokens":3},"system_fingerprint":"a","metrics":{"queue_time_ms":2}}',
        b'{"choices":[{"delta":{"tool_calls":"x"}}]}', b'{"choices":[{"delta":{"tool_calls":[{"index":"0"}]}}]}',
        b'{"choices":[{"delta":{"reasoning":"r","content":""}}]}', b"[1]", b"{", b"{}", b'"x"',
        # Numbers past 64 bits or a double's range where they are read: orjson makes the one a float,
        # refuses the other.
        b'{"choices":[],"usage":{"completion_tokens":18446744073709551616}}',
        b'{"choices":[],"usage":{"completion_tokens":-18446744073709551617}}',
        b'{"choices":[],"usage":{"completion_tokens":1e400}}', b'{"choices":[],"error":123456789012345678901234567890}',
        b'{"choices":[],"error":' + b"9" * 400 + b"}",
        b'{"choices":[{"delta":{"tool_calls":[{"index":18446744073709551616,"function":{"arguments":"x"}}]}}]}',
        b'{"choices":[{"delta":{"tool_calls":[{"id":18446744073709551616}]}}]}',
        b'{"choices":[{"delta":{"content":"a"},"finish_reason":18446744073709551616}]}',
        b'{"choices":[{"delta":{"content":"a"},"finish_reason":1e400}]}',
    ]
    for data in [*real, *odd]:
        assert _outcome(parse_chunk, data, endpoint) == _outcome(_parse, data, endpoint), data
    for text in ('{"choices":[{"delta":{"content":"a\ud800"}}]}', '{"choices":[{"delta":{"content":"日本"}}]}'):
        assert _outcome(parse_chunk, text, endpoint) == _outcome(_parse, text, endpoint), text


def test_a_number_past_a_doubles_range_in_a_field_no_figure_reads_is_passed_over():
    """JSON's grammar allows it, orjson refuses it, and msgspec skips a field it is not asked for
    unchecked: the one place where the fast reading is the more lenient."""
    chunk = parse_chunk(b'{"choices":[{"delta":{"content":"a"},"index":2e308}],"created":1e400}', "chat")
    assert chunk.content == "a"


def _taken(body: bytes, split: int, every: int) -> list[tuple[bytes, int]]:
    """The events of `body` read `split` bytes a read and taken every `every` reads, each with its read's
    number; what stays in the buffer after a take is one unfinished line."""
    decoder, buffer, reads, taken, first = SSEDecoder(), bytearray(), [], [], 0
    pieces = [body[i:i + split] for i in range(0, len(body), split)]
    for number, piece in enumerate(pieces):
        buffer += piece
        reads.append(len(buffer))
        if len(reads) == every or number == len(pieces) - 1:
            events, completed = decoder.take(buffer, reads)
            taken += [(event, first + read) for event, read in zip(events, completed, strict=True)]
            first, reads = number + 1, []
            assert b"\n" not in buffer
    return taken


def _fed(body: bytes, split: int) -> list[tuple[bytes, int]]:
    """The events of `body` fed to the decoder `split` bytes at a time, each with the feed that gave it."""
    decoder = SSEDecoder()
    pieces = [body[i:i + split] for i in range(0, len(body), split)]
    return [(event, number) for number, piece in enumerate(pieces) for event in decoder.feed(piece)]


# vLLM's own stream (one `data:` line an event: the body split at once), and others fed line by line.
@pytest.mark.parametrize("body", [SAMPLE, SAMPLE.replace(b"\n", b"\r\n"), RESPONSES, b": ping\n\n" + SAMPLE],
                         ids=["vllm", "crlf", "responses", "comment"])
@pytest.mark.parametrize("split", [1, 7, 64, 300, 1 << 20])
@pytest.mark.parametrize("every", [1, 3, 1000])
def test_taking_reads_from_a_body_buffer_stamps_each_event_with_the_read_that_completed_it(body, split, every):
    assert _taken(body, split, every) == _fed(body, split)


def test_a_take_leaves_an_unfinished_line_and_takes_one_whole_event_a_read():
    for one, payload in ((b"data: {}\r\n\r\n", b"{}"), (b"data: {}\n\n", b"{}"), (b": keep-alive\n\n", None)):
        buffer = bytearray(one + b"data: {")
        assert SSEDecoder().take(buffer, [len(buffer)]) == (([payload], [0]) if payload else ([], [])), one
        assert buffer == b"data: {"
    for alone in (b"data: {}\n\n", b"data: {}\r\n\n", b"data: {}\r\n\r\n"):  # one event a read
        buffer = bytearray(alone)
        assert SSEDecoder().take(buffer, [len(buffer)]) == ([b"{}"], [0]) and not buffer, alone
    buffer = bytearray(b"data: a\n\ndata: b\n")  # the second's blank line still to come: fed line by line
    decoder = SSEDecoder()
    assert decoder.take(buffer, [9, 18]) == ([b"a"], [0]) and not buffer
    buffer += b"\n"
    assert decoder.take(buffer, [1]) == ([b"b"], [0])
