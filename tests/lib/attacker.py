#!/usr/bin/env python3
"""attacker.py: the test bed's attacker host; records everything that reaches it.

Runs inside the attacker network namespace (python3 stdlib only). Three
record files, one JSON object per line, flushed line by line so a test can
read them at any moment:

  attacker.packets  every IPv4/IPv6 packet that arrives on the interface
                    (AF_PACKET sniffer; ARP and our own outgoing packets are
                    left out): ts, proto, src, dst, sport, dport, flags (TCP),
                    icmp_type/icmp_code (ICMP), len (payload bytes), iplen
  attacker.conns    every TCP connection, written when it ends: ts, peer,
                    peer_port, port (the port the client asked for, from
                    SO_ORIGINAL_DST), bytes (count), data_b64, data_hex
  attacker.udp      every UDP datagram (from the sniffer, so the original
                    port is kept): ts, src, sport, port, bytes, data_b64,
                    data_hex

The caller redirects every TCP and UDP port to --port with iptables
REDIRECT. TCP is answered with "attacker\\n" once the client has sent
something, and closed from here after 1 s of silence after that (5 s
before it); UDP datagrams get the same answer, so a test can tell that a
reply would have come back. The ready file is written when all sockets
are open.
"""

import argparse
import base64
import json
import os
import select
import signal
import socket
import struct
import sys
import threading
import time

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
PACKET_OUTGOING = 4
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h
ANSWER = b"attacker\n"
CONN_FIRST_S = 5.0    # how long a client may take to send its first bytes
CONN_IDLE_S = 1.0     # after the answer, silence this long ends the connection
CONN_MAX_BYTES = 1 << 20  # keep at most this much of one connection

TCP_FLAG_NAMES = "FSRPAUEC"  # bit 0 = FIN ... bit 7 = CWR


