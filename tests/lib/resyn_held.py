# resyn_held.py SRC DST SNI _ N SEGS: N rounds, each on its own source
# port, built by hand over raw sockets (the caller drops the sandbox
# kernel's own resets): SYN, handshake, SEGS one-byte segments of a
# ClientHello for SNI (so the gateway holds them), then a second SYN with
# another sequence number on the same 5-tuple. Prints the rounds done.
import random, socket, ssl, struct, sys, time, select
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

# N rounds, each on its own source port: SYN, handshake, SEGS one-byte
# segments of a ClientHello (held), then a second SYN on the same 5-tuple.
import random as R
n, segs = int(sys.argv[5]), int(sys.argv[6])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname=False; ctx.verify_mode=ssl.CERT_NONE
bi, bo = ssl.MemoryBIO(), ssl.MemoryBIO(); so = ctx.wrap_bio(bi, bo, server_hostname=sni1)
try: so.do_handshake()
except ssl.SSLWantReadError: pass
hello = bo.read(); print("hello len", len(hello))
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
