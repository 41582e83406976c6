"""Start vLLM's OpenAI server for a benchmark, wait until it answers, stop it.

The server is ``python -m vllm.entrypoints.openai.api_server`` (the module `vllm serve` runs;
no console script is needed) with ``--model DIR --load-format dummy --skip-tokenizer-init``
(random weights, no tokenizer: the model directory needs only config.json; prompts are token
ids) on 127.0.0.1 at a free port, plus the user's engine flags in `vllm serve` spelling. It
leads its own process group; stopping sends SIGINT (uvicorn's graceful shutdown, which also
ends the engine-core process), then SIGKILL to the group after a grace period. For a MoE model
the server's environment gets VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random (vLLM's
envs.py and model_executor/layers/fused_moe/router/routing_simulator_router.py, the version of
kvplan.verify.versions; its strategies: uniform_random, normal_routing): with dummy
weights the router would send most tokens to a few experts and the timings would not be those
of a trained model.

This module never imports vLLM; only the server process does.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from kvplan.errors import EnvironmentMissing
from kvplan.verify.bench.http import Endpoint, HttpError, get_text

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
MOE_ROUTING_ENV = "VLLM_MOE_ROUTING_SIMULATION_STRATEGY"
MOE_ROUTING_VALUE = "uniform_random"
SERVER_OVERRIDE_ENV = "KVPLAN_BENCH_SERVER"  # a Python script started instead of vLLM (tests)
STOP_GRACE_S = 20.0
# keys of config.json (top level or text_config) that mark a mixture-of-experts model
_MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok")


def is_moe(config: Optional[dict]) -> bool:
    """True when config.json describes a mixture-of-experts model (an experts count > 1)."""
    if not config:
        return False
    for part in (config, config.get("text_config") or {}, config.get("llm_config") or {}):
        if not isinstance(part, dict):
            continue
        for k in _MOE_KEYS[:-1]:
            v = part.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 1:
                return True
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(model_dir: str, port: int, serve_flags: list[str]) -> list[str]:
    """The server's argv (``sys.executable -m vllm.entrypoints.openai.api_server ...``), or the
    stand-in script named by $KVPLAN_BENCH_SERVER with the same arguments."""
    override = os.environ.get(SERVER_OVERRIDE_ENV)
    head = [sys.executable, override] if override else [sys.executable, "-m", SERVER_MODULE]
    return head + [
        "--model", model_dir, "--load-format", "dummy", "--skip-tokenizer-init",
        "--host", "127.0.0.1", "--port", str(port), "--seed", "0", "--disable-uvicorn-access-log",
        *serve_flags,
    ]


def server_env(config: Optional[dict]) -> tuple[dict, dict]:
    """(the server's whole environment, the variables kvplan set in it, for the record)."""
    env = dict(os.environ)
    added = {"PYTHONUNBUFFERED": "1"}
    if is_moe(config) and MOE_ROUTING_ENV not in env:
        added[MOE_ROUTING_ENV] = MOE_ROUTING_VALUE
    env.update(added)
    relevant = {k: v for k, v in env.items() if k.startswith("VLLM_") or k in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")}
    relevant.update(added)
    return env, relevant


@dataclass
class Server:
    """A started server: its process, address, log file, command and recorded environment."""

    proc: subprocess.Popen
    endpoint: Endpoint
    log_path: Path
    command: list[str]
    env: dict = field(default_factory=dict)
    started: float = 0.0
    ready_s: Optional[float] = None

    def log_tail(self, n: int = 12) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, grace_s: float = STOP_GRACE_S) -> Optional[int]:
        """SIGINT to the server's process group, SIGKILL after ``grace_s``; the exit status."""
        p = self.proc
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                p.wait(grace_s)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the leader and anything it left (engine core)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            return p.wait(10)
        except subprocess.TimeoutExpired:
            return None


def start_server(model_dir: str, serve_flags: list[str], config: Optional[dict], log_path: Path) -> Server:
    """Start the server (not waiting for it). Raises EnvironmentMissing when it cannot start."""
    port = free_port()
    cmd = server_command(model_dir, port, serve_flags)
    env, recorded = server_env(config)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    out = open(log_path, "w", encoding="utf-8")
    try:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError as exc:
        raise EnvironmentMissing(f"cannot start {cmd[0]}: {exc.strerror}") from None
    finally:
        out.close()
    return Server(proc=proc, endpoint=Endpoint("127.0.0.1", port), log_path=log_path, command=cmd, env=recorded, started=time.monotonic())


async def wait_ready(server: Server, timeout_s: float, on_wait: Callable[[float], None] = lambda s: None) -> float:
    """Poll GET /health until 200; the seconds it took.

    Raises:
        EnvironmentMissing: the server exited, or was not ready within ``timeout_s`` (the
            caller stops it); the message names the log and quotes its last line.
    """
    start = time.monotonic()
    while True:
        code = server.proc.poll()
        if code is not None:
            raise EnvironmentMissing(
                f"the vLLM server exited with status {code} before it was ready (log: {server.log_path}): "
                + (server.log_tail(1) or "no output")
            )
        try:
            status, _ = await get_text(server.endpoint, "/health", timeout_s=5.0)
            if status == 200:
                server.ready_s = time.monotonic() - start
                return server.ready_s
        except (HttpError, asyncio.TimeoutError, OSError):
            pass
        waited = time.monotonic() - start
        if waited > timeout_s:
            raise EnvironmentMissing(
                f"the vLLM server was not ready within {timeout_s:g} s; it was stopped (log: {server.log_path})",
                hint="raise --timeout, or read the log for where it hung",
            )
        on_wait(waited)
        await asyncio.sleep(1.0)
