#!/usr/bin/env python3
"""tuple_reuse.py: opens a connection from a fixed source port, resets it,
optionally sends one more in-window ACK on the dead connection (a raw
packet, as root in the sandbox may), then connects again from the same
port and sends a second first flight.

  tuple_reuse.py SRC DST PORT SPORT FLIGHT1 FLIGHT2 [--no-ack]

A FLIGHT is "tls:NAME": a real TLS handshake with SNI NAME (certificate
not checked) and "GET /" with Host NAME; or a file whose bytes are sent.
Prints three lines: "first: RESULT", "ack: yes|no", "second: RESULT",
RESULT being "body: FIRST LINE" (TLS), "answered HEX" (the first bytes
the server sent), "reset", "closed" or "timeout".

Why it matters: conntrack keeps an entry reset by the client in CLOSE for
10 s. A new SYN on that 5-tuple normally makes conntrack drop the entry
and start a new one (mark 0, so sluiced sees the SYN), but only if the
last packet it saw was the client's RST or a FIN was ever seen; after any
other in-window packet the SYN reuses the old entry, with the old
connection's mark.
"""
import socket
import ssl
import struct
import sys
import time


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def tcp_packet(src, dst, sport, dport, seq, ack, flags):
    sa, da = socket.inet_aton(src), socket.inet_aton(dst)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, 5 << 4, flags, 502, 0, 0)
    ph = sa + da + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", csum(ph + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0x1234, 0x4000,
                     64, socket.IPPROTO_TCP, 0, sa, da)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + tcp


def own_rst(sniff, sport, dport, deadline):
    """seq and ack of the RST the kernel sent for our aborted socket."""
    while time.time() < deadline:
        try:
            f = sniff.recv(65535)
        except socket.timeout:
            continue
        ip = f[14:]
        if len(ip) < 40 or ip[9] != socket.IPPROTO_TCP:
            continue
        ihl = (ip[0] & 15) * 4
        sp, dp, seq, ack, _, fl = struct.unpack("!HHIIBB", ip[ihl:ihl + 14])
        if sp == sport and dp == dport and fl & 0x04:
            return seq, ack
    return None


def tls_get(s, name):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=name, do_handshake_on_connect=True)
    t.sendall(b"GET / HTTP/1.1\r\nHost: " + name.encode() + b"\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        d = t.recv(4096)
        if not d:
            break
        data += d
    t.close()
    body = data.split(b"\r\n\r\n", 1)[-1]
    return "body: " + body.decode("ascii", "replace").splitlines()[0] if body else "closed"


def connect_once(src, dst, port, sport, flight):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((src, sport))
    s.settimeout(2)
    try:
        s.connect((dst, port))
        if flight.startswith("tls:"):
            res = tls_get(s, flight[4:])
        else:
            s.sendall(open(flight, "rb").read())
            d = s.recv(64)
            res = "answered " + d[:8].hex() if d else "closed"
    except (ConnectionResetError, ssl.SSLError):
        res = "reset"
    except socket.timeout:
        res = "timeout"
    except OSError as e:
        res = "error " + str(e)
    # A reset: no TIME_WAIT, so the port can be bound again at once
    # (a TLS socket has taken the descriptor over and closed it).
    if s.fileno() != -1:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    return res


def main():
    src, dst = sys.argv[1], sys.argv[2]
    port, sport = int(sys.argv[3]), int(sys.argv[4])
    flight1, flight2 = sys.argv[5], sys.argv[6]
    send_ack = "--no-ack" not in sys.argv[7:]

    sniff = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    sniff.bind(("eth0", 0))
    sniff.settimeout(0.05)
    print("first:", connect_once(src, dst, port, sport, flight1))
    rst = own_rst(sniff, sport, port, time.time() + 1)
    sent = False
    if send_ack and rst is not None:
        raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
        raw.sendto(tcp_packet(src, dst, sport, port, rst[0], rst[1], 0x10), (dst, 0))
        sent = True
        time.sleep(0.05)
    print("ack:", "yes" if sent else "no")
    print("second:", connect_once(src, dst, port, sport, flight2))


if __name__ == "__main__":
    main()
