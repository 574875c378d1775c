"""Shared fakes for tests: small environments implementing harness._core.protocol.EnvironmentProtocol,
with matching scripted-endpoint policies, so the rollout loop and evaluate are tested without `envs`;
`serve_pypiserver`, a real package index on 127.0.0.1 for the hub tests; `run`, the real
`rubric` executable in a subprocess (`at_a_terminal`: with a terminal to answer it); `serving` /
`rubric_serve`, a server in a subprocess; `code_block`, a README or docs/ code block by its content;
`processes_with`, what a test left running; `Reaped`, a command run under a subreaper, which lists
every process it left behind; `build_rubric_wheel`, this project's wheel; and
`ensure_openenv_side_python`, OpenEnv 0.10 in a cached venv of its own.

Their own sanity tests live in tests/harness/test_helpers.py.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import venv
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import filelock
import platformdirs

from harness import Message, Rollout


class FakeEnv:
    """Single-turn: "What is A+B?" -> reward 1.0 when the reply is the sum."""

    name = "fake-single"

    def __init__(
        self,
        n: int = 6,
        *,
        max_turns: int = 1,
        sampling: Mapping[str, Any] | None = None,
        score_raises: bool = False,
        setup_raises: bool = False,
        stop_when: str | None = None,
    ) -> None:
        self.n = n
        self.max_turns = max_turns
        self.sampling = dict(sampling or {})
        self.score_raises = score_raises
        self.setup_raises = setup_raises
        self.stop_when = stop_when

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def get_dataset(
        self, split: str = "eval", n: int | None = None, seed: int | None = None
    ) -> Iterable[Mapping[str, Any]]:
        rows = [
            {"example_id": i, "question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)}
            for i in range(self.n)
        ]
        if seed is not None:
            rows = rows[seed % len(rows) :] + rows[: seed % len(rows)]
        return rows[:n] if n is not None else rows

    async def setup_rollout(self, example: Mapping[str, Any], rollout_index: int = 0) -> Rollout:
        if self.setup_raises:
            raise KeyError("question")
        return Rollout(
            example_id=example["example_id"],
            rollout_index=rollout_index,
            prompt=[Message(role="user", content=example["question"])],
            answer=example["answer"],
            state={"feedback": 0},
        )

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        return None

    async def stop_reason(self, rollout: Rollout) -> str | None:
        if self.stop_when and self.stop_when in rollout.response:
            return "said_stop_word"
        return None

    async def score(self, rollout: Rollout) -> None:
        if self.score_raises:
            raise RuntimeError("rubric exploded")
        correct = 1.0 if rollout.response.strip() == str(rollout.answer) else 0.0
        rollout.scores = {"correct": correct, "correct.exact": correct}
        rollout.reward = correct

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "n": self.n, "max_turns": self.max_turns}


class ToolFakeEnv(FakeEnv):
    """Tool use: the model calls add(a, b), gets the sum back, then answers."""

    name = "fake-tool"

    def __init__(
        self, n: int = 6, *, max_turns: int = 4, respond_raises: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(n, max_turns=max_turns, **kwargs)
        self.respond_raises = respond_raises

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "required": ["a", "b"],
                    },
                },
            }
        ]

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        last = rollout.completion[-1]
        if not last.tool_calls:
            return None
        if self.respond_raises:
            raise ValueError("tool runner bug")
        out = []
        for call in last.tool_calls:
            args = json.loads(call.arguments)
            out.append(
                Message(role="tool", tool_call_id=call.id, name=call.name, content=str(args["a"] + args["b"]))
            )
        return out


class MultiTurnFakeEnv(FakeEnv):
    """Guessing game: the env answers "higher"/"lower" until the model names the number."""

    name = "fake-multi"

    def __init__(self, n: int = 4, *, max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(n, max_turns=max_turns, **kwargs)

    def get_dataset(
        self, split: str = "eval", n: int | None = None, seed: int | None = None
    ) -> Iterable[Mapping[str, Any]]:
        rows = [
            {"example_id": f"g{i}", "question": "Guess my number between 0 and 15.", "answer": str(3 * i + 2)}
            for i in range(self.n)
        ]
        return rows[:n] if n is not None else rows

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        guess = int(rollout.response.strip())
        target = int(rollout.answer)
        rollout.state["guesses"] = rollout.state.get("guesses", 0) + 1
        if guess == target:
            return [Message(role="user", content="correct")]
        return [Message(role="user", content="higher" if guess < target else "lower")]

    async def stop_reason(self, rollout: Rollout) -> str | None:
        last = rollout.completion[-1] if rollout.completion else None
        if last is not None and last.role == "user" and last.content == "correct":
            return "solved"
        return None

    async def score(self, rollout: Rollout) -> None:
        rollout.reward = 1.0 if rollout.stop_reason == "solved" else 0.0
        rollout.scores = {"solved": rollout.reward}


@dataclass(frozen=True)
class FakeSource:
    """How a worker builds a SpecFakeEnv again (`harness._core.protocol.EnvironmentSource`)."""

    spec: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self, *, worker: bool = False) -> SpecFakeEnv:
        return load_fake(self.spec, **self.kwargs)

    def __str__(self) -> str:
        return self.spec


class SpecFakeEnv(FakeEnv):
    """FakeEnv that a worker can rebuild from its source; it can kill its own worker once."""

    def __init__(
        self, n: int = 6, *, die_on: int | None = None, marker: str | None = None, lock_on: int | None = None
    ) -> None:
        super().__init__(n)
        self.die_on, self.marker, self.lock_on = die_on, marker, lock_on
        self.source: FakeSource | None = None
        self.provenance: dict[str, Any] | None = None

    async def setup_rollout(self, example: Any, rollout_index: int = 0) -> Rollout:
        if example["example_id"] == self.die_on and (self.marker is None or not os.path.exists(self.marker)):
            if self.marker is not None:
                Path(self.marker).write_text(str(os.getpid()))
            await asyncio.sleep(0.2)  # let the worker's other rollouts be in flight when it dies
            os.kill(os.getpid(), signal.SIGKILL)
        rollout = await super().setup_rollout(example, rollout_index)
        if example["example_id"] == self.lock_on:
            rollout.state["lock"] = threading.Lock()  # state that cannot leave the worker
        return rollout


def load_fake(spec: str, **kwargs: Any) -> SpecFakeEnv:
    env = SpecFakeEnv(**kwargs)
    env.source = FakeSource(spec, dict(kwargs))
    return env


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


def _head(length: int) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + f"content-length: {length}\r\n\r\n".encode()
    )


@contextlib.asynccontextmanager
async def raw_server(
    body: bytes | None = None, *, drip: float | None = None
) -> AsyncIterator[tuple[str, list[int]]]:
    """A deliberately broken HTTP/1.1 endpoint on 127.0.0.1 (the real scripted endpoint never
    sends bytes this wrong): answers every request with `body`, or drips a valid body."""
    hits: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await _read_request(reader)
                hits.append(1)
                if drip is None:
                    writer.write(_head(len(body or b"")) + (body or b""))
                    await writer.drain()
                    continue
                payload = (
                    b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * 200 + b'"}}]}'
                )
                writer.write(_head(len(payload)))
                for byte in payload:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(drip)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client hung up, or the server is shutting down
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", hits
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


def sum_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
    """Answers "What is A+B?": with tools, calls add first, then repeats the tool's result."""
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    a, b = map(int, re.findall(r"\d+", question))
    if tools:
        return {"tool_calls": [{"function": {"name": "add", "arguments": {"a": a, "b": b}}}]}
    return str(a + b)


