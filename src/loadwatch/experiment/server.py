"""What an experiment asks of the server between runs: a restart into an arm's configuration (for
a target arm) and an empty prefix cache."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request

from loadwatch import loopback
from loadwatch.credentials import authorization, read_secret, split_credentials
from loadwatch.processes import answers

RESET_TRIES = 10  # the reset fails while blocks are held (requests still finishing): tried again


class ServerError(Exception):
    """The restart command failed or the server did not come back; the message says which."""


def restart(command: str, target: str, timeout: float, log) -> None:
    """Run the arm's restart command (a shell line, its output in `log`), then wait for the target."""
    done = subprocess.run(command, shell=True, stdout=log, stderr=subprocess.STDOUT, check=False)  # noqa: S602
    if done.returncode != 0:
        raise ServerError(f"the restart command exited with {done.returncode}: {command}")
    url = split_credentials(target)[0].rstrip("/") + "/v1/models"
    deadline = time.monotonic() + timeout
    while not answers(url):
        if time.monotonic() > deadline:
            raise ServerError(f"{target} did not answer {url} within {timeout:.0f} s of the restart")
        time.sleep(1)


def reset_prefix_cache(target: str) -> str | None:
    """Empty the server's prefix cache (vLLM's POST /reset_prefix_cache); None once done, else why not."""
    base, credentials = split_credentials(target)
    request = urllib.request.Request(base.rstrip("/") + "/reset_prefix_cache", method="POST", data=b"")
    header = authorization(read_secret("OPENAI_API_KEY"), credentials)
    if header:
        request.add_header("Authorization", header)
    for _ in range(RESET_TRIES):
        try:
            with loopback.urlopen(request, timeout=10) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                return ("the server has no /reset_prefix_cache (vLLM serves it with VLLM_SERVER_DEV_MODE=1): "
                        "runs after the first start with a warm prefix cache")
            return f"/reset_prefix_cache answered {exc.code}"
        except OSError as exc:
            return f"/reset_prefix_cache failed: {exc}"
        try:
            if json.loads(body or b"{}").get("success", True):
                return None
        except (ValueError, AttributeError):
            return None  # older vLLM answers 200 with no body
        time.sleep(1)
    return f"/reset_prefix_cache refused {RESET_TRIES} times (requests still hold cache blocks)"
