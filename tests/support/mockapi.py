"""A mock of the Anthropic Messages API, the OpenAI Responses API, OpenAI chat
completions and the Gemini API, for the real CLIs.

One scenario per server (``MockApi(scenario)``), threaded, standard library only. It
answers the way the CLIs were seen to need (docs/providers.md, "Pointing the real CLIs at a
local mock API"):

- Claude Code POSTs ``/v1/messages?beta=true`` with ``"stream": true`` (and sometimes
  ``/v1/messages/count_tokens``): a turn is the Messages API's SSE events.
- Codex POSTs ``/v1/responses`` (after a WebSocket attempt on the same path, refused
  here with 404 so it falls back to HTTPS at once): a turn is the Responses API's SSE.
- pi (a ``models.json`` provider with ``"api": "openai-completions"``) POSTs
  ``/v1/chat/completions``: a turn is chat completion chunks, a usage chunk and
  ``[DONE]``.
- Gemini CLI POSTs ``/v1beta/models/<model>:streamGenerateContent?alt=sse``: a turn is
  ``data: <GenerateContentResponse>`` chunks, the last with ``finishReason`` and
  ``usageMetadata`` (the Gemini section below).

- Gemini CLI POSTs ``/v1beta/models/<model>:streamGenerateContent?alt=sse``: a turn is
  ``data: <GenerateContentResponse>`` chunks, the last with ``finishReason`` and
  ``usageMetadata`` (the Gemini section below).

Scenarios: ``text`` (a text reply), ``tool`` (first a tool call that writes
``TOOL_FILE``, then, once the request carries its result, a text reply), the API's own
error answers ``401``, ``403``, ``404`` (the model asked for does not exist), ``429``
(with ``retry-after: 1``), ``500``, ``503``, ``529`` and ``400`` (prompt too long), and
the transport faults, the same for every API: ``hang`` (accepts, reads the request,
never answers), ``close`` (reads the request and closes the connection without a
byte), ``cut`` (200, the start of the text answer, then the connection closes before
the stream's end), ``malformed`` (200 ``text/event-stream`` whose data lines are not
JSON) and ``stall`` (200, the start of the text answer, then silence on an open
connection). An API family takes part in the faults by giving the start of its text
answer (:data:`FIRST_CHUNKS`). Connection refused needs no server: :func:`free_port`
gives a port nobody listens on.

Every request is appended as one JSON line to ``log_path`` (method, path, headers, body)
so a failing test shows what the CLI sent.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

# Faults of the connection, not of the API: the handler plays them for every API family.
TRANSPORT_FAULTS = ("hang", "close", "cut", "malformed", "stall")
SCENARIOS = ("text", "tool", "401", "403", "404", "429", "500", "503", "529", "400",
             *TRANSPORT_FAULTS)  # fmt: skip
MODEL_CLAUDE = "claude-sonnet-4-5-20250929"
MODEL_CODEX = "gpt-5-codex"
REPLY_TEXT = "Hello from the mock API."
# What a cut or stalled answer got out before the connection broke or fell silent.
PARTIAL_TEXT = "Hello from "
TOOL_FILE = "mock_note.txt"
TOOL_FILE_CONTENT = "written by the agent through the mock API\n"
TOOL_REPLY_TEXT = f"I wrote {TOOL_FILE}."

# The providers' own error bodies, per status (their documented shapes); ``{model}`` is
# the model the request asked for.
ANTHROPIC_ERRORS: dict[str, tuple[int, str, str]] = {
    "401": (401, "authentication_error", "invalid x-api-key"),
    "403": (
        403,
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    "404": (404, "not_found_error", "model: {model}"),
    "503": (503, "api_error", "Service Unavailable"),
    "429": (429, "rate_limit_error", "Number of request tokens has exceeded your rate limit"),
    "500": (500, "api_error", "Internal server error"),
    "529": (529, "overloaded_error", "Overloaded"),
    "400": (400, "invalid_request_error", "prompt is too long: 212345 tokens > 200000 maximum"),
}
OPENAI_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    "401": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
    "403": (
        403,
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    "404": (
        404,
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "503": (503, "server_error", None, "Service Unavailable"),
    "429": (429, "rate_limit_exceeded", "rate_limit_exceeded", "Rate limit reached for requests"),
    "500": (500, "server_error", None, "The server had an error processing your request"),
    "529": (529, "overloaded_error", None, "Overloaded"),
    "400": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "Your input exceeds the context window of this model.",
    ),
}


def free_port() -> int:
    """A loopback port that nothing listens on (the OS just handed it out and let it go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def claude_turn(blocks: list[dict[str, Any]], stop_reason: str, model: str) -> bytes:
    """The Messages API stream of one assistant message made of ``blocks``."""
    message: dict[str, Any] = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 1},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": message})
    ]
    for index, block in enumerate(blocks):
        start: dict[str, Any]
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
    events += [
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": 9}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return sse(events)


def claude_first_chunk(body: dict[str, Any]) -> bytes:
    """The start of the Messages API text answer: up to the first text delta."""
    model = str(body.get("model") or MODEL_CLAUDE)
    whole = claude_turn([{"type": "text", "text": PARTIAL_TEXT}], "end_turn", model)
    return whole[: whole.index(b"event: content_block_stop")]


def claude_has_tool_result(body: dict[str, Any]) -> bool:
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        ):
            return True
    return False


