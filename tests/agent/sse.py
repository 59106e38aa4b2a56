"""A local OpenAI-compatible server that streams its answers as server-sent events, as real servers do
with `"stream": true` (vLLM, llama.cpp's server, Ollama, OpenAI itself).

`script(path, body)` returns what to answer: a list of chunks — text pieces, or `ToolChunk`s —
and the usage to report in the final chunk, or an `(status, payload)` error. `pause` is slept
before every chunk, so a watcher sees the text arrive piece by piece; a non-streamed request
gets the whole answer as one JSON body (the summariser asks without streaming).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from tests.agent.loopback import JsonHandler, LoopbackServer


@dataclass
class ToolChunk:
    call_id: str
    name: str
    arguments: str


@dataclass
class Streamed:
    chunks: list = field(default_factory=list)  # str (text) or ToolChunk
    usage: tuple[int, int] = (100, 10)  # prompt, completion tokens
    cached: int = 0  # prompt tokens read from the server's cache
    finish: str | None = None  # default: "tool_calls" if any call, else "stop"
    first_delay: float = 0.0  # before the first chunk: the server reading the prompt


def _chunk(delta: dict, *, finish=None, usage=None) -> bytes:
    body = {
        "id": "chatcmpl-s1",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "streamer",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _usage(answer: Streamed) -> dict:
    prompt, completion = answer.usage
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if answer.cached:
        usage["prompt_tokens_details"] = {"cached_tokens": answer.cached}
    return usage


def _whole(answer: Streamed) -> dict:
    text = "".join(c for c in answer.chunks if isinstance(c, str)) or None
    calls = [
        {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in answer.chunks
        if isinstance(c, ToolChunk)
    ]
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-s1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "streamer",
        "choices": [
            {"index": 0, "message": message, "finish_reason": answer.finish or ("tool_calls" if calls else "stop")}
        ],
        "usage": _usage(answer),
    }


class StreamingServer(LoopbackServer):
    """An OpenAI-compatible server scripted by `script(path, body)`: a Streamed answer, or (status, payload)."""

    def __init__(self, script, *, pause: float = 0.0):
        super().__init__()
        self.script = script
        self.pause = pause
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = self.read_json()
                server.requests.append({"path": self.path, "body": body, "at": time.monotonic()})
                answer = server.script(self.path, body)
                if isinstance(answer, tuple):
                    self.send_json(*answer)
                elif body.get("stream"):
                    self._stream(answer)
                else:
                    self.send_json(200, _whole(answer))

            def _stream(self, answer: Streamed):
                self.start_events()
                time.sleep(answer.first_delay)
                self.wfile.write(_chunk({"role": "assistant", "content": ""}))
                self.wfile.flush()
                n_calls = 0
                for piece in answer.chunks:
                    time.sleep(server.pause)
                    if isinstance(piece, ToolChunk):
                        delta = {
                            "tool_calls": [
                                {
                                    "index": n_calls,
                                    "id": piece.call_id,
                                    "type": "function",
                                    "function": {"name": piece.name, "arguments": piece.arguments},
                                }
                            ]
                        }
                        n_calls += 1
                    else:
                        delta = {"content": piece}
                    self.wfile.write(_chunk(delta))
                    self.wfile.flush()
                finish = answer.finish or ("tool_calls" if n_calls else "stop")
                self.wfile.write(_chunk({}, finish=finish))
                if (server.requests[-1]["body"].get("stream_options") or {}).get("include_usage"):
                    self.wfile.write(_chunk({}, usage=_usage(answer)))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.serve(Handler)

    @property
    def bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests]
