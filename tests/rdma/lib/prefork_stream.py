"""The byte stream of tests/progs/prefork.c's protocol, shared by the
Python servers (prefork.py, forking.py): testlib's tl_rng
(tests/lib/testlib.c): xorshift64 (13, 7, 17) from seed * 0x9E3779B97F4A7C15
+ 1, each step's 8 bytes little-endian."""

import struct

M64 = (1 << 64) - 1


def stream(seed, n):
    x = (seed * 0x9E3779B97F4A7C15 + 1) & M64
    out = bytearray()
    while len(out) < n:
        x ^= (x << 13) & M64
        x ^= x >> 7
        x ^= (x << 17) & M64
        out += x.to_bytes(8, "little")
    return bytes(out[:n])


def answer(conn):
    """Read one request (8 bytes: size, seed) from conn and send that many
    bytes of the seed's stream; a connection that ends first gets none."""
    req = b""
    while len(req) < 8:
        part = conn.recv(8 - len(req))
        if not part:
            return
        req += part
    size, seed = struct.unpack("!II", req)
    conn.sendall(stream(seed, size))
