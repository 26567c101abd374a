#!/usr/bin/env python3
"""pcapsniff.py: every frame on one interface, both directions, to a classic pcap file.

Run inside a namespace (ip netns exec NS pcapsniff.py --iface eth0 --out F);
it writes --ready once it is listening and stops cleanly on SIGTERM or
SIGINT. Linktype DLT_EN10MB, microsecond timestamps, nothing cut short.
Each record is flushed as it is written, so the file is readable (whole
records only) at any moment.
"""
import argparse
import os
import select
import signal
import socket
import struct
import sys
import time

ETH_P_ALL = 0x0003
DLT_EN10MB = 1
SNAPLEN = 262144

stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iface", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ready", help="a file made once capturing")
    a = ap.parse_args()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((a.iface, ETH_P_ALL))
    s.setblocking(False)
    n = 0
    with open(a.out, "wb") as f:
        f.write(struct.pack("=IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN,
                            DLT_EN10MB))
        f.flush()
        if a.ready:
            with open(a.ready, "w") as r:
                r.write("%d\n" % os.getpid())
        while not stop:
            try:
                rd, _, _ = select.select([s], [], [], 0.2)
            except InterruptedError:
                continue
            if not rd:
                continue
            while True:
                try:
                    data = s.recv(SNAPLEN)
                except (BlockingIOError, InterruptedError):
                    break
                ts = time.time_ns() // 1000
                f.write(struct.pack("=IIII", ts // 1000000, ts % 1000000,
                                    len(data), len(data)))
                f.write(data)
                n += 1
            f.flush()
    print("pcapsniff: %d frames" % n, file=sys.stderr)


if __name__ == "__main__":
    main()