def claude_answer(scenario: str, body: dict[str, Any]) -> bytes:
    model = str(body.get("model") or MODEL_CLAUDE)  # the model asked for, as the API does
    if scenario == "tool" and not claude_has_tool_result(body):
        tool = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": "Write",
            "input": {"file_path": TOOL_FILE, "content": TOOL_FILE_CONTENT},
        }
        return claude_turn([tool], "tool_use", model)
    text = TOOL_REPLY_TEXT if scenario == "tool" else REPLY_TEXT
    return claude_turn([{"type": "text", "text": text}], "end_turn", model)


def codex_has_tool_output(body: dict[str, Any]) -> bool:
    return any(
        isinstance(item, dict) and item.get("type") == "function_call_output"
        for item in body.get("input", [])
    )


def codex_turn(items: list[dict[str, Any]], model: str) -> bytes:
    """The Responses API stream of one response made of ``items``."""
    response_id = f"resp_{uuid.uuid4().hex[:24]}"
    base = {"id": response_id, "object": "response", "model": model, "output": []}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"type": "response.created", "response": {**base,
                                                                        "status": "in_progress"}}),
    ]  # fmt: skip
    for index, item in enumerate(items):
        events.append(
            (
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": index, "item": item},
            )
        )
        if item["type"] == "message":
            text = item["content"][0]["text"]
            events.append(
                (
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                    },
                )
            )
        events.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": index, "item": item},
            )
        )
    usage = {
        "input_tokens": 30,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 9,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 39,
    }
    events.append(
        (
            "response.completed",
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": items, "usage": usage},
            },
        )
    )
    return sse(events)  # fmt: skip


