"""A local server shaped like Anthropic's Messages API, streaming as the real one does.

`script(path, body)` returns what to answer a POST to /v1/messages: an `Answer` (text pieces and
`ToolUse`s, the usage to report) or an `(status, payload[, headers])` error. With `"stream": true`
the answer goes out as server-sent events — message_start (input and cached tokens),
content_block_start / content_block_delta (text_delta, input_json_delta in pieces) /
content_block_stop per block, message_delta (stop reason, output tokens, cumulative usage),
message_stop — with `pause` slept before every delta; otherwise as one Message body.
POST /v1/messages/count_tokens answers `count(body)` as {"input_tokens": n}.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from tests.agent.loopback import JsonHandler, LoopbackServer

MODEL = "claude-haiku-4-5"


@dataclass
class ToolUse:
    call_id: str
    name: str
    arguments: dict
    pieces: int = 3  # the arguments' JSON arrives as this many input_json_delta events
    raw: str | None = None  # sent instead of the arguments' JSON when set (a malformed call)


@dataclass
class Answer:
    blocks: list = field(default_factory=list)  # str (text) or ToolUse; consecutive strings are one text block
    input_tokens: int = 100  # uncached input, as Anthropic reports it
    output_tokens: int = 10
    cache_read: int = 0  # cache_read_input_tokens
    cache_write: int = 0  # cache_creation_input_tokens
    stop: str | None = None  # default: "tool_use" if any ToolUse, else "end_turn"


def _grouped(blocks: list) -> list:
    """Consecutive text pieces as one text block (a list of its pieces); tool uses as they are."""
    out: list = []
    for b in blocks:
        if isinstance(b, str) and out and isinstance(out[-1], list):
            out[-1].append(b)
        else:
            out.append([b] if isinstance(b, str) else b)
    return out


def _stop(answer: Answer) -> str:
    return answer.stop or ("tool_use" if any(isinstance(b, ToolUse) for b in answer.blocks) else "end_turn")


def _usage(answer: Answer, *, output: int) -> dict:
    return {
        "input_tokens": answer.input_tokens,
        "output_tokens": output,
        "cache_read_input_tokens": answer.cache_read,
        "cache_creation_input_tokens": answer.cache_write,
    }


def message(answer: Answer) -> dict:
    content = []
    for block in _grouped(answer.blocks):
        if isinstance(block, ToolUse):
            content.append({"type": "tool_use", "id": block.call_id, "name": block.name, "input": block.arguments})
        else:
            content.append({"type": "text", "text": "".join(block)})
    return {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": _stop(answer),
        "stop_sequence": None,
        "usage": _usage(answer, output=answer.output_tokens),
    }


def _split(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // max(1, n)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def events(answer: Answer):
    """(event name, data) in the order the API sends them; a None data is the caller's cue to pause."""
    start = {**message(answer), "content": [], "stop_reason": None}
    start["usage"] = _usage(answer, output=1)
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(_grouped(answer.blocks)):
        if isinstance(block, ToolUse):
            head = {"type": "tool_use", "id": block.call_id, "name": block.name, "input": {}}
            deltas = [
                {"type": "input_json_delta", "partial_json": p}
                for p in _split(block.raw if block.raw is not None else json.dumps(block.arguments), block.pieces)
            ]
        else:
            head = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in block]
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": head}
        for delta in deltas:
            yield "pause", None
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    # The final usage is cumulative: the output tokens and, again, the input and cache counts.
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": _stop(answer), "stop_sequence": None},
            "usage": _usage(answer, output=answer.output_tokens),
        },
    )
    yield "message_stop", {"type": "message_stop"}


class AnthropicServer(LoopbackServer):
    """An Anthropic Messages API server scripted by `script(path, body)`: an Answer, or (status, payload[, headers])."""

    def __init__(self, script, *, pause: float = 0.0, count=None):
        super().__init__()
        self.script = script
        self.pause = pause
        self.count = count
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = self.read_json()
                path = self.path.split("?")[0]
                server.requests.append(
                    {
                        "path": path,
                        "body": body,
                        "at": time.monotonic(),
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                )
                if path.endswith("/messages/count_tokens"):
                    answer = (
                        server.count(body)
                        if server.count
                        else (
                            404,
                            {
                                "type": "error",
                                "error": {"type": "not_found_error", "message": "count_tokens is not served here"},
                            },
                        )
                    )
                    if isinstance(answer, tuple):
                        self.send_json(*answer)
                    else:
                        self.send_json(200, {"input_tokens": answer})
                    return
                answer = server.script(path, body)
                try:
                    if isinstance(answer, tuple):
                        self.send_json(*answer)
                    elif body.get("stream"):
                        self._stream(answer)
                    else:
                        self.send_json(200, message(answer))
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up waiting (a timeout test): nobody to answer

            def _stream(self, answer: Answer):
                self.start_events()
                for name, data in events(answer):
                    if data is None:
                        time.sleep(server.pause)
                        continue
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

        self.serve(Handler)

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests if not r["path"].endswith("/count_tokens")]
