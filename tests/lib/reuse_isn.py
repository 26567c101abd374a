# reuse_isn.py SRC DST SNI1 SNI2 GAP: two TLS connections from one source
# port with the same initial sequence number, built by hand over raw
# sockets (the sandbox's own kernel must not answer for the port: the
# caller drops its resets). The first presents SNI1 and asks for /first,
# then aborts (RST); GAP seconds later the second presents SNI2 and asks
# for /second. Prints what each got back (the end of the response, or
# <reset>, or "no SYN-ACK").
# reuse_isn.py SRC DST SNI1 - held N SEGS: N rounds instead, each on its
# own source port: SYN, handshake, SEGS one-byte segments of a ClientHello
# for SNI1 (held by the gateway), then a second SYN with another sequence
# number on the same 5-tuple. Prints the rounds done.
# reuse_isn.py SRC DST SNI1 SNI2 stale GAP: SNI1's hello alone to a server
# that answers and resets the connection (no FIN), then, GAP seconds
# later, SNI2's hello from the same port with a new ISN.
# reuse_isn.py SRC DST SNI1 SNI2 stale-same GAP: the same, the second
# connection with the first one's ISN.
# reuse_isn.py SRC DST HOST1 HOST2 http-stale[-same] GAP: the same over
# HTTP (port 80, or $REUSE_DPORT), HOST1's head answered and kept alive until the server
# resets the connection, then HOST2's head (see below).
# reuse_isn.py SRC DST SNI1 - resyn: one connection whose SYN is sent
# twice, the first SYN-ACK left unanswered (a retransmitted SYN).
# reuse_isn.py SRC DST SNI1 SNI2 backlog PID N: SNI1's hello, answered
# (and so proven); then, with process PID (sluiced) stopped: that
# connection reset at its exact sequence number, N bare SYNs from other
# ports, and a new connection from the first one's port (ISN 5000 later)
# whose SYN and handshake pass in the kernel (the kernel-SYN set) and
# whose first flight, SNI2's hello and a GET, waits in the queue behind N
# copies; PID is let go as soon as the hello is sent. Prints what the
# second connection got back.
import os, random, signal, socket, ssl, struct, sys, time, select
src, dst, sni1, sni2 = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
dport = 443
sport = random.randint(20000, 60000)
WIN = 65535

def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

def tcp(seq, ack, flags, opts=b"", data=b""):
    doff = (20 + len(opts)) // 4
    h = struct.pack("!HHIIBBHHH", sport, dport, seq & 0xffffffff, ack & 0xffffffff, doff << 4, flags, WIN, 0, 0) + opts
    ph = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(h) + len(data))
    c = csum(ph + h + data)
    h = h[:16] + struct.pack("!H", c) + h[18:]
    seg = h + data
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(seg), random.randint(0, 65535), 0x4000, 64, 6, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return ip + seg

tx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
def send(p): tx.sendto(p, (dst, 0))
def recv(timeout):
    end = time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([rx], [], [], max(0, end - time.time()))
        if not r: break
        p = rx.recv(65535)
        ihl = (p[0] & 15) * 4
        t = p[ihl:]
        sp, dp, seq, ack, off, fl = struct.unpack("!HHIIBB", t[:14])
        if socket.inet_ntoa(p[12:16]) != dst or sp != dport or dp != sport: continue
        return seq, ack, fl, t[(off >> 4) * 4:]
    return None

def tls_client(sni):
    # a TLS client over memory buffers: its bytes go out by hand
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
    bi, bo = ssl.MemoryBIO(), ssl.MemoryBIO()
    return ctx.wrap_bio(bi, bo, server_hostname=sni), bi, bo

def syn_ack(isn, timeout):
    # the answer to the SYN with isn: its SYN-ACK, or a reset of it;
    # other segments on the ports (a late one of an older connection) are
    # passed over. None after timeout s, or the last segment passed over.
    end = time.time() + timeout
    other = None
    while True:
        p = recv(max(0, end - time.time()))
        if p is None:
            return other
        if p[2] & 0x10 and p[1] == (isn + 1) & 0xffffffff and p[2] & 0x06:
            return p
        other = p

