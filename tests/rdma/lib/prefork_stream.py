"""The byte stream of tests/progs/prefork.c's protocol, shared by the
Python servers (prefork.py, forking.py): xorshift32 from seed | 1, the low
byte of each step."""


def stream(seed, n):
    x = seed | 1
    out = bytearray(n)
    for i in range(n):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out[i] = x & 0xFF
    return bytes(out)
