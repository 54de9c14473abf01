"""lirun's provider for the parrot agent CLI: the worked example of docs/providers.md.

One class says what parrot is and how to run it headless (``ParrotProvider``), one reads
its stream (``ParrotStreamParser``). The entry point ``parrot`` in the group
``lirun.providers`` (pyproject.toml) is all lirun needs to find them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from lirun.exec.failure_text import class_for_status, class_for_text
from lirun.exec.stream import Event, StreamParser, as_dict, as_int, as_str
from lirun.provider_errors import classified_error
from lirun.providers.base import Capabilities, OptionKind, OptionValue, Provider


class ParrotStreamParser(StreamParser):
    """``start`` names the session and model, ``say`` is the reply, ``end`` is terminal."""

    provider = "parrot"

    def _handle(self, obj: dict[str, Any]) -> list[Event]:
        kind = obj.get("type")
        if kind == "start":
            self._set_session_uid(obj.get("session"), replace=True)
            self.model = as_str(obj.get("model"))
            data = {"engine_session_uid": self.engine_session_uid, "model": self.model}
            return [Event("session", data)]
        if kind == "say":
            return [self._note_assistant_text(str(obj.get("text", "")))]
        if kind == "end":
            return self._end(obj)
        return self._ignore(str(kind))

    def _end(self, obj: dict[str, Any]) -> list[Event]:
        tokens = as_dict(obj.get("tokens"))
        self.usage = {"input_tokens": tokens.get("input"), "output_tokens": tokens.get("output")}
        failure = None
        if obj.get("ok") is not True:
            message = as_str(obj.get("error")) or "parrot ended without ok"
            status = as_int(obj.get("status"))
            self._note_error(message)
            failure = classified_error(
                message,
                provider=self.provider,
                failure_class=class_for_status(status) or class_for_text(message),
                retryable=False,
                detail={"status": status},
            )
        summary = {"kind": "provider_end", "provider": self.provider, "ok": obj.get("ok")}
        self._record_terminal(summary, failure)
        return [Event("terminal", obj)]


class ParrotProvider(Provider):
    """parrot (``parrot --json``, the prompt on stdin)."""

    name = "parrot"
    package = "parrot-cli"
    tested_versions = ("1.2.0", "1.2.0")
    capabilities = Capabilities(resume=True, session_id=True)
    options: ClassVar[Mapping[str, OptionKind]] = {"voice": "text"}
    owned_flags: ClassVar[Mapping[str, str]] = {"--json": "lirun runs parrot --json itself"}

    def command(
        self,
        executable: str,
        *,
        model: str | None = None,
        resume: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> list[str]:
        argv = [executable, "--json"]
        if model:
            argv += ["--model", model]
        if resume:
            argv += ["--resume", resume]
        return [*argv, *extra_args]

    def new_parser(self) -> ParrotStreamParser:
        return ParrotStreamParser()

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        return {"PARROT_HEADLESS": "1"}  # what a headless run needs beside the user's own

    def option_args(
        self, values: Mapping[str, OptionValue], provider_args: Sequence[str]
    ) -> list[str]:
        voice = ["--voice", str(values["voice"])] if "voice" in values else []
        return [*voice, *provider_args]
