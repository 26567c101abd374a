#!/usr/bin/env python3
"""tlsclient.py: sends a ClientHello the way an evasive client would, and
says what came back.

  tlsclient.py ADDR PORT [options]

The hello is either Python's own (ssl.MemoryBIO, so it is exactly what a
real client sends) or a synthetic one built here with deliberate defects.
It can be cut into TCP segments of N bytes (TCP_NODELAY, a pause between
them) and/or into several TLS records. Prints one word:
  answered   the server sent bytes back (a ServerHello or an alert)
  reset      the connection was reset (the gateway's denial)
  refused    the connection was refused at once
  closed     the peer closed without a byte
  timeout    nothing within the time
"""
import argparse
import socket
import ssl
import struct
import sys
import time


def python_hello(sni, alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if alpn:
        ctx.set_alpn_protocols(alpn.split(","))
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni or None)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def ext(etype, body):
    return struct.pack(">HH", etype, len(body)) + body


def sni_ext(names, lie=0):
    entries = b"".join(b"\x00" + struct.pack(">H", len(n)) + n for n in names)
    return ext(0, struct.pack(">H", len(entries) + lie) + entries)


def synthetic_hello(sni, defect):
    """A TLS 1.2/1.3-looking ClientHello with one chosen defect."""
    name = (sni or "").encode()
    exts = []
    if defect == "two-sni-ext":
        exts += [sni_ext([name]), sni_ext([name])]
    elif defect == "two-names":
        exts.append(sni_ext([name, b"other.test"]))
    elif defect == "nul-name":
        exts.append(sni_ext([name[:3] + b"\x00" + name[3:]]))
    elif defect == "long-name":
        exts.append(sni_ext([b"a" * 256]))
    elif defect == "list-length":
        exts.append(sni_ext([name], lie=1))
    elif defect == "no-sni":
        pass
    else:
        exts.append(sni_ext([name]))
    if defect == "ech":
        exts.append(ext(0xfe0d, b"\x00" + b"\x00\x01\x00\x01" + b"\x07" +
                        b"\x00\x20" + bytes(32) + b"\x00\x10" + bytes(16)))
    if defect == "ech-draft":
        exts.append(ext(0xffce, bytes(40)))
    exts.append(ext(43, b"\x04\x03\x04\x03\x03"))          # TLS 1.3, 1.2
    exts.append(ext(10, b"\x00\x04\x00\x1d\x00\x17"))      # groups
    exts.append(ext(13, b"\x00\x04\x04\x03\x08\x04"))      # sigalgs
    exts.append(ext(51, b"\x00\x26\x00\x1d\x00\x20" + bytes(32)))  # key share
    extensions = b"".join(exts)
    body = (b"\x03\x03" + bytes(32) + b"\x20" + bytes(32) +
            b"\x00\x06\x13\x01\x13\x02\xc0\x2f" + b"\x01\x00" +
            struct.pack(">H", len(extensions)) + extensions)
    hs = b"\x01" + struct.pack(">I", len(body))[1:] + body
    return b"\x16\x03\x01" + struct.pack(">H", len(hs)) + hs


def split_records(hello, n):
    """The same handshake message spread over n records."""
    assert hello[0] == 0x16
    payload = hello[5:]
    size = -(-len(payload) // n)
    out = b""
    for i in range(0, len(payload), size):
        part = payload[i:i + size]
        out += b"\x16\x03\x01" + struct.pack(">H", len(part)) + part
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("addr")
    ap.add_argument("port", type=int)
    ap.add_argument("--sni", default="")
    ap.add_argument("--alpn", default="")
    ap.add_argument("--synthetic", metavar="DEFECT",
                    help="none, no-sni, two-sni-ext, two-names, nul-name, "
                    "long-name, list-length, ech, ech-draft")
    ap.add_argument("--segment", type=int, default=0,
                    help="send in TCP segments of this many bytes")
    ap.add_argument("--records", type=int, default=1)
    ap.add_argument("--cut-name", action="store_true",
                    help="end the first segment in the middle of the SNI")
    ap.add_argument("--raw", help="send these bytes instead (text)")
    ap.add_argument("--truncate", type=int, default=0,
                    help="send only the first N bytes, then wait")
    ap.add_argument("--wait", type=float, default=3.0)
    ap.add_argument("--linger", type=float, default=0.0,
                    help="once answered, keep the connection open this "
                    "many seconds without sending anything")
    a = ap.parse_args()

    if a.raw is not None:
        data = a.raw.encode().decode("unicode_escape").encode("latin-1")
    elif a.synthetic:
        data = synthetic_hello(a.sni, a.synthetic)
    else:
        data = python_hello(a.sni, a.alpn)
    if a.records > 1:
        data = split_records(data, a.records)
    if a.truncate:
        data = data[:a.truncate]

    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.settimeout(a.wait)
    try:
        s.connect((a.addr, a.port))
    except ConnectionRefusedError:
        print("refused")
        return
    except OSError as e:
        print("refused" if e.errno in (111, 113) else "timeout")
        return
    try:
        # A held first flight is never acknowledged, so the whole hello
        # must fit in the initial congestion window (10 segments).
        cuts = []
        if a.cut_name and a.sni:
            at = data.find(a.sni.encode())
            cuts.append(at + len(a.sni) // 2)
        if a.segment:
            start = cuts[-1] if cuts else 0
            cuts += list(range(start + a.segment, len(data), a.segment))
        prev = 0
        for c in cuts + [len(data)]:
            s.send(data[prev:c])
            prev = c
            time.sleep(0.01)
        got = s.recv(4096)
        print("answered" if got else "closed", flush=True)
        if got and a.linger:
            time.sleep(a.linger)
    except ConnectionResetError:
        print("reset")
    except BrokenPipeError:
        print("reset")
    except socket.timeout:
        print("timeout")


if __name__ == "__main__":
    main()
