"""From a model name to a ready `Client`: the endpoint, its key, and a check that it answers.

What `rubric eval -m MODEL` and `env.evaluate("MODEL")` both do before a run: a model named
"scripted:POLICY" gets the environment's own scripted policy served on 127.0.0.1 for the run;
any other name goes to `base_url` (or `$OPENAI_BASE_URL`, or OpenAI) with the key from an
environment variable, never from a file or a command line. `check=True` fails fast, before
any rollout, when the key is missing or nothing answers at the endpoint.
"""

from __future__ import annotations

import contextlib
import os
import urllib.error
import urllib.request
from typing import Any

from harness._core.errors import ConfigError, EndpointError
from harness._endpoint.client import Client
from harness._endpoint.wire import LOCAL_KEY, SCRIPTED_KEY
from harness.scripted._endpoint import SCRIPTED_PREFIX, ScriptedEndpoint, scripted_policy

DEFAULT_KEY_VAR = "OPENAI_API_KEY"
OPENAI_URL = "https://api.openai.com/v1"


def api_key_from(var: str = DEFAULT_KEY_VAR, base_url: str | None = None) -> str:
    """The key in environment variable `var`.

    A local OpenAI-compatible server (vLLM, llama.cpp: a `base_url` is given) accepts any key,
    so an unset `OPENAI_API_KEY` is "EMPTY" there; a variable named on purpose must be set.

    Raises:
        ConfigError: the variable is not set (and a key is needed).
    """
    key = os.environ.get(var)
    if key:
        return key
    if var != DEFAULT_KEY_VAR or base_url is None:
        raise ConfigError(
            f"environment variable {var} is not set; export {var}=<your key> "
            f"or name another variable with -k/--api-key-var"
        )
    return LOCAL_KEY


def check_reachable(base_url: str, timeout: float = 5.0) -> None:
    """Raise EndpointError when nothing answers at `base_url` (any HTTP answer, 401 and 404
    included, means a server is there)."""
    url = base_url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout):
            return
    except urllib.error.HTTPError:
        return
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise EndpointError(
            f"cannot reach the endpoint at {base_url} ({reason}); start the server or fix -b/--base-url"
        ) from None


async def supports_token_ids(client: Client) -> bool:
    """Whether `client`'s endpoint returns token ids and logprobs when asked the vLLM way.

    One request of one token ("ping", `return_token_ids`, `logprobs`), no retries: True when
    the answer carries the prompt's ids and the completion's. A scripted endpoint always does
    (it is not asked). Any refusal or failure is a no: the run goes on without ids.
    """
    if client.model.startswith(SCRIPTED_PREFIX):
        return True
    probe = Client(**{**client.replica_kwargs(), "return_token_ids": True, "max_retries": 0})
    try:
        completion = await probe.complete([{"role": "user", "content": "ping"}], max_tokens=1)
    except EndpointError:
        return False
    finally:
        await probe.aclose()
    return completion.prompt_token_ids is not None and completion.choices[0].token_ids is not None


def open_client(
    stack: contextlib.ExitStack[Any],
    model: str,
    *,
    env: Any = None,
    base_url: str | None = None,
    api_key_var: str = DEFAULT_KEY_VAR,
    check: bool = False,
    scripted_process: bool = False,
    **client_options: Any,
) -> Client:
    """A `Client` for `model`; a scripted endpoint it needs is started and stopped by `stack`.

    Args:
        stack: owns the scripted endpoint, if one is started (the caller closes the client).
        model: a model name at the endpoint, or "scripted:POLICY" (a policy of `env`).
        env: the environment whose `scripted_policies` a "scripted:" model names.
        base_url: the endpoint (default: `$OPENAI_BASE_URL`, else OpenAI).
        api_key_var: the environment variable holding the key.
        check: before returning, require the key and an answer from the endpoint.
        scripted_process: serve the scripted policy from its own process (it then does not
            share the GIL with the harness it serves; the CLI does this).
        client_options: the rest of `Client`'s keyword arguments (max_concurrency, timeout, ...).
    """
    if model.startswith(SCRIPTED_PREFIX):
        endpoint = stack.enter_context(
            ScriptedEndpoint(scripted_policy(env, model), process=scripted_process)
        )
        return Client(model, base_url=endpoint.base_url, api_key=SCRIPTED_KEY, **client_options)
    if not check:
        return Client(model, base_url=base_url, **client_options)
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    key = api_key_from(api_key_var, url)
    check_reachable(url or OPENAI_URL)
    return Client(model, base_url=url, api_key=key, **client_options)


__all__ = ["DEFAULT_KEY_VAR", "api_key_from", "check_reachable", "open_client", "supports_token_ids"]