class Recorder:
    """Appends JSON lines to a file; safe to use from several threads."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.f = open(path, "a", buffering=1, encoding="ascii")

    def write(self, obj):
        line = json.dumps(obj, separators=(",", ":"), sort_keys=True)
        with self.lock:
            self.f.write(line + "\n")
            self.f.flush()


def tcp_flags(bits):
    return "".join(c for i, c in enumerate(TCP_FLAG_NAMES) if bits & (1 << i))


def l4_fields(rec, proto, l4, total_payload):
    """Fills ports/flags from a transport header; returns the payload."""
    if proto == 6 and len(l4) >= 20:
        sport, dport, _seq, _ack, off, bits = struct.unpack("!HHIIBB", l4[:14])
        hlen = (off >> 4) * 4
        rec.update(proto="tcp", sport=sport, dport=dport, flags=tcp_flags(bits),
                   len=max(0, total_payload - hlen))
        return l4[hlen:]
    if proto == 17 and len(l4) >= 8:
        sport, dport, ulen = struct.unpack("!HHH", l4[:6])
        rec.update(proto="udp", sport=sport, dport=dport,
                   len=max(0, min(ulen, total_payload) - 8))
        return l4[8:8 + rec["len"]]
    if proto in (1, 58) and len(l4) >= 4:
        rec.update(proto="icmp" if proto == 1 else "icmp6",
                   icmp_type=l4[0], icmp_code=l4[1],
                   len=max(0, total_payload - 4))
        return b""
    rec.update(proto=str(proto), len=total_payload)
    return b""


def parse_ipv4(pkt):
    if len(pkt) < 20 or pkt[0] >> 4 != 4:
        return None, b""
    ihl = (pkt[0] & 0x0F) * 4
    iplen = struct.unpack("!H", pkt[2:4])[0]
    frag = struct.unpack("!H", pkt[6:8])[0]
    rec = {"family": 4, "src": socket.inet_ntoa(pkt[12:16]),
           "dst": socket.inet_ntoa(pkt[16:20]), "iplen": iplen,
           "sport": None, "dport": None, "flags": None}
    if frag & 0x1FFF:
        # A later fragment has no transport header of its own.
        rec.update(proto="frag", len=max(0, iplen - ihl))
        return rec, b""
    body = pkt[ihl:iplen]
    return rec, l4_fields(rec, pkt[9], body, len(body))


def parse_ipv6(pkt):
    if len(pkt) < 40:
        return None, b""
    plen = struct.unpack("!H", pkt[4:6])[0]
    rec = {"family": 6, "src": socket.inet_ntop(socket.AF_INET6, pkt[8:24]),
           "dst": socket.inet_ntop(socket.AF_INET6, pkt[24:40]),
           "iplen": plen + 40, "sport": None, "dport": None, "flags": None}
    body = pkt[40:40 + plen]
    # Extension headers are not walked: the next-header value is recorded.
    return rec, l4_fields(rec, pkt[6], body, len(body))


def sniffer(s, packets, udp, my_addr):
    while True:
        pkt, addr = s.recvfrom(65535)
        ethertype, pkttype = addr[1], addr[2]
        if pkttype == PACKET_OUTGOING or ethertype == ETH_P_ARP:
            continue
        if ethertype == ETH_P_IP:
            rec, payload = parse_ipv4(pkt)
        elif ethertype == ETH_P_IPV6:
            rec, payload = parse_ipv6(pkt)
        else:
            continue
        if rec is None:
            continue
        rec["ts"] = round(time.time(), 6)
        packets.write(rec)
        if rec["proto"] == "udp" and rec["dst"] == my_addr:
            udp.write({"ts": rec["ts"], "src": rec["src"], "sport": rec["sport"],
                       "port": rec["dport"], "bytes": len(payload),
                       "data_b64": base64.b64encode(payload).decode(),
                       "data_hex": payload.hex()})


def original_port(conn):
    try:
        raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
        return struct.unpack("!H", raw[2:4])[0], socket.inet_ntoa(raw[4:8])
    except OSError:
        # Not redirected (someone connected straight to the listening port).
        addr = conn.getsockname()
        return addr[1], addr[0]


def serve_conn(conn, peer, conns):
    port, orig_dst = original_port(conn)
    data = bytearray()
    answered = False
    start = time.time()
    try:
        # A client that keeps its side open (nc without -N) would hold
        # the connection, and its record, until its own timeout: once it
        # has been answered, a short silence closes it from here.
        conn.settimeout(CONN_FIRST_S)
        while True:
            try:
                chunk = conn.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            if len(data) < CONN_MAX_BYTES:
                data += chunk[:CONN_MAX_BYTES - len(data)]
            if not answered:
                answered = True
                conn.settimeout(CONN_IDLE_S)
                try:
                    conn.sendall(ANSWER)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        conn.close()
    conns.write({"ts": round(start, 6), "end": round(time.time(), 6),
                 "peer": peer[0], "peer_port": peer[1], "dst": orig_dst,
                 "port": port, "bytes": len(data), "answered": answered,
                 "data_b64": base64.b64encode(bytes(data)).decode(),
                 "data_hex": bytes(data).hex()})


def tcp_server(lsock, conns):
    while True:
        conn, peer = lsock.accept()
        threading.Thread(target=serve_conn, args=(conn, peer, conns),
                         daemon=True).start()


def udp_server(usock):
    while True:
        _data, peer = usock.recvfrom(65535)
        try:
            usock.sendto(ANSWER, peer)
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="where the record files go")
    ap.add_argument("--iface", default="eth0")
    ap.add_argument("--addr", required=True, help="the attacker's own address")
    ap.add_argument("--port", type=int, default=10999,
                    help="the port every TCP/UDP port is redirected to")
    args = ap.parse_args()

    packets = Recorder(os.path.join(args.dir, "attacker.packets"))
    conns = Recorder(os.path.join(args.dir, "attacker.conns"))
    udp = Recorder(os.path.join(args.dir, "attacker.udp"))

    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("0.0.0.0", args.port))
    lsock.listen(512)
    usock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    usock.bind(("0.0.0.0", args.port))

    # SOCK_DGRAM strips the link header; sll_pkttype tells our own
    # outgoing packets apart from what arrives.
    psock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM,
                          socket.htons(ETH_P_ALL))
    psock.bind((args.iface, 0))
    psock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    threading.Thread(target=sniffer, args=(psock, packets, udp, args.addr),
                     daemon=True).start()
    threading.Thread(target=tcp_server, args=(lsock, conns), daemon=True).start()
    threading.Thread(target=udp_server, args=(usock,), daemon=True).start()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ready = os.path.join(args.dir, "attacker.ready")
    with open(ready + ".tmp", "w") as f:
        f.write("%d\n" % os.getpid())
    os.rename(ready + ".tmp", ready)
    while True:
        select.select([], [], [])  # threads do the work; SIGTERM ends us


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
