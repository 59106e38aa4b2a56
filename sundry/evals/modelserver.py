"""An OpenAI-compatible chat-completions server on loopback, answering with Sundry's offline model.

For the realistic benchmark (`bench.realbench`): the ticket class names
`openai-compatible:<name>` and `SUNDRY_OPENAI_COMPAT_BASE_URL` points here, so
every step goes through the gateway, the provider SDK and HTTP as it would to
a hosted model. Each request is converted back into a `ModelRequest` (system
blocks keep their headings, which is how the offline model finds the lanes),
answered by the offline model, and held until its latency has passed: a
deterministic spread between `--min` and `--max` seconds, drawn from a hash of
the seed and the request body (the same request always takes the same time,
whatever order the calls arrive in).

    python -m sundry.evals.modelserver --port 0 --min 1 --max 3 --seed 1 [--log calls.jsonl] [--answer weak]

`--answer weak` answers with the scripted weak model (sundry.evals.weakmodel) instead,
for `manage.py model_check --model openai-compatible:weak` against this server;
`--answer obedient` with the obedient model (sundry.evals.obedientmodel), which
obeys any instruction it reads, claims what it tried as done and copies the notes
it reads to the customer.

Prints `listening <port>` once it accepts connections. `--log` appends one
JSON line per call: when it arrived and was answered (time.time()), the
seconds spent, the customer ID in the request's ledger, and the reply's shape.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from sundry.evals.obedientmodel import ObedientCheckModel
from sundry.evals.weakmodel import WeakModel
from sundry.shop.offline import OfflineModel, RequestView
from sundry.tooling.messages import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec

HOST = "127.0.0.1"


def latency_for(body: bytes, *, seed: int, low: float, high: float) -> float:
    """Seconds this request takes: a uniform spread over [low, high], fixed by seed and body."""
    digest = hashlib.sha256(str(seed).encode() + b"\0" + body).digest()
    fraction = int.from_bytes(digest[:8], "big") / 2**64
    return low + (high - low) * fraction


def _text(content) -> str:
    """A message's content: a string, or a list of parts of which the text ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _arguments(raw):
    if isinstance(raw, dict):
        return raw
    if raw is None or not str(raw).strip():
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return str(raw)
    return parsed if isinstance(parsed, dict) else str(raw)


def to_model_request(body: dict) -> ModelRequest:
    """A chat-completions request body as the ModelRequest the offline model reads."""
    messages: list[Message] = []
    names: dict[str, str] = {}
    for m in body.get("messages") or []:
        role = m.get("role")
        if role in ("system", "developer"):
            messages.append(Message(role="system", content=_text(m.get("content"))))
        elif role == "user":
            messages.append(Message(role="user", content=_text(m.get("content"))))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                fn = c.get("function") or {}
                names[c.get("id", "")] = fn.get("name", "")
                calls.append(
                    ToolCall(id=c.get("id", ""), name=fn.get("name", ""), arguments=_arguments(fn.get("arguments")))
                )
            messages.append(Message(role="assistant", content=_text(m.get("content")), tool_calls=calls))
        elif role == "tool":
            call_id = m.get("tool_call_id") or ""
            messages.append(
                Message(
                    role="tool", content=_text(m.get("content")), tool_call_id=call_id, tool_name=names.get(call_id)
                )
            )
        else:
            raise ValueError(f"unknown message role {role!r}")
    tools = [
        ToolSpec(
            name=t["function"]["name"],
            description=t["function"].get("description") or "",
            parameters=t["function"].get("parameters") or {"type": "object", "properties": {}},
        )
        for t in body.get("tools") or []
        if t.get("type") == "function"
    ]
    return ModelRequest(model=str(body.get("model") or ""), messages=messages, tools=tools)


def customer_in(request: ModelRequest) -> str | None:
    """The customer ID the request's ledger names, so the log can say which ticket a call served."""
    try:
        return next((e.value for e in RequestView(request).ledger if e.role == "customer"), None)
    except Exception:  # a ledger this model cannot read: the call stays unattributed
        return None


