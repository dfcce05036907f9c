"""Capture a real vLLM engine's KV event batches, as sent on its ZMQ socket, into a fixture.

Tools layer (starts one vLLM process, subscribes, writes JSON). The router's event decoder
and index (``disagg_worker.serve.proxy.rules.kv_events``) are tested on what vLLM really
publishes, not on what we think it publishes: each frame is kept as bytes (base64) beside
the token ids of the prompts that caused it and the hash settings the engine ran with.

    python -m disagg_tools.vllm.kv_capture MODEL_DIR OUT.json [--hash-algo sha256_cbor]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import zmq

BLOCK_SIZE = 32  # vLLM CPU attention takes multiples of 32
# a small cache, so that a few turns evict blocks and BlockRemoved is seen too
NUM_BLOCKS = 16  # vLLM keeps one as its null block: 15 x 32 >= --max-model-len 448


def chat_turns(turns: int = 8, seed: int = 7) -> list[list[int]]:
    """A multi-turn trace as token ids: each turn is the previous one plus ~24-56 tokens."""
    out: list[list[int]] = []
    tokens = [0]
    state = seed
    for turn in range(turns):
        state = (state * 1103515245 + 12345) % 2**31
        grow = 24 + state % 33
        tokens = tokens + [4 + (state + i * 37 + turn * 11) % 1000 for i in range(grow)]
        out.append(list(tokens))
    return out


def serve_argv(model: str, port: int, events_port: int, hash_algo: str) -> list[str]:
    events = {"enable_kv_cache_events": True, "publisher": "zmq",
              "endpoint": f"tcp://*:{events_port}", "topic": "kv"}  # fmt: skip
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
        "--port", str(port), "--host", "127.0.0.1", "--dtype", "bfloat16",
        "--max-model-len", "448", "--enforce-eager", "--block-size", str(BLOCK_SIZE),
        "--num-gpu-blocks-override", str(NUM_BLOCKS), "--prefix-caching-hash-algo", hash_algo,
        "--kv-events-config", json.dumps(events),
    ]  # fmt: skip


def post(url: str, body: dict[str, Any] | None = None) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        text = resp.read()
    return json.loads(text) if text.strip() else None


def wait_ready(url: str, proc: subprocess.Popen[bytes], limit_s: float = 240) -> None:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"vLLM exited with {proc.returncode} before it was ready")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"vLLM at {url} was not ready within {limit_s:.0f} s")


def drain(sub: zmq.Socket[bytes], quiet_s: float = 1.0) -> list[list[str]]:
    """Every frame that arrives until the socket has been quiet ``quiet_s``."""
    frames: list[list[str]] = []
    while sub.poll(int(quiet_s * 1000)):
        parts = sub.recv_multipart()
        frames.append([base64.b64encode(p).decode() for p in parts])
    return frames


def capture(model: str, out: Path, hash_algo: str, seed: str | None) -> None:
    port, events_port = 18311, 18357
    env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", VLLM_CPU_OMP_THREADS_BIND="0",
               VLLM_SERVER_DEV_MODE="1")  # fmt: skip
    env.pop("PYTHONHASHSEED", None)
    if seed is not None:
        env["PYTHONHASHSEED"] = seed
    # the engine's log beside the run's other temporary files, not the fixture
    log = open(Path(tempfile.gettempdir()) / f"kv_capture-{out.stem}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(serve_argv(model, port, events_port, hash_algo), env=env,
                            stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    sub: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    sub.connect(f"tcp://127.0.0.1:{events_port}")
    sub.setsockopt(zmq.SUBSCRIBE, b"kv")
    steps: list[dict[str, Any]] = []
    try:
        wait_ready(url, proc)
        drain(sub)
        # the turns, then an unrelated 9-block prompt that evicts some of theirs
        for prompt in [*chat_turns(), [0] + [5 + i % 997 for i in range(300)]]:
            body = {"prompt": prompt, "max_tokens": 4, "temperature": 0}
            post(url + "/v1/completions", body)
            steps.append({"prompt": prompt, "frames": drain(sub)})
        # vLLM queues AllBlocksCleared and publishes it with the next step's events
        post(url + "/reset_prefix_cache")
        after = [0] + [7 + i % 991 for i in range(40)]
        post(url + "/v1/completions", {"prompt": after, "max_tokens": 4, "temperature": 0})
        steps.append({"prompt": after, "reset": True, "frames": drain(sub)})
    finally:
        sub.close(linger=0)
        proc.terminate()
        proc.wait(30)
        log.close()
    meta = {"vllm": _version(), "hash_algo": hash_algo, "pythonhashseed": seed,
            "block_size": BLOCK_SIZE, "num_blocks": NUM_BLOCKS, "topic": "kv"}  # fmt: skip
    out.write_text(json.dumps({**meta, "steps": steps}, indent=1) + "\n")


def _version() -> str:
    from importlib.metadata import version

    return version("vllm-cpu")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kv_capture", description=__doc__)
    p.add_argument("model")
    p.add_argument("out", type=Path)
    p.add_argument("--hash-algo", default="sha256_cbor")
    p.add_argument("--seed", default=None, help="PYTHONHASHSEED for the engine (unset: none)")
    args = p.parse_args(argv)
    capture(args.model, args.out, args.hash_algo, args.seed)


if __name__ == "__main__":
    main()