def bisect_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """Binary search over 0..15 driven by the env's "higher"/"lower" replies."""
    low, high = 0, 15
    guess = None
    for m in messages:
        if m["role"] == "assistant":
            guess = int(m["content"])
        elif m["role"] == "user" and guess is not None:
            if m["content"] == "higher":
                low = guess + 1
            elif m["content"] == "lower":
                high = guess - 1
    return str((low + high) // 2)


@contextlib.asynccontextmanager
async def serve(
    policy: Any,
    *,
    max_retries: int = 2,
    max_concurrency: int = 64,
    timeout: float = 20.0,
    **endpoint_kwargs: Any,
) -> AsyncIterator[tuple[Any, Any]]:
    """A scripted endpoint on 127.0.0.1 and a real harness Client (near-instant retry backoff)
    pointed at it."""
    from harness import Client, ScriptedEndpoint

    with ScriptedEndpoint(policy, **endpoint_kwargs) as endpoint:
        async with Client(
            "scripted",
            base_url=endpoint.base_url,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            timeout=timeout,
            backoff_base=0.005,
            backoff_max=0.02,
        ) as client:
            yield endpoint, client


# ---------------------------------------------------------------------------------------------
# a real package index (pypiserver) on 127.0.0.1, for the hub tests


@dataclass(frozen=True)
class HubServer:
    """A running pypiserver: its base URL, upload credentials and package folder."""

    url: str
    user: str
    password: str
    packages: Path


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes with `marker` as one word of their command line, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if marker.encode() in words and state != "Z":
            found.append(int(entry.name))
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_pypiserver(
    folder: Path, *, user: str = "alice", password: str = "wonderland"
) -> Iterator[HubServer]:
    """Run `pypiserver` in a subprocess on a free loopback port with an htpasswd file; stop it after.

    Uploads need the credentials (`-a update`); reads are open; no fallback to PyPI.
    """
    import warnings

    with warnings.catch_warnings():  # passlib imports the deprecated `crypt` module
        warnings.simplefilter("ignore", DeprecationWarning)
        from passlib.apache import HtpasswdFile

    packages = folder / "packages"
    packages.mkdir(parents=True, exist_ok=True)
    htpasswd = HtpasswdFile(str(folder / "htpasswd"), new=True)
    htpasswd.set_password(user, password)
    htpasswd.save()
    port = _free_port()
    log = (folder / "pypiserver.log").open("wb")
    command = [sys.executable, "-m", "pypiserver", "run", "-i", "127.0.0.1", "-p", str(port)]
    command += ["-P", str(folder / "htpasswd"), "-a", "update", "--disable-fallback", str(packages)]
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(url + "/simple/", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"pypiserver did not start: {(folder / 'pypiserver.log').read_text()}"
                    ) from None
                time.sleep(0.1)
        yield HubServer(url=url, user=user, password=password, packages=packages)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()


# ---------------------------------------------------------------- a tiny chat model for TRL tests
TINY_CORPUS = (
    "You are a helpful assistant. What is 2 + 2? What is 3 + 3? The answer is 4. Look up the word cat. "
    '<tool_response> {"name": "lookup", "arguments": {"word": "cat"}} system user assistant tools '
    "function description parameters properties required string type object Returns Args"
)


def tiny_chat_model(reply: str) -> tuple[Any, Any]:
    """A randomly initialised 1-layer Qwen2 and a tokenizer built here (nothing downloaded).

    The model answers every chat prompt with exactly `reply` and then `<|im_end|>`: attention
    and MLP outputs are zeroed, so each next token depends only on the current token, and the
    output head maps the generation prompt's last token to `reply` (one added token) and
    `reply` to end-of-turn, with a margin that makes sampling at temperature 1 deterministic.
    The tokenizer is byte-level BPE trained in memory with TRL's bundled Qwen2.5 chat template,
    which TRL knows how to parse tool calls from.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
    from trl.chat_template_utils import qwen2_5_chat_template

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator([TINY_CORPUS] * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.add_tokens([reply])
    tokenizer.chat_template = qwen2_5_chat_template
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    last = prompt["input_ids"][-1] if isinstance(prompt, Mapping) else prompt[-1]
    reply_id = tokenizer.convert_tokens_to_ids(reply)

    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=1024,
        tie_word_embeddings=False,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config)
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        head = model.lm_head.weight
        head.zero_()
        embeddings = model.model.embed_tokens.weight
        for current, following in ((last, reply_id), (reply_id, tokenizer.eos_token_id)):
            normed = embeddings[current] / embeddings[current].pow(2).mean().sqrt()  # what RMSNorm gives
            head[following] += 100.0 * normed / normed.pow(2).sum()
    return model, tokenizer


def grpo_config(output_dir: Any, **overrides: Any) -> Any:
    """GRPOConfig for a 2-step CPU run: 2 completions per prompt, short, nothing reported."""
    from trl import GRPOConfig

    options: dict[str, Any] = {
        "output_dir": str(output_dir),
        "max_steps": 2,
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 16,
        "learning_rate": 1e-3,
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "seed": 0,
        "dataloader_num_workers": 0,
    }
    options.update(overrides)
    return GRPOConfig(**options)


# ---------------------------------------------------------------------------------------------
# the command line and the README

#: The installed `rubric` console script (None when the project is not installed).
RUBRIC = shutil.which("rubric")
README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """`rubric *args` in a subprocess, wide enough that rich does not wrap what tests read."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [RUBRIC or "rubric", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def at_a_terminal(
    *args: str, cwd: Path, answer: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`rubric *args` with a pseudo-terminal as stdin, answering its [y/N] question with `answer`."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, f"{answer}\n".encode())
        return subprocess.run(
            [RUBRIC or "rubric", *args],
            cwd=cwd,
            env={**os.environ, "COLUMNS": "200", **(env or {})},
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(leader)
        os.close(follower)


@dataclass
class ServerProcess:
    """A server running in a subprocess (see `serving`); `stop()` ends it and returns its stdout
    and stderr (again on later calls)."""

    proc: subprocess.Popen[str]
    output: tuple[str, str] | None = None

    def stop(self) -> tuple[str, str]:
        if self.output is None:
            self.proc.terminate()
            try:
                self.output = self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.output = self.proc.communicate(timeout=10)
        return self.output


@contextlib.contextmanager
def serving(
    command: list[str], port: int, *, env: Mapping[str, str] | None = None, timeout: float = 60
) -> Iterator[ServerProcess]:
    """`command` run as a server in a subprocess (`env` added to its environment), yielded once
    it accepts connections on 127.0.0.1:`port` (within `timeout` seconds); stopped after the block."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    server = ServerProcess(proc)
    deadline = time.monotonic() + timeout
    try:
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start listening on {port}: {server.stop()}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def rubric_serve(*args: str) -> Iterator[str]:
    """`rubric serve ARGS --port P` in a subprocess; its URL once it accepts connections.

    After the block it checks that the server said where it served and logged no traceback
    (a client ending its session is no error)."""
    port = _free_port()
    with serving([str(RUBRIC), "serve", *args, "--port", str(port)], port) as server:
        yield f"http://127.0.0.1:{port}"
    out, err = server.stop()
    assert f"to OpenEnv clients at http://127.0.0.1:{port}" in out
    assert "Traceback" not in err


# Runs COMMAND as a child subreaper (Linux): every process COMMAND leaves behind, even one that
# started a session of its own, is re-parented here. Prints COMMAND's pid, waits for it, gives
# what it left SETTLE seconds to go, then prints {"returncode": ..., "left": {pid: cmdline}} and
# kills what is left. Arguments: SETTLE LOGFILE COMMAND...
_SUBREAPER = """
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
settle, log = float(sys.argv[1]), open(sys.argv[2], "wb")
child = subprocess.Popen(sys.argv[3:], stdout=log, stderr=subprocess.STDOUT)
print(child.pid, flush=True)
code = child.wait()

def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return

def ours():
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            state, ppid = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[:2]
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        if int(ppid) == os.getpid() and state != "Z":
            found[entry] = cmdline.strip()
    return found

deadline = time.monotonic() + settle
while ours() and time.monotonic() < deadline:
    reap()
    time.sleep(0.1)
left = ours()
for pid in left:
    os.kill(int(pid), signal.SIGKILL)
time.sleep(0.2)
reap()
print(json.dumps({"returncode": code, "left": left}), flush=True)
"""


@dataclass
class Reaped:
    """A command run under a subreaper (`Reaped.start`), so that what it leaves behind is seen.

    `pid` is the command's own pid (signal it); `finish()` waits for it and returns its exit
    code and the processes it left (pid -> command line), which are then killed.
    """

    wrapper: subprocess.Popen[str]
    pid: int
    log: Path

    @classmethod
    def start(
        cls,
        command: list[str],
        *,
        log: Path,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        settle: float = 10,
    ) -> Reaped:
        wrapper = subprocess.Popen(
            [sys.executable, "-c", _SUBREAPER, str(settle), str(log), *command],
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        assert wrapper.stdout is not None
        return cls(wrapper, int(wrapper.stdout.readline()), log)

    def running(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state != "Z"

    def finish(self, timeout: float = 120) -> tuple[int, dict[str, str]]:
        out, _ = self.wrapper.communicate(timeout=timeout)
        report = json.loads(out.strip().splitlines()[-1])
        return report["returncode"], report["left"]


def code_block(language: str, containing: str) -> str:
    """The one code block in `language` of README.md or a docs/ page that contains `containing`
    (a block shown word for word in both counts once)."""
    sources = [README, *DOCS.values()]
    matches = sorted({b for text in sources for b in fenced_blocks(text, language) if containing in b})
    assert len(matches) == 1, f"expected one {language} block containing {containing!r}, found {len(matches)}"
    return matches[0]


def fenced_blocks(text: str, language: str) -> list[str]:
    """The code blocks of a Markdown text fenced exactly ```` ```language ```` (a fence with
    attributes, such as ```` ```python title="not run" ````, is not one of them)."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


#: The documentation site's pages (docs/, built by mkdocs.yml), by path relative to docs/.
DOCS_DIR = Path(__file__).resolve().parents[1] / "docs"
DOCS = {str(path.relative_to(DOCS_DIR)): path.read_text() for path in sorted(DOCS_DIR.rglob("*.md"))}
#: README.md and every docs/ page, for tests that check what the text says about an example.
DOCUMENTED = "\n".join([README, *DOCS.values()])


def blocks_run_by_tests() -> set[str]:
    """The `containing` strings the tests pass to `code_block`: the README and docs blocks run
    by a test of their own (with the servers or files they need) rather than as they stand."""
    found = set()
    for path in Path(__file__).resolve().parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "code_block"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                found.add(node.args[1].value)
    return found


# ---------------------------------------------------------------- this project as a user installs it
TREE = Path(__file__).resolve().parents[1]


def build_rubric_wheel(folder: Path) -> Path:
    """rubric-rl's wheel built offline from a copy of the working tree (so the build leaves
    nothing in it) with the build backend installed here; the wheel's path, in `folder`."""
    source = folder / "source"
    shutil.copytree(
        TREE, source, ignore=shutil.ignore_patterns(".git", "runs", "build", "dist", "*.egg-info", ".*cache")
    )
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run(
        [*command, "-w", str(folder / "wheels"), str(source)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (folder / "wheels").glob("rubric_rl-*.whl")
    return wheel


# ---------------------------------------------------------------- OpenEnv 0.10 in a venv of its own
OPENENV_SIDE_VERSION = "0.10.0"


def openenv_side_venv() -> Path:
    """Where the test session keeps OpenEnv 0.10's venv: the user's cache folder, so it is
    made once per machine and reused by every later session."""
    cache = Path(platformdirs.user_cache_dir("rubric-rl"))
    return cache / f"openenv-{OPENENV_SIDE_VERSION}-venv"


def ensure_openenv_side_python() -> str:
    """The python of a venv holding OpenEnv 0.10, for the cross-version tests: $RUBRIC_OPENENV_PYTHON
    when set, else the cached venv of `openenv_side_venv()`, made here when missing.

    Made under a file lock, so parallel test workers wait for one maker; a `complete` marker,
    written last, tells a finished venv from one an interrupted session left half made (that
    one is made again). pip uses its configured index and cache; nothing of the checkout is on
    its path. Raises RuntimeError with pip's output when the venv cannot be made."""
    given = os.environ.get("RUBRIC_OPENENV_PYTHON")
    if given:
        return given
    target = openenv_side_venv()
    python, marker = target / "bin" / "python", target / "complete"
    target.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{target}.lock", timeout=1800):
        if not marker.is_file():
            shutil.rmtree(target, ignore_errors=True)
            venv.EnvBuilder(with_pip=True).create(target)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            install = [str(python), "-m", "pip", "install", "-q", f"openenv=={OPENENV_SIDE_VERSION}"]
            done = subprocess.run(install, capture_output=True, text=True, timeout=1500, env=env, cwd=target)
            if done.returncode != 0:
                raise RuntimeError(
                    f"could not make {target}: {' '.join(install)} said: {done.stderr[-3000:]}"
                )
            marker.write_text(OPENENV_SIDE_VERSION + "\n")
    return str(python)
