from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lanewatch.collector.http1.sse import (
    MAX_EVENT_BYTES,
    MAX_LINE_BYTES,
    ChunkKind,
    SseParser,
    StreamChunk,
    classify,
)
from lanewatch.collector.openai_api.error_detail import error_detail
from lanewatch.collector.openai_api.usage import Usage


def parse(*parts: bytes) -> tuple[list[StreamChunk], SseParser]:
    parser = SseParser()
    out: list[StreamChunk] = []
    for part in parts:
        out.extend(parser.feed(part))
    out.extend(parser.close())
    return out, parser


def chat(content: str | None = None, role: str | None = None, **extra: object) -> dict[str, object]:
    delta: dict[str, object] = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": extra.pop("finish", None)}
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m", "choices": [choice], **extra}


def frame(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


# ---------------------------------------------------------------- classify


def test_role_only_chunk_is_not_content() -> None:
    assert classify(json.dumps(chat(content="", role="assistant"))).kind is ChunkKind.META
    assert classify(json.dumps(chat(content="hi"))).kind is ChunkKind.CONTENT


def test_completions_text_counts_only_when_non_empty() -> None:
    base = {"object": "text_completion", "choices": [{"index": 0, "text": "", "finish_reason": None}]}
    assert classify(json.dumps(base)).kind is ChunkKind.META
    base["choices"][0]["text"] = " word"  # type: ignore[index]
    assert classify(json.dumps(base)).kind is ChunkKind.CONTENT


def test_reasoning_delta_counts_as_generated_text() -> None:
    obj = {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}
    assert classify(json.dumps(obj)).kind is ChunkKind.CONTENT


def test_text_is_kept_only_when_asked() -> None:
    stream = frame(chat("", role="assistant")) + frame(chat("Hel")) + frame(chat("lo", finish="stop"))
    plain, _ = parse(stream)
    assert [c.text for c in plain] == [None, None, None]
    kept = SseParser(keep_text=True).feed(stream + b"data: [DONE]\n\n")
    assert [c.text for c in kept] == ["", "Hel", "lo", None]
    assert kept[2].finish_reason == "stop"


def test_kept_text_is_the_first_choices_answer_only() -> None:
    two = {"choices": [{"index": 1, "delta": {"content": "B"}}, {"index": 0, "delta": {"content": "A"}}]}
    assert classify(json.dumps(two), keep_text=True).text == "A"
    thinking = {"choices": [{"index": 0, "delta": {"reasoning_content": "hmm"}}]}
    assert classify(json.dumps(thinking), keep_text=True) == StreamChunk(ChunkKind.CONTENT)  # not the answer
    completion = {"choices": [{"index": 0, "text": "Once", "finish_reason": None}]}
    assert classify(json.dumps(completion), keep_text=True).text == "Once"


def test_usage_chunk_carries_counts_and_finish_reason_is_kept() -> None:
    usage = classify(json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 16}}))
    assert usage == StreamChunk(ChunkKind.META, usage=Usage(7, 16))
    fin = classify(json.dumps(chat(content="", finish="length")))
    assert fin.finish_reason == "length"


def test_content_chunk_with_continuous_usage_keeps_both() -> None:
    c = classify(json.dumps(chat(content="a", usage={"prompt_tokens": 3, "completion_tokens": 1})))
    assert c.kind is ChunkKind.CONTENT
    assert c.usage == Usage(3, 1)


