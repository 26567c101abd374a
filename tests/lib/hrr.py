#!/usr/bin/env python3
"""hrr.py ADDR SNI1 SNI2 [PORT]: a TLS 1.3 client that makes the server
send a HelloRetryRequest: its first ClientHello names SNI1 and offers x25519
with no key share; its second, after the HelloRetryRequest, names SNI2 (RFC
8446 4.1.2 wants it unchanged). It completes the handshake (x25519,
TLS_AES_128_GCM_SHA256, written out here: no TLS library lets a client
change its name between the two hellos) and asks GET / with Host SNI2.
Prints "hrr received", "certificate for NAMES" and "answer: BODY", or why
it stopped. HRR_EARLY=1 sends the second hello at once, before the
HelloRetryRequest comes."""
import hashlib, hmac, os, socket, struct, sys
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography import x509

addr, sni1, sni2 = sys.argv[1], sys.argv[2], sys.argv[3]
port = int(sys.argv[4]) if len(sys.argv) > 4 else 443

def ext(t, b): return struct.pack(">HH", t, len(b)) + b
def u16(b): return struct.pack(">H", len(b)) + b
def u8(b): return bytes([len(b)]) + b

def hello(sni, keyshare, cookie=None):
    e = ext(0, u16(b"\x00" + u16(sni.encode())))
    e += ext(10, u16(struct.pack(">H", 0x001d)))          # x25519 only
    e += ext(13, u16(struct.pack(">HHH", 0x0804, 0x0403, 0x0401)))
    e += ext(43, u8(struct.pack(">H", 0x0304)))
    e += ext(51, u16(keyshare))
    e += ext(16, u16(u8(b"http/1.1")))
    if cookie is not None:
        e += ext(44, cookie)
    body = b"\x03\x03" + os.urandom(32) + b"\x00" + u16(struct.pack(">H", 0x1301)) + b"\x01\x00" + u16(e)
    return b"\x01" + struct.pack(">I", len(body))[1:] + body

def rec(ct, b): return bytes([ct]) + b"\x03\x03" + u16(b)

s = socket.create_connection((addr, port), timeout=5)
buf = b""
def read_record():
    global buf
    while True:
        if len(buf) >= 5:
            n = struct.unpack(">H", buf[3:5])[0]
            if len(buf) >= 5 + n:
                r = buf[:5 + n]; buf = buf[5 + n:]
                return r[0], r[5:]
        d = s.recv(65536)
        if not d:
            raise SystemExit("closed; got %r" % buf[:50])
        buf += d

early = os.environ.get("HRR_EARLY") == "1"
priv = X25519PrivateKey.generate()
from cryptography.hazmat.primitives import serialization as _s
pub = priv.public_key().public_bytes(_s.Encoding.Raw, _s.PublicFormat.Raw)
ch1 = hello(sni1, b"")
s.sendall(rec(22, ch1))
if early:
    # HRR_EARLY=1: the second hello goes at once, ahead of the
    # HelloRetryRequest it expects (no cookie: the server sends none)
    ch2 = hello(sni2, struct.pack(">HH", 0x1d, 32) + pub)
    s.sendall(rec(22, ch2))
ct, hrr = read_record()
if ct != 22 or hrr[0] != 2:
    raise SystemExit("no HRR: %d %r" % (ct, hrr[:10]))
print("hrr received")
# cookie, if any
cookie = None
p = 4 + 2 + 32; sl = hrr[p]; p += 1 + sl + 3
el = struct.unpack(">H", hrr[p:p+2])[0]; p += 2; end = p + el
while p < end:
    t, l = struct.unpack(">HH", hrr[p:p+4]); v = hrr[p+4:p+4+l]; p += 4 + l
    if t == 44: cookie = v
if not early:
    ch2 = hello(sni2, struct.pack(">HH", 0x1d, 32) + pub, cookie)
    s.sendall(rec(22, ch2))
H = hashlib.sha256
th = H()
th.update(b"\xfe\x00\x00\x20" + H(ch1).digest())
th.update(hrr); th.update(ch2)
# server hello (skip a CCS)
while True:
    ct, sh = read_record()
    if ct != 20: break