def codex_first_chunk(body: dict[str, Any]) -> bytes:
    """The start of the Responses API text answer: up to the first text delta."""
    model = str(body.get("model") or MODEL_CODEX)
    response = {
        "id": f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "model": model,
        "output": [],
        "status": "in_progress",
    }
    item = {
        "type": "message",
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "role": "assistant",
        "status": "in_progress",
        "content": [],
    }
    return sse([
        ("response.created", {"type": "response.created", "response": response}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
        ("response.output_text.delta", {"type": "response.output_text.delta",
                                        "item_id": item["id"], "output_index": 0,
                                        "content_index": 0, "delta": PARTIAL_TEXT}),
    ])  # fmt: skip


# The start of each API's streamed text answer, by path prefix: what ``cut`` and ``stall``
# send before the connection breaks or falls silent, and what ``malformed`` garbles.
FIRST_CHUNKS: dict[str, Callable[[dict[str, Any]], bytes]] = {
    "/v1/messages": claude_first_chunk,
    "/v1/responses": codex_first_chunk,
}


def first_chunk(path: str, body: dict[str, Any]) -> bytes:
    make = next((f for prefix, f in FIRST_CHUNKS.items() if path.startswith(prefix)), None)
    return make(body) if make is not None else b""


_DATA_LINE = re.compile(rb"^data:.*$", re.MULTILINE)


def garbled(stream: bytes) -> bytes:
    """``stream`` with every SSE data line replaced by text that is not JSON (the event
    names stay, so a client that dispatches on them still tries to parse the data)."""
    return _DATA_LINE.sub(b"data: {this is not json", stream) or b"data: {this is not json\n\n"


def codex_answer(scenario: str, body: dict[str, Any]) -> bytes:
    model = str(body.get("model") or MODEL_CODEX)
    if scenario == "tool" and not codex_has_tool_output(body):
        command = f"printf '%s\\n' '{TOOL_FILE_CONTENT.strip()}' > {TOOL_FILE}"
        call = {
            "type": "function_call",
            "id": f"fc_{uuid.uuid4().hex[:24]}",
            "call_id": f"call_{uuid.uuid4().hex[:24]}",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": command}),
            "status": "completed",
        }
        return codex_turn([call], model)
    text = TOOL_REPLY_TEXT if scenario == "tool" else REPLY_TEXT
    message = {
        "type": "message",
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return codex_turn([message], model)


class _Handler(BaseHTTPRequestHandler):
    server: MockServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the request log says it all

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._handle(self.rfile.read(length) if length else b"")

    def _handle(self, raw: bytes) -> None:
        body: dict[str, Any] = {}
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_raw": raw[:2000].decode("utf-8", "replace")}
        self.server.record(self.command, self.path, dict(self.headers), body)
        scenario = self.server.scenario
        if self.headers.get("upgrade", "").lower() == "websocket":
            self._send(404, "application/json", b'{"error":"no websockets here"}')
        elif "count_tokens" in self.path:
            self._send(200, "application/json", b'{"input_tokens": 12}')
        elif scenario in TRANSPORT_FAULTS:
            self._fault(scenario, first_chunk(self.path, body))
        elif self.path.startswith("/v1/messages"):
            self._answer_claude(scenario, body)
        elif self.path.startswith("/v1/chat/completions"):
            answer_chat(self, scenario, body)
        elif self.path.startswith("/v1/responses"):
            self._answer_codex(scenario, body)
        elif self.path.startswith(GEMINI_PATH) or self.path.startswith(GEMINI_PATH):
            answer_gemini(self, scenario, body)
        else:
            self._send(404, "application/json", b'{"error":"not mocked"}')

    def _fault(self, scenario: str, chunk: bytes) -> None:
        """A transport fault, whatever the API: only ``chunk`` (the start of its text
        answer) is the API's own."""
        self.close_connection = True
        if scenario in ("hang", "close"):
            if scenario == "hang":
                self.server.stopping.wait()
            return  # not a byte: the connection closes when the handler returns
        if scenario == "malformed":
            self._send(200, "text/event-stream", garbled(chunk))
            return
        # cut, stall: a chunked stream (as the APIs stream) that never gets its last chunk.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_mock_{uuid.uuid4().hex[:12]}")
        self.end_headers()
        if chunk:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        self.wfile.flush()
        if scenario == "stall":
            self.server.stopping.wait()
        else:  # cut: drop the connection at once, no terminating chunk
            self.connection.shutdown(socket.SHUT_RDWR)

    def _answer_claude(self, scenario: str, body: dict[str, Any]) -> None:
        if scenario in ANTHROPIC_ERRORS:
            status, kind, message = ANTHROPIC_ERRORS[scenario]
            message = message.format(model=body.get("model") or MODEL_CLAUDE)
            error = {"type": "error", "error": {"type": kind, "message": message}}
            self._send(status, "application/json", json.dumps(error).encode(), scenario)
        else:
            self._send(200, "text/event-stream", claude_answer(scenario, body))

    def _answer_codex(self, scenario: str, body: dict[str, Any]) -> None:
        if scenario in OPENAI_ERRORS:
            status, kind, code, message = OPENAI_ERRORS[scenario]
            message = message.format(model=body.get("model") or MODEL_CODEX)
            error = {"error": {"message": message, "type": kind, "param": None, "code": code}}
            self._send(status, "application/json", json.dumps(error).encode(), scenario)
        else:
            self._send(200, "text/event-stream", codex_answer(scenario, body))

    def _send(self, status: int, content_type: str, payload: bytes, scenario: str = "") -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", f"req_mock_{uuid.uuid4().hex[:12]}")
        if scenario == "429":
            self.send_header("retry-after", "1")
        if scenario == "529":
            self.send_header("x-should-retry", "true")
        self.end_headers()
        self.wfile.write(payload)
        self.wfile.flush()


class MockServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scenario: str, log_path: Path, port: int = 0) -> None:
        if scenario not in SCENARIOS:
            known = ", ".join(SCENARIOS)
            raise ValueError(f"unknown scenario {scenario!r}; known: {known}")
        super().__init__(("127.0.0.1", port), _Handler)
        self.scenario = scenario
        self.log_path = log_path
        self.stopping = threading.Event()
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> None:
        entry = {"t": round(time.time(), 3), "method": method, "path": path,
                 "headers": headers, "body": body}  # fmt: skip
        with self._lock, self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def start(self) -> None:
        threading.Thread(target=self.serve_forever, name="mockapi", daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


# --- OpenAI chat completions (pi) ------------------------------------------------------------

CHAT_ERRORS: dict[str, tuple[int, str, str | None, str]] = {
    **OPENAI_ERRORS,
    "403": (403, "invalid_request_error", None, "You are not allowed to sample from this model"),
    "503": (503, "server_error", None,
            "The engine is currently overloaded, please try again later"),
    "404": (404, "invalid_request_error", "model_not_found",
              "The model `{model}` does not exist or you do not have access to it."),
}  # fmt: skip


def chat_chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-mock",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def chat_has_tool_result(body: dict[str, Any]) -> bool:
    return any(isinstance(m, dict) and m.get("role") == "tool" for m in body.get("messages", []))


# The tool that writes a file, by the name each CLI offers it under on chat completions,
# and its arguments: the first one the request offers is called (``write`` when none is).
CHAT_WRITE_TOOLS: dict[str, dict[str, str]] = {
    "write": {"path": TOOL_FILE, "content": TOOL_FILE_CONTENT},  # pi, OpenCode
    "create": {"path": TOOL_FILE, "file_text": TOOL_FILE_CONTENT},  # Copilot CLI
}


def chat_write_tool(body: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The write tool to call and its arguments; the file is named by the argument the
    request's own tool declares: ``path`` unless it declares another (OpenCode's
    ``filePath``)."""
    offered: dict[str, dict[str, Any]] = {}
    for tool in body.get("tools") or []:
        function = as_dict(tool.get("function")) if isinstance(tool, dict) else {}
        offered[str(function.get("name"))] = function
    name = next((n for n in CHAT_WRITE_TOOLS if n in offered), "write")
    arguments = dict(CHAT_WRITE_TOOLS[name])
    properties = as_dict(as_dict(offered.get(name, {}).get("parameters")).get("properties"))
    if "path" not in properties and "filePath" in properties:
        arguments["filePath"] = arguments.pop("path")
    return name, arguments


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def chat_turn(scenario: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of one streamed answer: a text in two pieces, or a call of the tool that
    writes a file (:data:`CHAT_WRITE_TOOLS`) before the request carries its result."""
    model = str(body.get("model") or "mock-model")
    if scenario == "tool" and not chat_has_tool_result(body):
        name, arguments = chat_write_tool(body)
        call = {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip
        chunks = [chat_chunk(model, {"role": "assistant", "tool_calls": [call]})]
        finish = "tool_calls"
    else:
        text = TOOL_REPLY_TEXT if scenario == "tool" else REPLY_TEXT
        half = len(text) // 2
        chunks = [
            chat_chunk(model, {"role": "assistant", "content": text[:half]}),
            chat_chunk(model, {"content": text[half:]}),
        ]
        finish = "stop"
    usage = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    return [
        *chunks,
        chat_chunk(model, {}, finish),
        {**chat_chunk(model, {}), "choices": [], "usage": usage},
    ]


def chat_sse(chunks: list[dict[str, Any]], done: bool = True) -> bytes:
    data = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks)
    return data + (b"data: [DONE]\n\n" if done else b"")


def answer_chat(handler: _Handler, scenario: str, body: dict[str, Any]) -> None:
    """One ``/v1/chat/completions`` request, answered as ``scenario`` says."""
    if scenario in CHAT_ERRORS:
        status, kind, code, message = CHAT_ERRORS[scenario]
        said = message.format(model=body.get("model"))
        error = {"error": {"message": said, "type": kind, "param": None, "code": code}}
        handler._send(status, "application/json", json.dumps(error).encode(), scenario)
    else:
        handler._send(200, "text/event-stream", chat_sse(chat_turn(scenario, body)))


def chat_first_chunk(body: dict[str, Any]) -> bytes:
    return chat_sse(chat_turn("text", body)[:1], done=False)


FIRST_CHUNKS["/v1/chat/completions"] = chat_first_chunk


# --- the Gemini API (Gemini CLI) -------------------------------------------------------------

GEMINI_PATH = "/v1beta/models/"
MODEL_GEMINI = "gemini-2.5-flash"
# The Google API's error bodies, per scenario: (HTTP status, error.status, error.message).
GEMINI_ERRORS: dict[str, tuple[int, str, str]] = {
    "401": (401, "UNAUTHENTICATED", "Request had invalid authentication credentials."),
    "403": (403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
    "429": (429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota)."),
    "500": (500, "INTERNAL", "An internal error has occurred."),
    "503": (503, "UNAVAILABLE", "The model is overloaded. Please try again later."),
    "400": (
        400,
        "INVALID_ARGUMENT",
        "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576).",
    ),
    "404": (
        404,
        "NOT_FOUND",
        "models/no-such-model is not found for API version v1beta, or is not supported for "
        "generateContent.",
    ),
}


def gemini_model(path: str) -> str:
    """``/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`` → the model."""
    return path[len(GEMINI_PATH) :].split(":", 1)[0]


def gemini_chunk(parts: list[dict[str, Any]], model: str, *, last: bool = False) -> bytes:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if last:
        candidate["finishReason"] = "STOP"
        chunk["usageMetadata"] = {
            "promptTokenCount": 11,
            "candidatesTokenCount": 7,
            "totalTokenCount": 18,
        }
    return f"data: {json.dumps(chunk)}\r\n\r\n".encode()


def gemini_has_function_response(body: dict[str, Any]) -> bool:
    return any(
        isinstance(part, dict) and "functionResponse" in part
        for content in body.get("contents", [])
        if isinstance(content, dict)
        for part in content.get("parts", [])
    )


def gemini_answer(scenario: str, body: dict[str, Any], model: str) -> list[bytes]:
    """The SSE chunks of one turn: a ``write_file`` call, or a text reply in two chunks."""
    if scenario == "tool" and not gemini_has_function_response(body):
        args = {"file_path": TOOL_FILE, "content": TOOL_FILE_CONTENT}
        return [gemini_chunk([{"functionCall": {"name": "write_file", "args": args}}], model,
                             last=True)]  # fmt: skip
    text = TOOL_REPLY_TEXT if scenario == "tool" else REPLY_TEXT
    head, tail = text[: len(text) // 2], text[len(text) // 2 :]
    return [gemini_chunk([{"text": head}], model), gemini_chunk([{"text": tail}], model, last=True)]


def answer_gemini(handler: _Handler, scenario: str, body: dict[str, Any]) -> None:
    """One Gemini API request, as ``scenario`` says (the CLI calls only this endpoint when
    it is given ``-m``; ``:countTokens`` was never seen, and is answered anyway)."""
    model = gemini_model(handler.path)
    if ":countTokens" in handler.path:
        handler._send(200, "application/json", b'{"totalTokens": 12}')
    elif scenario in GEMINI_ERRORS:
        status, name, message = GEMINI_ERRORS[scenario]
        error: dict[str, Any] = {"code": status, "message": message, "status": name}
        if scenario == "429":  # the server's own retry delay, which the CLI honours
            error["details"] = [
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"}
            ]
        handler._send(status, "application/json", json.dumps({"error": error}).encode())
    else:
        _gemini_stream(handler, gemini_answer(scenario, body, model))


def _gemini_stream(handler: _Handler, chunks: list[bytes]) -> None:
    """A body that ends when the connection closes (no length), as the API streams."""
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("connection", "close")
    handler.end_headers()
    for chunk in chunks:
        handler.wfile.write(chunk)
        handler.wfile.flush()
        time.sleep(0.02)
    handler.close_connection = True


def gemini_first_chunk(body: dict[str, Any]) -> bytes:
    return gemini_answer("text", body, MODEL_GEMINI)[0]


FIRST_CHUNKS[GEMINI_PATH] = gemini_first_chunk
