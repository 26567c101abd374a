#!/usr/bin/env python3
"""synflood.py: raw SYNs from a sandbox, bounded in count and time.

usage: synflood.py SRC DST OUT [--sport P] [--count N] [--allow-every K]
                   [--batch B] [--sleep S | --period S] [--cycle SECS]

Builds N SYNs from SRC to DST, each from its own source port (P, P+1, ...,
so every SYN is a new 5-tuple): every K-th to port 4444, the others to 5555
(K 0: all to 5555). Sends them in batches of B, with S seconds of sleep
after each batch (--sleep) or one batch every S seconds (--period); with
--cycle it goes round the same SYNs until SECS have passed. Writes
"sent_to_4444 sent_to_5555 send_errors seconds" to OUT.
"""
import argparse
import random
import socket
import struct
import time


def csum(b):
    n = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while n >> 16:
        n = (n & 0xFFFF) + (n >> 16)
    return ~n & 0xFFFF


def syn(s_ip, d_ip, sport, dport):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, random.getrandbits(32), 0,
                      5 << 4, 0x02, 64240, 0, 0)
    c = csum(s_ip + d_ip + struct.pack("!BBH", 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, sport & 0xFFFF, 0, 64, 6,
                     0, s_ip, d_ip)
    return ip + tcp, dport


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("out")
    ap.add_argument("--sport", type=int, default=10000)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--allow-every", type=int, default=4)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--period", type=float, default=0.0)
    ap.add_argument("--cycle", type=float, default=0.0)
    a = ap.parse_args()

    s_ip, d_ip = socket.inet_aton(a.src), socket.inet_aton(a.dst)
    k = a.allow_every
    pkts = [syn(s_ip, d_ip, a.sport + i,
                4444 if k > 0 and i % k == 0 else 5555)
            for i in range(a.count)]
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sent, errors, t0 = {4444: 0, 5555: 0}, 0, time.time()

    def send(batch):
        nonlocal errors
        for p, dport in batch:
            try:
                s.sendto(p, (a.dst, 0))
                sent[dport] += 1
            except OSError:
                errors += 1

    if a.cycle > 0:
        i = 0
        while time.time() - t0 < a.cycle:
            send(pkts[i:i + a.batch])
            i = (i + a.batch) % len(pkts)
    else:
        for n, b in enumerate(range(0, len(pkts), a.batch)):
            send(pkts[b:b + a.batch])
            if a.sleep > 0:
                time.sleep(a.sleep)
            elif a.period > 0:
                lag = t0 + (n + 1) * a.period - time.time()
                if lag > 0:
                    time.sleep(lag)
    with open(a.out, "w") as f:
        f.write("%d %d %d %.2f\n" % (sent[4444], sent[5555], errors,
                                     time.time() - t0))


if __name__ == "__main__":
    main()
