"""llama.cpp's own server (through xllamacpp) serving one GGUF on loopback, until killed.

    python scripts/model_serve.py MODEL.gguf --port PORT [--alias NAME] [--slots N]
        [--context TOKENS] [--threads T]

Run by `scripts/model serve` and the live tests in the model's own venv, always as a child
process: xllamacpp has no stop call, and a native abort (xorbitsai/xllamacpp #120, #171)
must end this process, not the one that started it. `--slots` parallel slots share one
context of `--context` tokens each (so a request's `n` up to the slots, and that many
concurrent requests, are answered at once: `n` above the slots is an HTTP 400).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", default="qwen2.5-coder-0.5b")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--context", type=int, default=8192, help="tokens per slot")
    parser.add_argument("--threads", type=int, default=min(os.cpu_count() or 2, 4))
    args = parser.parse_args(argv)

    import xllamacpp  # type: ignore[import-not-found]  # the model venv's, not runfix's

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = [args.alias]  # a list: a plain string is taken letter by letter
    params.n_parallel = args.slots
    params.n_ctx = args.slots * args.context
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    server = xllamacpp.Server(params)
    print(f"model: serving {args.alias} on {server.listening_address}/v1", file=sys.stderr)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # no stop call: end the process
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
