#!/usr/bin/python3
"""Interop client for edgemux's WebSocket endpoint, on python3-websockets.

Run by gateway/wsinterop_test.go with Debian's /usr/bin/python3 (the
python3-websockets package): a real client that we did not write. It
reports what it observed as one JSON object on stdout and asserts nothing
itself; the Go test decides. Every case is bounded by a timeout, so a
gateway that never answers makes a case report an error rather than hang.

usage: ws_client.py URL MAX_MESSAGE
"""

import asyncio
import json
import os
import struct
import sys

import websockets

SUBPROTOCOL = "edgemux.v1"
WAIT = 20  # seconds: a hang guard, not a performance limit


def connect(url):
    return websockets.connect(url, subprotocols=[SUBPROTOCOL], open_timeout=WAIT,
                              close_timeout=WAIT, max_size=1 << 20)


async def recv_json(ws):
    return json.loads(await asyncio.wait_for(ws.recv(), WAIT))


async def recv_until(ws, want):
    """Reads JSON messages until one satisfies want (bounded)."""
    async def loop():
        while True:
            m = json.loads(await ws.recv())
            if want(m):
                return m
    return await asyncio.wait_for(loop(), WAIT)


def client_frame(opcode, payload, fin=True, masked=True):
    """One client frame, built by hand: websockets would refuse to send the
    broken ones the cases need."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mask_bit = 0x80 if masked else 0
    if n < 126:
        head += bytes([mask_bit | n])
    elif n < 1 << 16:
        head += bytes([mask_bit | 126]) + struct.pack("!H", n)
    else:
        head += bytes([mask_bit | 127]) + struct.pack("!Q", n)
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


async def close_code_after(url, send):
    """Opens a connection, lets send(ws) misbehave, and reports the close
    code the server sent."""
    async with connect(url) as ws:
        await send(ws)
        try:
            while True:
                await asyncio.wait_for(ws.recv(), WAIT)
        except websockets.ConnectionClosed:
            pass
        await asyncio.wait_for(ws.wait_closed(), WAIT)
        return {"close_code": ws.close_code, "close_reason": ws.close_reason}


async def case_sub_pub(url):
    async with connect(url) as ws:
        await ws.send(json.dumps({"op": "sub", "topic": "interop/#"}))
        await ws.send(json.dumps({"op": "pub", "topic": "interop/a", "data": {"n": 1, "s": "héllo"}}))
        got = await recv_until(ws, lambda m: m.get("topic") == "interop/a")
        await ws.close()
        return {"subprotocol": ws.subprotocol, "delivery": got, "close_code": ws.close_code}


async def case_retained(url):
    async with connect(url) as ws:
        await ws.send(json.dumps({"op": "sub", "topic": "interop/a"}))
        return {"delivery": await recv_until(ws, lambda m: m.get("topic") == "interop/a")}


async def case_fragmented(url):
    async with connect(url) as ws:
        await ws.send(json.dumps({"op": "sub", "topic": "interop/frag"}))
        # A list makes websockets send one message as several frames.
        await ws.send(['{"op":"pub",', '"topic":"interop/frag",', '"data":"in three fragments"}'])
        got = await recv_until(ws, lambda m: m.get("topic") == "interop/frag")
        return {"delivery": got}


async def case_ping(url):
    async with connect(url) as ws:
        pong = await ws.ping(b"interop")
        await asyncio.wait_for(pong, WAIT)
        await ws.send(json.dumps({"op": "ping"}))
        app = await recv_until(ws, lambda m: m.get("op") == "pong")
        return {"pong": True, "app_pong": app}


async def case_bad_op(url):
    """A request the server rejects comes back as an error message, and the
    connection lives on."""
    async with connect(url) as ws:
        await ws.send(json.dumps({"op": "frobnicate"}))
        err = await recv_until(ws, lambda m: m.get("op") == "error")
        await ws.send(json.dumps({"op": "sub", "topic": "bad/#/filter"}))
        bad_filter = await recv_until(ws, lambda m: m.get("op") == "error")
        await ws.send(json.dumps({"op": "ping"}))
        await recv_until(ws, lambda m: m.get("op") == "pong")
        return {"error": err, "bad_filter": bad_filter, "alive": True}


def raw(frame):
    async def send(ws):
        ws.transport.write(frame)
    return send


async def case_oversize(ws, max_message):
    await ws.send(json.dumps({"op": "pub", "topic": "interop/big", "data": "x" * (2 * max_message)}))


async def run(url, max_message):
    results = {}

    async def record(name, coro):
        try:
            results[name] = await coro
        except Exception as e:  # reported, judged by the Go test
            results[name] = {"exception": type(e).__name__ + ": " + str(e)}

    # A bystander stays connected through all the misbehaviour below.
    bystander = await connect(url)
    await bystander.send(json.dumps({"op": "sub", "topic": "interop/after"}))
    await asyncio.sleep(0)

    await record("sub_pub", case_sub_pub(url))
    await record("retained", case_retained(url))
    await record("fragmented", case_fragmented(url))
    await record("ping", case_ping(url))
    await record("bad_op", case_bad_op(url))
    await record("reserved_opcode", close_code_after(url, raw(client_frame(0x3, b"?"))))
    await record("unmasked", close_code_after(url, raw(client_frame(0x1, b'{"op":"ping"}', masked=False))))
    await record("invalid_utf8", close_code_after(url, raw(client_frame(0x1, b'{"op":"\xff\xfe"}'))))
    await record("oversize", close_code_after(url, lambda ws: case_oversize(ws, max_message)))

    async def after():
        async with connect(url) as pub:
            await pub.send(json.dumps({"op": "pub", "topic": "interop/after", "data": "still here"}))
        got = await recv_until(bystander, lambda m: m.get("topic") == "interop/after")
        pong = await bystander.ping()
        await asyncio.wait_for(pong, WAIT)
        await bystander.close()
        return {"delivery": got, "close_code": bystander.close_code}
    await record("bystander", after())
    return results


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    results = asyncio.run(run(sys.argv[1], int(sys.argv[2])))
    results["websockets_version"] = websockets.__version__
    json.dump(results, sys.stdout)
    print()


if __name__ == "__main__":
    main()