th.update(sh)
p = 4 + 2 + 32; sl = sh[p]; p += 1 + sl + 3
el = struct.unpack(">H", sh[p:p+2])[0]; p += 2; end = p + el
spub = None
while p < end:
    t, l = struct.unpack(">HH", sh[p:p+4]); v = sh[p+4:p+4+l]; p += 4 + l
    if t == 51: spub = v[4:]
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey
shared = priv.exchange(X25519PublicKey.from_public_bytes(spub))
def hkdf_extract(salt, ikm): return hmac.new(salt, ikm, H).digest()
def hkdf_expand_label(secret, label, ctx, n):
    info = struct.pack(">H", n) + u8(b"tls13 " + label) + u8(ctx)
    out, t, i = b"", b"", 1
    while len(out) < n:
        t = hmac.new(secret, t + info + bytes([i]), H).digest(); out += t; i += 1
    return out[:n]
def derive(secret, label, msgs_hash): return hkdf_expand_label(secret, label, msgs_hash, 32)
early = hkdf_extract(b"\x00" * 32, b"\x00" * 32)
hs = hkdf_extract(derive(early, b"derived", H(b"").digest()), shared)
h_sh = th.copy().digest()
c_hs = derive(hs, b"c hs traffic", h_sh)
s_hs = derive(hs, b"s hs traffic", h_sh)
def keys(sec): return hkdf_expand_label(sec, b"key", b"", 16), hkdf_expand_label(sec, b"iv", b"", 12)
class Dir:
    def __init__(self, sec): self.k, self.iv = keys(sec); self.n = 0
    def nonce(self):
        x = bytes(4) + struct.pack(">Q", self.n); self.n += 1
        return bytes(a ^ b for a, b in zip(self.iv, x))
sdir = Dir(s_hs)
hsbuf = b""
names = []
server_fin = None
while server_fin is None:
    ct, body = read_record()
    if ct == 20: continue
    pt = AESGCM(sdir.k).decrypt(sdir.nonce(), body, bytes([23, 3, 3]) + u16(body)[:2])
    pt = pt.rstrip(b"\x00"); inner = pt[-1]; pt = pt[:-1]
    hsbuf += pt
    while len(hsbuf) >= 4:
        n = struct.unpack(">I", b"\x00" + hsbuf[1:4])[0]
        if len(hsbuf) < 4 + n: break
        m = hsbuf[:4 + n]; hsbuf = hsbuf[4 + n:]
        if m[0] == 11:
            q = 4; cl = m[q]; q += 1 + cl + 3
            l = struct.unpack(">I", b"\x00" + m[q:q+3])[0]
            cert = x509.load_der_x509_certificate(m[q+3:q+3+l])
            try:
                names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
            except Exception:
                names = [a.value for a in cert.subject]
            print("certificate for", ",".join(names))
        if m[0] == 20:
            server_fin = m
        th.update(m)
h_sf = th.copy().digest()
cdir = Dir(c_hs)
fk = hkdf_expand_label(c_hs, b"finished", b"", 32)
cfin = b"\x14\x00\x00\x20" + hmac.new(fk, h_sf, H).digest()
def send_enc(d, data, ctype):
    pt = data + bytes([ctype])
    hdr = bytes([23, 3, 3]) + struct.pack(">H", len(pt) + 16)
    s.sendall(hdr + AESGCM(d.k).encrypt(d.nonce(), pt, hdr))
send_enc(cdir, cfin, 22)
ms = hkdf_extract(derive(hs, b"derived", H(b"").digest()), b"\x00" * 32)
c_ap = derive(ms, b"c ap traffic", h_sf)
s_ap = derive(ms, b"s ap traffic", h_sf)
ca, sa = Dir(c_ap), Dir(s_ap)
send_enc(ca, ("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni2).encode(), 23)
out = b""
try:
    while True:
        ct, body = read_record()
        if ct != 23: continue
        pt = AESGCM(sa.k).decrypt(sa.nonce(), body, bytes([23, 3, 3]) + u16(body)[:2]).rstrip(b"\x00")
        if pt[-1] == 23: out += pt[:-1]
        elif pt[-1] == 21: break
except (SystemExit, OSError):
    pass
print("answer:", out.split(b"\r\n\r\n", 1)[-1].decode(errors="replace").strip())