def to_completion(response: ModelResponse, model: str) -> dict:
    """Our ModelResponse as a chat-completions response body."""
    calls = [
        {
            "id": c.id,
            "type": "function",
            "function": {
                "name": c.name,
                "arguments": c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
            },
        }
        for c in response.tool_calls
    ]
    message: dict = {"role": "assistant", "content": response.text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {
            "prompt_tokens": response.usage.input_tokens,
            "completion_tokens": response.usage.output_tokens,
            "total_tokens": response.usage.input_tokens + response.usage.output_tokens,
        },
    }


class Config:
    seed = 1
    low = 1.0
    high = 3.0
    log = None  # an open file, or None
    lock = threading.Lock()
    model = None  # the offline model is stateless: one serves every thread


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK expects
    # TCP_NODELAY, as model servers (uvicorn, vLLM, llama.cpp) and hosted APIs set it. Without it the
    # body, written after the headers, waited for the client's delayed ACK of them: about 40 ms a
    # call, after the time logged, which the benchmarks counted as the gateway's (docs/benchmarks.md).
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # one line per call goes to --log instead
        pass

    def _reply(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            self._reply(HTTPStatus.OK, {"object": "list", "data": [{"id": "offline", "object": "model"}]})
        else:
            self._reply(HTTPStatus.NOT_FOUND, {"error": {"message": "not found"}})

    def do_POST(self):
        arrived = time.time()
        started = time.monotonic()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._reply(HTTPStatus.NOT_FOUND, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            data = json.loads(body)
            request = to_model_request(data)
        except (ValueError, KeyError, TypeError) as exc:
            self._reply(
                HTTPStatus.BAD_REQUEST, {"error": {"message": f"bad request: {exc}", "type": "invalid_request_error"}}
            )
            return
        response = Config.model.complete(request)
        target = latency_for(body, seed=Config.seed, low=Config.low, high=Config.high)
        # The offline model's own time is part of the latency, as a hosted model's compute is.
        remaining = target - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)
        payload = to_completion(response, request.model)
        seconds = time.monotonic() - started
        self._reply(HTTPStatus.OK, payload)
        if Config.log is not None:  # after the answer is sent: not part of the call's time
            line = json.dumps(
                {
                    "arrived": arrived,
                    "answered": time.time(),
                    "seconds": seconds,
                    "target": target,
                    "customer": customer_in(request),
                    "tool_calls": len(response.tool_calls),
                    "messages": len(request.messages),
                    "bytes": len(body),
                }
            )
            with Config.lock:
                Config.log.write(line + "\n")
                Config.log.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # dozens of workers may connect at once


def serve(
    port: int, *, seed: int, low: float, high: float, log_path: str | None = None, answer: str = "offline"
) -> Server:
    """A started server (in a thread of this process); `server.server_address[1]` is its port."""
    Config.seed, Config.low, Config.high = seed, low, high
    Config.model = {"weak": WeakModel, "obedient": ObedientCheckModel}.get(answer, OfflineModel)()
    # Its token counter loads its encoding on first use: not part of any call's latency.
    Config.model.complete(ModelRequest(model="offline", messages=[Message(role="user", content="Hello")]))
    Config.log = open(log_path, "a") if log_path else None
    server = Server((HOST, port), Handler)
    threading.Thread(target=server.serve_forever, name="modelserver", daemon=True).start()
    return server


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--min", type=float, default=1.0, help="shortest call, seconds")
    parser.add_argument("--max", type=float, default=3.0, help="longest call, seconds")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log", default=None, help="append one JSON line per call here")
    parser.add_argument(
        "--answer",
        choices=["offline", "weak", "obedient"],
        default="offline",
        help="the model that answers: the offline model, the scripted weak model or the obedient model",
    )
    args = parser.parse_args(argv)
    if args.min < 0 or args.max < args.min:
        parser.error("need 0 <= --min <= --max")
    server = serve(args.port, seed=args.seed, low=args.min, high=args.max, log_path=args.log, answer=args.answer)
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
