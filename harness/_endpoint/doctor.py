"""Can I train against this endpoint? Each property RL training needs, checked with real requests.

`doctor(base_url, model)` asks the endpoint what a trainer and the agent path will ask of it and
says, per property, pass, fail or warn, with what it saw and the fix:

- chat completions answer; tool calls come back parsed (`tool_calls`), not as text;
- token ids (`return_token_ids`, vLLM's spelling): the prompt's and the completion's ids;
- their faithfulness: across turns the prefix property holds (the second prompt's ids start
  with the first prompt's and completion's ids, so a multi-call episode merges into one sample
  without re-tokenising), and, where the endpoint tokenizes (`POST /tokenize`), the prompt's ids
  equal the chat template's;
- logprobs, one per completion token; streaming; how many requests it serves at once before
  they queue; the model version it names (so an asynchronous trainer can tell stale samples).

The first five are what training needs (`DoctorReport.ok`); streaming, concurrency and the
model version are reported and warned about. The requests go through `openai`'s own client.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness._core.aio import run_sync
from harness._core.errors import EndpointError

Status = Literal["pass", "fail", "warn"]

#: Concurrent requests tried, doubling up to `max_concurrency`.
_LEVELS = (1, 2, 4, 8, 16, 32, 64)
#: A level is served at once when its batch takes at most this many times one request.
_QUEUE_FACTOR = 1.6
_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
_ASK = [{"role": "user", "content": "Say hello in three words."}]
_ASK_TOOL = [{"role": "user", "content": "What is the weather in Paris? Call get_weather."}]


@dataclass(frozen=True)
class DoctorCheck:
    """One property: its status, what the endpoint did, and how to fix a failure.

    Attributes:
        name: The property ("token ids", "prefix property", ...).
        status: "pass", "fail" or "warn".
        detail: What the endpoint answered.
        fix: What to change when it is not "pass" ("" otherwise).
        needed: Whether training needs it (a "fail" then fails the report).
    """

    name: str
    status: Status
    detail: str
    fix: str = ""
    needed: bool = True


@dataclass
class DoctorReport:
    """What `doctor` found at one endpoint, for one model.

    Attributes:
        base_url: The endpoint.
        model: The model asked.
        checks: One `DoctorCheck` per property, in the order they were checked.
    """

    base_url: str
    model: str
    checks: list[DoctorCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Whether every property training needs passed."""
        return not any(c.needed and c.status == "fail" for c in self.checks)

    def check(self, name: str) -> DoctorCheck:
        """The check named `name`."""
        for found in self.checks:
            if found.name == name:
                return found
        raise KeyError(f"no check named {name!r}; the checks are {[c.name for c in self.checks]}")

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data."""
        return {"base_url": self.base_url, "model": self.model, "ok": self.ok, "checks": [asdict(c) for c in self.checks]}  # fmt: skip

    def __rich__(self) -> Any:
        from rich.table import Table  # the terminal's library, loaded when a report is shown
        from rich.text import Text

        table = Table(title=f"{self.model} at {self.base_url}", title_justify="left")
        for column in ("property", "status", "what it answered", "fix"):
            table.add_column(column, overflow="fold")
        style = {"pass": "green", "fail": "bold red", "warn": "yellow"}
        for c in self.checks:
            name = c.name if c.needed else f"{c.name} (not needed)"
            table.add_row(Text(name), Text(c.status, style=style[c.status]), Text(c.detail), Text(c.fix))
        return table


class _Probe:
    """The requests of one doctor run, through one `openai.AsyncOpenAI` client."""

    def __init__(self, base_url: str, model: str, api_key: str, timeout: float) -> None:
        import openai  # the established client for the protocol; loaded only when a doctor runs

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.client = openai.AsyncOpenAI(
            base_url=self.base_url, api_key=api_key, timeout=timeout, max_retries=0
        )
        self.first: dict[str, Any] | None = None  # the token-id answer the faithfulness checks reuse

    async def chat(self, messages: Sequence[dict[str, Any]], **options: Any) -> Any:
        extra = options.pop("extra_body", None)
        return await self.client.chat.completions.with_raw_response.create(
            model=self.model,
            messages=list(messages),  # type: ignore[arg-type]  # plain dicts, as the wire has them
            max_tokens=32,
            extra_body=extra,
            **options,
        )

    async def close(self) -> None:
        await self.client.close()


def _failure(name: str, exc: Exception, fix: str, needed: bool = True) -> DoctorCheck:
    said = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return DoctorCheck(name, "fail", f"{type(exc).__name__}: {said}"[:300], fix, needed)


async def _chat_completions(probe: _Probe) -> DoctorCheck:
    name = "chat completions"
    try:
        raw = await probe.chat(_ASK)
        reply = raw.parse()
    except Exception as exc:
        return _failure(name, exc, "serve OpenAI's POST /v1/chat/completions for this model")
    if not reply.choices:
        return DoctorCheck(name, "fail", "an answer with no choices", "return at least one choice")
    text = (reply.choices[0].message.content or "")[:60]
    return DoctorCheck(name, "pass", f"answered {text!r} ({reply.choices[0].finish_reason})")


async def _tool_calls(probe: _Probe) -> DoctorCheck:
    name = "tool calls"
    fix = (
        "serve with the tool-call parser of the model's family (vLLM: --enable-auto-tool-choice "
        "--tool-call-parser hermes|llama3_json|mistral|...; SGLang: --tool-call-parser)"
    )
    try:
        message = (await probe.chat(_ASK_TOOL, tools=[_TOOL])).parse().choices[0].message
    except Exception as exc:
        return _failure(name, exc, fix)
    calls = message.tool_calls or []
    if calls:
        call = calls[0]
        try:
            arguments = json.loads(call.function.arguments)
        except (TypeError, ValueError):
            return DoctorCheck(name, "fail", f"arguments are not JSON: {call.function.arguments!r}", fix)
        return DoctorCheck(name, "pass", f"parsed {call.function.name}({json.dumps(arguments)})")
    text = message.content or ""
    if "get_weather" in text or "<tool_call>" in text:
        return DoctorCheck(name, "fail", f"the call came back as text: {text[:80]!r}", fix)
    return DoctorCheck(name, "warn", f"the model answered without a call: {text[:80]!r}", "try a model trained for tools", needed=False)  # fmt: skip


def _ids(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(i, int) for i in value):
        return value
    return None


async def _token_ids(probe: _Probe) -> DoctorCheck:
    name = "token ids"
    fix = "serve token ids the vLLM way (vLLM >= 0.10.2 returns them for return_token_ids: true)"
    try:
        raw = await probe.chat(_ASK, logprobs=True, extra_body={"return_token_ids": True})
        body = json.loads(raw.http_response.text)
    except Exception as exc:
        return _failure(name, exc, fix)
    prompt = _ids(body.get("prompt_token_ids"))
    completion = _ids((body.get("choices") or [{}])[0].get("token_ids"))
    if prompt is None or completion is None:
        missing = [
            n for n, v in (("prompt_token_ids", prompt), ("choices[0].token_ids", completion)) if v is None
        ]
        return DoctorCheck(name, "fail", f"no {' or '.join(missing)} in the answer", fix)
    probe.first = body
    return DoctorCheck(name, "pass", f"{len(prompt)} prompt and {len(completion)} completion ids")


async def _prefix(probe: _Probe) -> DoctorCheck:
    name = "prefix property"
    if probe.first is None:
        return DoctorCheck(name, "fail", "not checked: no token ids", "fix token ids first")
    first = probe.first
    prompt, completion = first["prompt_token_ids"], first["choices"][0]["token_ids"]
    reply = first["choices"][0]["message"]
    history = [*_ASK, {"role": "assistant", "content": reply.get("content") or ""}]
    history.append({"role": "user", "content": "Now in two words."})
    try:
        body = json.loads(
            (await probe.chat(history, extra_body={"return_token_ids": True})).http_response.text
        )
    except Exception as exc:
        return _failure(name, exc, "answer a second turn with token ids")
    second = _ids(body.get("prompt_token_ids")) or []
    expected = [*prompt, *completion]
    if second[: len(expected)] == expected:
        return DoctorCheck(
            name, "pass", f"turn 2's {len(second)} prompt ids start with turn 1's {len(expected)}"
        )
    at = next(
        (i for i, (a, b) in enumerate(zip(second, expected)) if a != b), min(len(second), len(expected))
    )
    return DoctorCheck(
        name,
        "fail",
        f"turn 2's prompt ids differ from turn 1's prompt + completion at token {at} of {len(expected)}",
        "use a chat template that renders earlier assistant turns exactly as generated (no "
        "stripped reasoning, no re-rendered end tokens), or train per call (no merged samples)",
    )


async def _template(probe: _Probe) -> DoctorCheck:
    name = "chat template"
    if probe.first is None:
        return DoctorCheck(name, "fail", "not checked: no token ids", "fix token ids first")
    root = probe.base_url.removesuffix("/v1")
    try:
        answer = await probe.client.post(
            f"{root}/tokenize", cast_to=object, body={"model": probe.model, "messages": _ASK}
        )
    except Exception as exc:
        return DoctorCheck(
            name,
            "warn",
            f"not checked: no POST /tokenize ({type(exc).__name__})",
            "serve vLLM's /tokenize to check it",
            needed=False,
        )
    tokens = (_ids(answer.get("tokens")) if isinstance(answer, dict) else None) or []
    if tokens == probe.first["prompt_token_ids"]:
        return DoctorCheck(name, "pass", f"/tokenize gives the same {len(tokens)} prompt ids")
    return DoctorCheck(
        name,
        "fail",
        f"/tokenize gives {len(tokens)} ids, the answer's prompt {len(probe.first['prompt_token_ids'])}",
        "serve the model with the chat template it was trained with (vLLM: --chat-template)",
    )


async def _logprobs(probe: _Probe) -> DoctorCheck:
    name = "logprobs"
    fix = "serve logprobs (vLLM: on by default, up to --max-logprobs)"
    try:
        ids = {"return_token_ids": True} if probe.first is not None else None  # to count tokens
        raw = await probe.chat(_ASK, logprobs=True, extra_body=ids)
        choice = (json.loads(raw.http_response.text).get("choices") or [{}])[0]
    except Exception as exc:
        return _failure(name, exc, fix)
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return DoctorCheck(name, "fail", "no logprobs in the answer", fix)
    completion = _ids(choice.get("token_ids"))
    if completion is not None and len(content) != len(completion):
        return DoctorCheck(name, "fail", f"{len(content)} logprobs for {len(completion)} tokens", fix)
    return DoctorCheck(name, "pass", f"{len(content)} logprobs" + (", one per token" if completion else ""))


async def _streaming(probe: _Probe) -> DoctorCheck:
    name = "streaming"
    try:
        stream = await probe.client.chat.completions.create(
            model=probe.model,
            messages=list(_ASK),  # type: ignore[arg-type]  # plain dicts, as the wire has them
            max_tokens=32,
            stream=True,
        )
        chunks: list[Any] = [chunk async for chunk in stream]  # type: ignore[union-attr]  # stream=True
    except Exception as exc:
        return _failure(name, exc, "serve stream: true (server-sent events)", needed=False)
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    return DoctorCheck(name, "pass", f"{len(chunks)} chunks, {text[:40]!r}", needed=False)


async def _concurrency(probe: _Probe, most: int) -> DoctorCheck:
    name = "concurrency"

    async def batch(size: int) -> float:
        start = time.perf_counter()
        await asyncio.gather(*(probe.chat(_ASK) for _ in range(size)))
        return time.perf_counter() - start

    try:
        one = min([await batch(1) for _ in range(2)])
        served = 1
        for level in (n for n in _LEVELS if 1 < n <= most):
            if await batch(level) > _QUEUE_FACTOR * one + 0.05:
                break
            served = level
    except Exception as exc:
        return _failure(name, exc, "serve concurrent requests", needed=False)
    detail = f"{served} at once before requests queue ({one * 1000:.0f} ms for one)"
    if served == 1:
        return DoctorCheck(name, "warn", detail, "serve requests concurrently (batching), or rollouts run one at a time", needed=False)  # fmt: skip
    return DoctorCheck(name, "pass", detail + (" or more" if served == max(n for n in _LEVELS if n <= most) else ""), needed=False)  # fmt: skip


async def _model_version(probe: _Probe) -> DoctorCheck:
    name = "model version"
    try:
        raw = await probe.chat(_ASK)
        reply = raw.parse()
    except Exception as exc:
        return _failure(name, exc, "answer chat completions", needed=False)
    header = next(
        (raw.headers[h] for h in ("x-model-version", "x-weights-version") if h in raw.headers), None
    )
    named = [f"model {reply.model!r}"]
    if reply.system_fingerprint:
        named.append(f"system_fingerprint {reply.system_fingerprint!r}")
    if header:
        named.append(f"header {header!r}")
    if reply.system_fingerprint or header:
        return DoctorCheck(name, "pass", ", ".join(named), needed=False)
    return DoctorCheck(
        name,
        "warn",
        f"only the model name ({reply.model!r}): no system_fingerprint or version header",
        "have the server name its weights' version (system_fingerprint), so an asynchronous "
        "trainer can tell stale samples",
        needed=False,
    )


async def adoctor(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str = "EMPTY",
    timeout: float = 60.0,
    max_concurrency: int = 16,
) -> DoctorReport:
    """Check an OpenAI-compatible endpoint for what RL training needs (see the module doc).

    Args:
        base_url: The endpoint, e.g. "http://127.0.0.1:8000/v1".
        model: The model to ask; by default the first one `GET /models` lists.
        api_key: The key to send.
        timeout: Seconds for each request.
        max_concurrency: The most concurrent requests the concurrency check sends.

    Returns:
        A `DoctorReport`: one check per property; `report.ok` when training's needs pass.

    Raises:
        EndpointError: nothing answers at `base_url`, or it lists no model to check.
    """
    probe = _Probe(base_url, model or "", api_key, timeout)
    try:
        if not model:
            probe.model = await _first_model(probe)
        report = DoctorReport(probe.base_url, probe.model)
        steps: list[Callable[[], Awaitable[DoctorCheck]]] = [
            lambda: _chat_completions(probe),
            lambda: _tool_calls(probe),
            lambda: _token_ids(probe),
            lambda: _prefix(probe),
            lambda: _template(probe),
            lambda: _logprobs(probe),
            lambda: _streaming(probe),
            lambda: _concurrency(probe, max_concurrency),
            lambda: _model_version(probe),
        ]
        for step in steps:
            report.checks.append(await step())
            if report.checks[0].status == "fail":  # no chat at all: the rest would say the same
                break
        return report
    finally:
        await probe.close()


async def _first_model(probe: _Probe) -> str:
    try:
        listed = [m.id async for m in probe.client.models.list()]
    except Exception as exc:
        raise EndpointError(
            f"cannot list the models at {probe.base_url} ({type(exc).__name__}: {exc}); "
            "start the server, fix the URL, or name the model with -m"
        ) from None
    if not listed:
        raise EndpointError(f"{probe.base_url} lists no model; name one with -m")
    return listed[0]


def doctor(
    base_url: str,
    model: str | None = None,
    *,
    api_key: str = "EMPTY",
    timeout: float = 60.0,
    max_concurrency: int = 16,
) -> DoctorReport:
    """Check an OpenAI-compatible endpoint for what RL training needs; synchronous `adoctor`
    (works inside a running event loop, as in Jupyter).

    Args:
        base_url: The endpoint, e.g. "http://127.0.0.1:8000/v1".
        model: The model to ask; by default the first one `GET /models` lists.
        api_key: The key to send.
        timeout: Seconds for each request.
        max_concurrency: The most concurrent requests the concurrency check sends.

    Returns:
        A `DoctorReport`: one check per property; `report.ok` when training's needs pass.

    Raises:
        EndpointError: nothing answers at `base_url`, or it lists no model to check.
    """
    return run_sync(
        adoctor(base_url, model, api_key=api_key, timeout=timeout, max_concurrency=max_concurrency)
    )


__all__ = ["DoctorCheck", "DoctorReport", "adoctor", "doctor"]
