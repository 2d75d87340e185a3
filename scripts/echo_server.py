#!/usr/bin/env python3
"""A bare asyncio JSON-RPC server on its stdio: each request answered at once with its own
params, notifications read and dropped; `exit` ends it. What any server over this framing
costs a round trip: the floor `bench_cost` holds runfix's added cost against."""

from __future__ import annotations

import asyncio
import json
import sys


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    while True:
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        if not line:
            return
        message = json.loads(await reader.readexactly(length))
        if message.get("method") == "exit":
            return
        if "id" in message:
            body = json.dumps(
                {"jsonrpc": "2.0", "id": message["id"], "result": message.get("params")}
            )
            data = body.encode()
            transport.write(b"Content-Length: %d\r\n\r\n%s" % (len(data), data))


if __name__ == "__main__":
    asyncio.run(main())