def handshake(isn, syns=1):
    # the SYN (sent syns times, each SYN-ACK but the last ignored), the
    # ACK: (snd, rcv), or what went wrong
    for _ in range(syns):
        send(tcp(isn, 0, 0x02, b"\x02\x04\x05\xb4"))
        sa = syn_ack(isn, 2)
    if sa is None or sa[2] & 0x12 != 0x12:
        return "no SYN-ACK %r" % (sa,)
    send(tcp(isn + 1, sa[0] + 1, 0x10))
    return isn + 1, sa[0] + 1

def session(isn, sni, path, syns=1, hs=None, on_sent=None):
    # hs: a handshake made already; on_sent: called once the first
    # bytes are out
    if hs is None:
        hs = handshake(isn, syns)
    if isinstance(hs, str):
        return hs
    snd, rcv = hs
    so, bi, bo = tls_client(sni)
    out, sent_req, body = b"", False, b""
    end = time.time() + 4
    while time.time() < end:
        try:
            if not so.server_side and not sent_req:
                so.do_handshake()
                so.write(("GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (path, sni)).encode())
                sent_req = True
            else:
                body += so.read(65536)
        except ssl.SSLWantReadError:
            pass
        except (ssl.SSLError, ssl.SSLZeroReturnError) as e:
            body += b"<%s>" % type(e).__name__.encode()
            break
        d = bo.read()
        if d:
            send(tcp(snd, rcv, 0x18, data=d)); snd += len(d)
            if on_sent is not None:
                on_sent(); on_sent = None
        r = recv(0.3)
        if r is None: continue
        seq, ack, fl, data = r
        if fl & 0x04:
            body += b"<reset>"; break
        if data and seq == rcv:
            rcv += len(data); bi.write(data)
            send(tcp(snd, rcv, 0x10))
        if fl & 0x01:
            break
    # abort: RST|ACK
    send(tcp(snd, rcv, 0x14))
    return body.decode("latin-1").replace("\r", "")[-80:]

def hello_for(sni):
    so, bi, bo = tls_client(sni)
    try: so.do_handshake()
    except ssl.SSLWantReadError: pass
    return bo.read()

def flight_only(isn, data, ack=False):
    # SYN, handshake, data; then what comes back within 2 s (the bytes
    # in order acknowledged, if ack): "server reset after" its last two
    # bytes, "reset" (nothing from the server first), or what else
    hs = handshake(isn)
    if isinstance(hs, str):
        return hs
    snd, rcv = hs
    send(tcp(snd, rcv, 0x18, data=data))
    got = b""
    end = time.time() + 2
    while time.time() < end:
        r = recv(0.3)
        if r is None: continue
        seq, _, fl, d = r
        if d and seq == rcv:
            got += d; rcv += len(d)
            if ack:
                send(tcp(snd + len(data), rcv, 0x10))
        if fl & 0x04:
            return ("server reset after %r" % got[-2:]) if got else "reset"
    return "nothing but %r" % got

def hello_only(isn, sni):
    return flight_only(isn, hello_for(sni))

def http_only(isn, host, path):
    # one request head for host, kept alive
    head = ("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (path, host)).encode()
    return flight_only(isn, head, ack=True)

if len(sys.argv) > 5 and sys.argv[5] in ("http-stale", "http-stale-same"):
    # HTTP to port 80: SNI1 is a Host, asked for by a long path, to a
    # server that answers, keeps the connection a moment and resets it
    # (no FIN); GAP seconds later a new connection from the same port
    # asks SNI2 for a short path, with an ISN a long way behind the
    # first's (http-stale) or the first's own (http-stale-same): its
    # head lies wholly before where the first connection's stream had got
    dport = int(os.environ.get("REUSE_DPORT", "80"))
    isn = random.randint(2**20, 2**31)
    print("conn1:", http_only(isn, sni1, "/first/" + "x" * 64))
    time.sleep(float(sys.argv[6]))
    if sys.argv[5] == "http-stale":
        isn -= 100000
    print("conn2:", http_only(isn, sni2, "/s"))
elif len(sys.argv) > 5 and sys.argv[5] in ("stale", "stale-same"):
    # SNI1's hello to a server that answers and resets (no FIN); GAP
    # seconds later a new connection from the same port, SNI2's hello,
    # with a new ISN or the same one
    isn = random.randint(0, 2**31)
    print("conn1:", hello_only(isn, sni1))
    time.sleep(float(sys.argv[6]))
    if sys.argv[5] == "stale":
        isn = random.randint(0, 2**31)
    print("conn2:", hello_only(isn, sni2))
elif len(sys.argv) > 5 and sys.argv[5] == "backlog":
    pid, n = int(sys.argv[6]), int(sys.argv[7])
    isn = random.randint(0, 2**30)
    hs = handshake(isn)
    if isinstance(hs, str):
        print("conn1:", hs); sys.exit(1)
    snd, rcv = hs
    h = hello_for(sni1)
    send(tcp(snd, rcv, 0x18, data=h)); snd += len(h)
    got, end = b"", time.time() + 1
    while time.time() < end and len(got) < 100:
        r = recv(0.2)
        if r is None: continue
        if r[3] and r[0] == rcv:
            got += r[3]; rcv += len(r[3])
    print("conn1: %d bytes back, port %d" % (len(got), sport))
    time.sleep(0.1)     # the proof read: the flow table's entry lives 2 s
    os.kill(pid, signal.SIGSTOP)
    try:
        send(tcp(snd, rcv, 0x14))   # conn1 aborted: conntrack may reopen
        port1 = sport
        for k in range(n):
            sport = 1024 + (port1 + 1 + k) % 60000
            send(tcp(random.randint(0, 2**32 - 1), 0, 0x02))
        sport = port1
        print("conn2:", repr(session(0, sni2, "/second", hs=handshake(isn + 5000),
                                     on_sent=lambda: os.kill(pid, signal.SIGCONT))))
    finally:
        os.kill(pid, signal.SIGCONT)
elif len(sys.argv) > 5 and sys.argv[5] == "resyn":
    # one connection whose SYN is sent twice (the first SYN-ACK ignored):
    # a retransmission, as a client whose SYN-ACK was lost makes
    print("conn1:", repr(session(random.randint(0, 2**31), sni1, "/first", 2)))
elif len(sys.argv) > 5 and sys.argv[5] == "held":
    # N rounds, each on its own source port: SYN, handshake, SEGS one-byte
    # segments of a ClientHello (held), then a second SYN on the same 5-tuple.
    import random as R
    n, segs = int(sys.argv[6]), int(sys.argv[7])
    hello = hello_for(sni1); print("hello len", len(hello))
    ok = 0
    for k in range(n):
        sport = R.randint(20000, 60000)
        isn = R.randint(0, 2**31)
        send(tcp(isn, 0, 0x02, b"\x02\x04\x05\xb4"))
        sa = recv(1)
        if sa is None or sa[2] & 0x12 != 0x12:
            continue
        snd, rcv = isn + 1, sa[0] + 1
        send(tcp(snd, rcv, 0x10))
        for j in range(segs):
            send(tcp(snd + j, rcv, 0x18, data=hello[j:j+1]))
        send(tcp(isn + 77777, 0, 0x02, b"\x02\x04\x05\xb4"))
        ok += 1
    print("rounds done:", ok)
else:
    isn = random.randint(0, 2**31)
    print("conn1:", repr(session(isn, sni1, "/first")))
    time.sleep(float(sys.argv[5]))
    print("conn2:", repr(session(isn, sni2, "/second")))