@pytest.mark.parametrize(
    ("obj", "name", "message"),
    [
        (
            {"error": {"object": "error", "message": "boom", "type": "InternalServerError", "code": 500}},
            None,
            "boom",
        ),
        ({"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}, None, "bad"),
        ({"error": "something broke"}, "error", "something broke"),
        ({"error": {"message": "key sk-abcdefghijklmnop\nrefused", "type": "AuthError"}}, None, None),
    ],
)
def test_error_objects_are_errors_with_their_cleaned_message(
    obj: dict[str, object], name: str | None, message: str | None
) -> None:
    c = classify(json.dumps(obj))
    assert c.kind is ChunkKind.ERROR
    expected = name or str(obj.get("error", obj)["type"])  # type: ignore[index]
    assert c.error == expected
    if message is not None:
        assert c.message == message
    else:  # one line, the key redacted
        assert c.message == "key [redacted] refused"


def test_event_error_field_marks_error() -> None:
    assert classify('{"message": "x"}', event="error").kind is ChunkKind.ERROR


@pytest.mark.parametrize("data", ["not json", '{"choices": [', "[1, 2]", '"str"', "{}", '{"choices": 3}'])
def test_bad_data_is_bad(data: str) -> None:
    assert classify(data).kind is ChunkKind.BAD


def test_done_tolerates_whitespace() -> None:
    assert classify("[DONE]").kind is ChunkKind.DONE
    assert classify(" [DONE] ").kind is ChunkKind.DONE


# ---------------------------------------------------------------- framing


def test_comments_keepalives_and_fields_are_skipped() -> None:
    stream = (
        b": keep-alive\n\n:\nid: 4\nretry: 100\nevent: message\nfoo: bar\n" + frame(chat("x"))[:-1] + b"\n"
    )
    out, p = parse(stream)
    assert [c.kind for c in out] == [ChunkKind.CONTENT]
    assert p.comments == 2
    assert p.bad_events == 0


def test_multi_line_data_is_joined_with_newlines() -> None:
    body = json.dumps(chat("multi"), indent=1).split("\n")
    stream = b"".join(b"data: " + line.encode() + b"\n" for line in body) + b"\n"
    out, _ = parse(stream)
    assert [c.kind for c in out] == [ChunkKind.CONTENT]


def test_data_without_space_and_bare_field_name() -> None:
    out, _ = parse(b"data:[DONE]\n\ndata\n\n")
    # "data" alone is an empty data line: an event with empty data, which is not JSON.
    assert [c.kind for c in out] == [ChunkKind.DONE, ChunkKind.BAD]


def test_crlf_split_between_cr_and_lf_does_not_dispatch_twice() -> None:
    out, p = parse(b"data: [DONE]\r", b"\n\r", b"\n")
    assert [c.kind for c in out] == [ChunkKind.DONE]
    assert p.events == 1


def test_cr_only_line_endings() -> None:
    out, _ = parse(b"data: [DONE]\r\r: c\r\rdata: [DONE]\r\r")
    assert [c.kind for c in out] == [ChunkKind.DONE, ChunkKind.DONE]


def test_invalid_utf8_is_counted_bad_and_parsing_goes_on() -> None:
    out, p = parse(b'data: {"choices": [\xff\xfe]}\n\n' + frame(chat("ok")))
    assert [c.kind for c in out] == [ChunkKind.BAD, ChunkKind.CONTENT]
    assert p.bad_events == 1


def test_truncated_event_is_dropped_and_reported_pending() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"choices": [{"delta": {"content": "a"}}]}\n') == []
    assert parser.pending
    assert parser.close() == []
    assert parser.bad_events == 0


def test_oversized_line_is_dropped_counted_and_the_stream_recovers() -> None:
    big = b"data: " + b"x" * (MAX_LINE_BYTES + 10)
    parts = [big[i : i + 65536] for i in range(0, len(big), 65536)]
    out, p = parse(*parts, b"yyy\n\n", frame(chat("after")), b"data: [DONE]\n\n")
    assert [c.kind for c in out] == [ChunkKind.BAD, ChunkKind.CONTENT, ChunkKind.DONE]
    assert p.bad_events == 1


def test_an_event_past_its_byte_cap_breaks_the_stream_and_nothing_more_is_kept() -> None:
    line = b"data: " + b"x" * (1024 * 1024) + b"\n"
    parser = SseParser()
    out: list[StreamChunk] = []
    fed = 0
    for _ in range(300):  # 300 lines of 1 MiB in one event
        out += parser.feed(line)
        fed += 1
        if parser.failure is not None:
            break
    assert fed == MAX_EVENT_BYTES // len(line) + 1
    assert [c.kind for c in out] == [ChunkKind.BAD] and out[0].message == parser.failure
    assert parser.failure is not None and "longer than 4 MiB" in parser.failure and parser.bad_events == 1
    assert parser.feed(b"\n" + frame(chat("after")) + b"data: [DONE]\n\n") == []  # broken for good
    assert not parser.pending


def test_events_under_the_byte_cap_are_whole_however_many_lines_they_have() -> None:
    event = b"".join(b"data: %d\n" % i for i in range(10_000)) + b"\n"
    out, p = parse(event, frame(chat("ok")))
    assert [c.kind for c in out] == [ChunkKind.BAD, ChunkKind.CONTENT] and p.failure is None


# ---------------------------------------------------------------- any chunking, same events


@dataclass(frozen=True)
class Item:
    lines: tuple[str, ...]  # lines of one block, without endings; a blank line follows data
    expected: StreamChunk | None  # the event it dispatches (None for a comment)


_text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def items(draw: st.DrawFn) -> Item:
    kind = draw(
        st.sampled_from(["content", "role", "usage", "text", "error", "done", "bad", "comment", "multi"])
    )
    if kind == "comment":
        return Item((":" + draw(_text).replace("\n", " ").replace("\r", " "),), None)
    if kind == "done":
        return Item(("data: [DONE]",), StreamChunk(ChunkKind.DONE))
    if kind == "bad":
        return Item(
            ("data: {not json " + draw(st.sampled_from(["", "é", "🙂"])),), StreamChunk(ChunkKind.BAD)
        )
    if kind == "error":
        message = draw(_text)
        obj: dict[str, object] = {"error": {"message": message, "type": "InternalServerError"}}
        return Item(
            ("data: " + json.dumps(obj, ensure_ascii=False),),
            # the message as kept: cleaned (this test is about chunking, not cleaning)
            StreamChunk(ChunkKind.ERROR, error="InternalServerError", message=error_detail(message)),
        )
    if kind == "usage":
        pt, ct = draw(st.integers(0, 10**6)), draw(st.integers(0, 10**6))
        obj = {
            "choices": [],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        }
        return Item(("data: " + json.dumps(obj),), StreamChunk(ChunkKind.META, usage=Usage(pt, ct)))
    if kind == "text":
        text = draw(_text)
        obj = {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": None}]}
        exp = StreamChunk(ChunkKind.CONTENT if text else ChunkKind.META)
        return Item(("data: " + json.dumps(obj, ensure_ascii=False),), exp)
    if kind == "role":
        return Item(("data: " + json.dumps(chat("", role="assistant")),), StreamChunk(ChunkKind.META))
    text = draw(_text.filter(bool))
    exp = StreamChunk(ChunkKind.CONTENT)
    if kind == "multi":
        lines = json.dumps(chat(text), ensure_ascii=False, indent=1).split("\n")
        return Item(tuple("data: " + line for line in lines), exp)
    return Item(
        ("data:" + draw(st.sampled_from(["", " "])) + json.dumps(chat(text), ensure_ascii=False),), exp
    )


def render(stream: list[Item], eol: str) -> bytes:
    out: list[str] = []
    for item in stream:
        out.extend(line + eol for line in item.lines)
        out.append(eol)
    return "".join(out).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    stream=st.lists(items(), max_size=12),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0), max_size=40),
)
def test_any_chunking_of_a_valid_stream_gives_the_same_events(
    stream: list[Item], eol: str, cuts: list[int]
) -> None:
    data = render(stream, eol)
    points = sorted({c % (len(data) + 1) for c in cuts})
    parts = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    whole, p_whole = parse(data)
    pieces, p_pieces = parse(*parts)
    expected = [i.expected for i in stream if i.expected is not None]
    assert whole == expected
    assert pieces == expected
    assert (p_pieces.events, p_pieces.bad_events, p_pieces.comments) == (
        p_whole.events,
        p_whole.bad_events,
        p_whole.comments,
    )
    assert p_whole.comments == sum(1 for i in stream if i.expected is None)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.lists(st.integers(min_value=0), max_size=20))
def test_arbitrary_bytes_never_raise_and_chunking_does_not_matter(data: bytes, cuts: list[int]) -> None:
    points = sorted({c % (len(data) + 1) for c in cuts})
    parts = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    whole, _ = parse(data)
    pieces, _ = parse(*parts)
    assert whole == pieces
