#!/usr/bin/env python3
"""A TCP relay that alters the stream, for tests/netns/enc.sh: listens on
LISTEN (host:port), forwards each connection to UPSTREAM, and flips one bit
of byte OFFSET of what UPSTREAM sends back (on every connection), as a
faulty or hostile network would. Runs until killed.
Usage: relay.py LISTEN UPSTREAM OFFSET"""
import socket
import sys
import threading


def addr(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def pump(src, dst, flip_at):
    seen = 0
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if flip_at is not None and seen <= flip_at < seen + len(data):
                b = bytearray(data)
                b[flip_at - seen] ^= 0x01
                data = bytes(b)
            seen += len(data)
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    listen, upstream, offset = addr(sys.argv[1]), addr(sys.argv[2]), int(sys.argv[3])
    srv = socket.create_server(listen)
    while True:
        client, _ = srv.accept()
        try:
            up = socket.create_connection(upstream)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pump, args=(client, up, None), daemon=True).start()
        threading.Thread(target=pump, args=(up, client, offset), daemon=True).start()


if __name__ == "__main__":
    main()
