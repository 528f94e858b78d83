#!/usr/bin/env python3
"""The wire between namespace hosts, for tests/netns/enc.sh.
  relay.py LISTEN UPSTREAM OFFSET  a TCP relay: listens on LISTEN (host:port),
      forwards each connection to UPSTREAM (once it listens: 20 s at most),
      and flips one bit of byte OFFSET of what UPSTREAM sends back (on every
      connection), as a faulty or hostile network would. Runs until killed.
  relay.py tap BRIDGE PSK  captures every TCP segment crossing BRIDGE (the
      hosts' bridge, hosts.sh) until SIGINT, then reads each encrypted
      stream (util/seal.c: a hello with the sender's nonce, then records of
      a 4-byte length, ciphertext and a 16-byte tag), derives each
      direction's key and IV from PSK as util/seal_handshake.c does, and
      finds the nonce every record authenticates under (IV xor the counter,
      the expected counter first). Exits 1 naming the connection, the
      direction and the value when a nonce repeats under one key, a record
      opens under no counter, or bytes were lost; prints what it checked.
      Needs root (AF_PACKET) and python3-cryptography."""
import signal
import socket
import struct
import sys
import threading
import time


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


MAGIC, HELLO, TAG = b"tuttiEN2", 56, 16
LABELS = (b"tutti enc v2 initiator to responder", b"tutti enc v2 responder to initiator")


def capture(bridge):
    """Raw IPv4/TCP segments seen on the bridge until SIGINT or SIGTERM."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.setsockopt(socket.SOL_SOCKET, 33, 1 << 28)  # SO_RCVBUFFORCE: no drops under load
    s.bind((bridge, 0))
    idx = socket.if_nametoindex(bridge)
    # PACKET_ADD_MEMBERSHIP, PACKET_MR_PROMISC: frames forwarded between ports too.
    s.setsockopt(263, 1, struct.pack("iHH8s", idx, 1, 0, b""))
    stop = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.append(1))
    s.settimeout(0.2)
    print("tapping", bridge, flush=True)
    frames = []
    while not stop:
        try:
            frames.append(s.recv(1 << 17))
        except socket.timeout:
            continue
        except InterruptedError:
            continue
    # PACKET_STATISTICS: frames the kernel dropped because the socket was full.
    drops = struct.unpack("II", s.getsockopt(263, 6, 8))[1]
    return frames, drops


def streams(frames):
    """{(src, sport, dst, dport): (bytes, lost, syn_only)} from the segments."""
    flows, isn, client = {}, {}, set()
    for f in frames:
        if len(f) < 34 or f[12:14] != b"\x08\x00" or f[23] != 6:
            continue
        ip = f[14:]
        ihl, tot = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0]
        tcp = ip[ihl:tot]
        sport, dport, seq = struct.unpack("!HHI", tcp[:8])
        flags, doff = tcp[13], (tcp[12] >> 4) * 4
        key = (socket.inet_ntoa(ip[12:16]), sport, socket.inet_ntoa(ip[16:20]), dport)
        if flags & 0x02:  # SYN
            isn[key] = seq + 1
            if not flags & 0x10:
                client.add(key)
            continue
        data = tcp[doff:]
        if data:
            flows.setdefault(key, {})[seq] = data
    out = {}
    for key, segs in flows.items():
        if key not in isn:
            continue  # began before the tap: not ours to judge
        buf, at, lost = bytearray(), isn[key], 0
        for seq in sorted(segs, key=lambda q: (q - isn[key]) % (1 << 32)):
            off = (seq - at) % (1 << 32)
            data = segs[seq]
            if off > 1 << 31:  # a retransmission overlapping what we have
                data = data[-off % (1 << 32):] if len(data) > (-off % (1 << 32)) else b""
                off = 0
            if off > 0:
                lost += off
            buf += data
            at = (at + off + len(data)) % (1 << 32)
        out[key] = (bytes(buf), lost, key in client)
    return out


def keys(psk, n_init, n_resp):
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    out = []
    for label in LABELS:
        k = HKDF(hashes.SHA256(), 44, n_init + n_resp, label).derive(psk)
        out.append((k[:32], int.from_bytes(k[32:], "big")))
    return out


def tap(bridge, psk):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.exceptions import InvalidTag
    frames, drops = capture(bridge)
    flows = streams(frames)
    bad, used, conns, dirs, records = [], {}, 0, 0, 0
    if drops:
        bad.append(f"the capture dropped {drops} frames: streams are incomplete")
    for key, (data, lost, is_client) in sorted(flows.items()):
        back = (key[2], key[3], key[0], key[1])
        if not is_client or back not in flows:
            continue
        hi, hr = data[:HELLO], flows[back][0][:HELLO]
        if not hi.startswith(MAGIC) or not hr.startswith(MAGIC):
            continue  # not encrypted (tuttirun's own rendezvous)
        conns += 1
        kd = keys(psk, hi[8:40], hr[8:40])
        for d, (src, name) in enumerate(((key, "initiator to responder"), (back, "responder to initiator"))):
            stream, lost = flows[src][0], flows[src][1]
            conn = f"{src[0]}:{src[1]} -> {src[2]}:{src[3]} ({name})"
            if lost:
                bad.append(f"{conn}: {lost} bytes missing from the capture")
                continue
            key_, iv = kd[d]
            gcm, pos, n, seen = AESGCM(key_), HELLO, 0, {}
            dirs += 1
            while pos + 4 <= len(stream):
                ln = struct.unpack("!I", stream[pos:pos + 4])[0]
                end = pos + 4 + ln + TAG
                if end > len(stream):
                    break  # the job ended (or was cut) mid-record
                aad = stream[pos:pos + 4] + (hi + hr if n == 0 else b"")
                body = stream[pos + 4:end]
                found = None
                for c in [n] + list(range(n)):  # the expected counter, then any earlier one
                    try:
                        gcm.decrypt((iv ^ c).to_bytes(12, "big"), body, aad)
                        found = c
                        break
                    except InvalidTag:
                        continue
                if found is None:
                    bad.append(f"{conn}: record {n} opens under no counter 0..{n}")
                    break
                nonce = (iv ^ found).to_bytes(12, "big").hex()
                if (key_, nonce) in used:
                    bad.append(f"{conn}: record {n} repeats nonce {nonce} (counter {found}) of "
                               f"{used[(key_, nonce)]}")
                    break
                used[(key_, nonce)] = f"record {seen.setdefault(found, n)} of {conn}"
                n += 1
                pos = end
            records += n
    print(f"tap: {records} records on {conns} encrypted connections ({dirs} directions), "
          f"{len(frames)} frames: {'nonces all distinct' if not bad else 'FAILED'}")
    for b in bad:
        print("tap: FAILED:", b)
    return 1 if bad else 0


def main():
    if sys.argv[1:2] == ["tap"]:
        sys.exit(tap(sys.argv[2], sys.argv[3].encode()))
    listen, upstream, offset = addr(sys.argv[1]), addr(sys.argv[2]), int(sys.argv[3])
    srv = socket.create_server(listen)

    def serve(client):
        # UPSTREAM may not listen yet (its rank starts alongside the one that
        # came here): keep trying for 20 s, as the client itself would on a
        # refused connection, rather than reset a connection it was given.
        up = None
        for _ in range(200):
            try:
                up = socket.create_connection(upstream)
                break
            except OSError:
                time.sleep(0.1)
        if up is None:
            client.close()
            return
        threading.Thread(target=pump, args=(client, up, None), daemon=True).start()
        pump(up, client, offset)

    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


if __name__ == "__main__":
    main()
