#!/usr/bin/env python3
"""Writes the seed inputs of tests/fuzz/corpus/<target>/: well-formed frames
and scripts that reach each decoder's deeper states (joins, tables, errors,
goodbyes), which the fuzzers then mutate. Run it after changing a wire
format: python3 tests/fuzz/make_corpus.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SECRET = bytes([0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87,
                0x98, 0xA9, 0xBA, 0xCB, 0xDC, 0xED, 0xFE, 0x0F])
PREAMBLE = b"tuttiBS2" + bytes([0x5A] * 16)  # magic and a nonce: no secret travels
HELLO, TABLE, ERROR, RING, GATHER, ENTER, LEAVE = 1, 2, 3, 4, 5, 6, 7


def be32(v):
    return struct.pack(">I", v & 0xFFFFFFFF)


def addr4(ip, port):
    return bytes([0, 4]) + struct.pack(">H", port) + bytes(4) + bytes(ip) + bytes(12)


def addr6(last, port, scope=0):
    return bytes([0, 6]) + struct.pack(">H", port) + be32(scope) + bytes(15) + bytes([last])


def frame(t, payload):
    return be32(t) + be32(len(payload)) + payload


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def uid():
    def make(flags, a, magic=0x74555469, version=1):
        b = be32(magic) + be32(version << 16 | flags) + a + SECRET
        return b + bytes(128 - len(b))
    write("uid", "v4_comm_id", make(1, addr4([127, 0, 0, 1], 29500)))
    write("uid", "v4_root", make(0, addr4([10, 0, 0, 7], 41234)))
    write("uid", "v6_scope", make(0, addr6(1, 5000, scope=3)))
    write("uid", "bad_magic", make(0, addr4([127, 0, 0, 1], 1), magic=0x4E43434C))
    write("uid", "port_zero", make(0, addr4([127, 0, 0, 1], 0)))


def root():
    def hello(c, rank, nranks, t=10, kind=0):
        return bytes([2, c, rank & 0xFF, nranks & 0xFF, t, kind])
    OPEN, FLUSH, SERVE = bytes([0]), bytes([5]), bytes([7])

    def tick(d):
        return bytes([4, d])
    write("root", "one_rank", OPEN + hello(0, 0, 1) + FLUSH)
    write("root", "two_ranks", OPEN + OPEN + hello(0, 0, 2) + hello(1, 1, 2, kind=1) + FLUSH)
    write("root", "four_ranks", OPEN * 4 + b"".join(hello(i, i, 4) for i in range(4)) + FLUSH)
    raw = PREAMBLE + frame(HELLO, be32(0) + be32(1) + be32(1000) + be32(900) +
                           addr4([127, 0, 0, 1], 2000))
    write("root", "raw_in_pieces", OPEN + bytes([1, 0, 20]) + raw[:20] + SERVE +
          bytes([1, 0, len(raw) - 20]) + raw[20:] + FLUSH)
    write("root", "duplicate_rank", OPEN * 3 + hello(0, 0, 3) + hello(1, 0, 3) + FLUSH)
    write("root", "nranks_differ", OPEN * 2 + hello(0, 0, 2) + hello(1, 1, 3) + FLUSH)
    write("root", "rank_out_of_range", OPEN + hello(0, 5, 2) + hello(0, 0xFF, 0xFF) + FLUSH)
    write("root", "rank_leaves", OPEN * 2 + hello(0, 0, 2) + bytes([6, 0]) + SERVE + FLUSH)
    write("root", "missing_rank", OPEN * 2 + hello(0, 0, 3) + hello(1, 2, 3) + tick(250) +
          FLUSH + tick(250) + tick(250))
    write("root", "stranger_then_rank", OPEN * 2 + bytes([1, 0, 8]) + b"GET / HT" +
          bytes([3, 0]) + hello(1, 0, 1) + FLUSH)
    write("root", "slow_stranger", OPEN + bytes([1, 0, 3]) + PREAMBLE[:3] + tick(120) + OPEN +
          hello(1, 0, 1) + FLUSH)
    # A whole hello answered with a MAC that proves nothing (kind bit 6).
    write("root", "wrong_mac", OPEN * 2 + hello(0, 0, 2, kind=0x40) + hello(1, 1, 2) + FLUSH)


def ring():
    # part, shape (nranks 2 + s % 7, rank (s >> 4) % nranks), bytes, piece
    hello = PREAMBLE + frame(RING, be32(1) + be32(2))
    write("ring", "hello_whole", bytes([0, 0, 0, 15]) + hello)
    # piece bit 7: once the hello is in, a valid MAC answers the rank's proof.
    write("ring", "hello_proved", bytes([0, 0, 0, 0x8F]) + hello + bytes(32))
    write("ring", "hello_bytewise", bytes([0, 0, 0, 0]) + hello)
    h4 = PREAMBLE + frame(RING, be32(2) + be32(4))
    write("ring", "hello_rank3_of_4", bytes([0, 0x33, 0, 7]) + h4)
    write("ring", "hello_wrong_rank", bytes([0, 0, 0, 15]) + PREAMBLE + frame(RING, be32(0) +
                                                                              be32(2)))
    # rank 0 of 2, 8 bytes per rank: one all-gather step, then the barrier.
    gather = frame(GATHER, bytes(range(8)))
    write("ring", "gather_barrier_2", bytes([1, 0, 8, 0]) + gather + frame(ENTER, b""))
    # rank 1 of 3 (shape 0x16), 4 bytes: two steps, then ENTER, LEAVE.
    write("ring", "gather_barrier_3", bytes([1, 0x16, 4, 0]) + frame(GATHER, b"abcd") +
          frame(GATHER, b"efgh") + frame(ENTER, b"") + frame(LEAVE, b""))
    write("ring", "gather_wrong_size", bytes([1, 0, 8, 0]) + frame(GATHER, bytes(4)))
    write("ring", "gather_huge", bytes([1, 0, 8, 0]) + be32(GATHER) + be32(0xFFFFFFFF))


def reply():
    table = frame(TABLE, addr4([10, 0, 0, 1], 4000) + addr6(2, 4001))
    write("reply", "table_2", bytes([1]) + table)
    write("reply", "table_1", bytes([0]) + frame(TABLE, addr4([127, 0, 0, 1], 1)))
    write("reply", "table_damaged", bytes([1]) + frame(TABLE, addr4([1, 2, 3, 4], 5) +
                                                       bytes([0, 9]) + bytes(22)))
    write("reply", "error", bytes([3]) + frame(ERROR, be32(6) + b"rank 2 never came"))
    write("reply", "error_code_0", bytes([3]) + frame(ERROR, be32(0) + b"x"))
    write("reply", "error_huge", bytes([3]) + be32(ERROR) + be32(0x7FFFFFFF) + be32(3))
    write("reply", "half_header", bytes([3]) + be32(TABLE)[:3])


def tcp():
    # nranks 2 + b % 7, rank b % nranks, nsocks 1 + b % 4, flags
    def hello_op(link, frm, to_sel, idx):
        return bytes([2, link, frm, to_sel, idx])
    # rank 1 of 2, two sockets: rank 0 connects twice.
    write("tcp", "incoming", bytes([0, 1, 1, 0]) + bytes([0]) + hello_op(0, 0, 1, 0) +
          bytes([0]) + hello_op(1, 0, 1, 1))
    # rank 0 of 2: its two connections are acknowledged.
    write("tcp", "outgoing_acks", bytes([0, 0, 1, 0]) + bytes([3, 0, 3, 1]))
    # rank 1 of 3 with one socket: acks from rank 2, a hello from rank 0.
    write("tcp", "both_ways", bytes([1, 1, 0, 0]) + bytes([3, 0]) + bytes([0]) +
          hello_op(1, 0, 1, 0))
    write("tcp", "stranger", bytes([0, 1, 1, 0]) + bytes([0, 1, 0, 16]) + b"SSH-2.0-OpenSSH_" +
          bytes([0]) + hello_op(1, 0, 1, 0) + bytes([4, 0]))
    # rank 1 of 2: rank 0's hello, then its MAC answering the proof.
    write("tcp", "incoming_proved", bytes([0, 1, 0, 0]) + bytes([0]) + hello_op(0, 0, 1, 0) +
          bytes([3, 0]))
    write("tcp", "wrong_socket", bytes([0, 1, 0, 0]) + bytes([0]) + hello_op(0, 0, 1, 3))
    recs = b""
    for r in range(2):
        rec = bytes([1, 0, 1, 0]) + be32(2) + addr4([10, 0, 0, r + 1], 30000 + r)
        recs += rec + (b"eth%d" % r).ljust(16, b"\0")
    write("tcp", "records", bytes([0, 1, 1, 1]) + recs + bytes([0]) + hello_op(0, 0, 1, 0))


def proxy():
    def rec(s, size):
        return bytes([1, s, size >> 8, size & 0xFF])
    write("proxy", "records", bytes([1]) + rec(0, 100) + rec(1, 4096) + rec(0, 0) + bytes([5, 0]))
    write("proxy", "goodbye", bytes([0]) + rec(0, 10) + bytes([2, 0]) + be32(0) + bytes([3, 0]))
    write("proxy", "goodbye_reason", bytes([1]) + bytes([2, 0]) + be32(0x05000003) +
          bytes([2, 1]) + be32(0))
    write("proxy", "too_big", bytes([0]) + bytes([0, 0, 4]) + be32(5000))
    write("proxy", "pieces", bytes([0]) + bytes([0, 0, 2]) + be32(8)[:2] + bytes([0, 0, 6]) +
          be32(8)[2:] + b"abcd" + bytes([0, 0, 4]) + b"efgh")
    write("proxy", "send_then_close", bytes([2]) + bytes([4, 0, 200, 4, 1, 10]) + rec(2, 33) +
          bytes([3, 1]))
    write("proxy", "fill_slots", bytes([0]) + b"".join(rec(0, 64) for _ in range(12)))


def ras():
    h = b"0123456789abcdef"
    obj = b'{"rank":3,"host":"h3","pid":1003,"gpu":-1,"state":"idle","calls":4,"ops":4,' \
        b'"time_ns":1,"current":null,"failed":null,"dead":[],"recent":[{"seq":4,"call":4,' \
        b'"op":"AllReduce","count":65536,"datatype":"float","root":-1,"algorithm":"ring",' \
        b'"enter_ns":1,"exit_ns":2,"failed":false}]}'
    write("ras", "own_line", h + b" 4 init " + obj + b"\n")
    write("ras", "split_too", h + b" 4 init " + obj + b"\n" + b"00000000000000aa 2 split " +
          obj.replace(b'"rank":3', b'"rank":1') + b"\n")
    write("ras", "forged_size", h + b" 10000000 init " + obj + b"\n")
    write("ras", "breaks_out", h + b' 4 init {"rank":3}]}],"x":[{"a":1}\n' +
          h + b' 4 init","x":"y {"rank":3}\n')
    write("ras", "not_its_rank", h + b" 4 init " + obj.replace(b'"rank":3', b'"rank":0') + b"\n")
    write("ras", "escapes", h + b' 4 grow {"rank":3,"host":"a\\"b\\u00e9\xc3\xa9"}\n')


if __name__ == "__main__":
    uid()
    root()
    ring()
    reply()
    tcp()
    proxy()
    ras()
