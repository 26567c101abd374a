#!/usr/bin/env python3
"""report.py: the soak's checks and summary, from what tests/soak/run.sh collected.

Usage: report.py DIR SANDBOXES PREFIX WARMUP_S LOAD_S CONNS DNS SECS OUTDIR

DIR holds the run's files: conn.N.json and dns.N.json (the clients'
counts), flow_rows and dns_rows (grouped row counts from the database),
series (sluiced's VmRSS and fds over time), status.json, sink.final.json,
attacker.*.n, lost, ended, dbsize, udp_drops, ct_stats. Prints the summary as
Markdown and writes it to OUTDIR/latest.md; exits 0 if every check
passed, 1 otherwise.
"""

import datetime
import json
import os
import platform
import socket
import sys

# what each connection target and each kind of query must come out as
CONN_EXPECT = {
    "192.0.2.10:7000": ("allow", "allowed_domain"),
    "192.0.2.20:7000": ("allow", "allowed_cidr"),
    "192.0.2.20:7001": ("deny", "port_not_allowed"),
    "203.0.113.66:5000": ("deny", "no_dns_binding"),
    "203.0.113.66:5001": ("deny", "no_dns_binding"),
}
DNS_EXPECT = {  # class: (qtype, qname as grouped, rcode, verdict, reason)
    "a": ("A", "a.test", "NOERROR", "allow", "allowed_domain"),
    "aaaa": ("AAAA", "a.test", "NOERROR", "allow", "no_ipv6"),
    "exfil": ("A", "exfil", "NXDOMAIN", "deny", "not_allowlisted"),
    "txt": ("TXT", "a.test", "REFUSED", "allow", "type_not_allowed"),
}
# The test bed's upstream (dnsmasq) may miss a query under load: sluiced
# then answers SERVFAIL after its upstream timeout, with this row. That is
# the upstream's doing, counted and shown, not a failure of the gateway.
UPSTREAM_FAILED = ("SERVFAIL", "allow", "upstream_failed")


def rows_of(path):
    with open(path) as f:
        return [l.rstrip("\n").split("|") for l in f if l.strip()]


def main():
    (d, nsb, prefix, warm_s, load_s, want_conns, want_dns, want_secs,
     outdir) = sys.argv[1:10]
    nsb, warm_s, load_s = int(nsb), int(warm_s), int(load_s)
    checks, out = [], []

    def check(ok, msg):
        checks.append((bool(ok), msg))

    def say(s=""):
        out.append(s)

    def read(name):
        with open(os.path.join(d, name)) as f:
            return f.read()

    series = [l.split() for l in read("series").splitlines() if l.strip()]
    flow_rows = rows_of(os.path.join(d, "flow_rows"))
    dns_rows = rows_of(os.path.join(d, "dns_rows"))
    lost_n, lost_sum = read("lost").strip().split("|")
    status = json.loads(read("status.json"))
    sink = json.loads(read("sink.final.json"))
    att = {f: int(read("attacker.%s.n" % f)) for f in ("packets", "conns", "udp")}
    gw_inerr, gw_rcvbuf, sb_rcvbuf, up_rcvbuf = (int(x) for x in read("udp_drops").split())
    ct = dict(zip(("clash_resolved", "invalid", "insert_failed", "drop", "early_drop"),
                  (int(x) for x in read("ct_stats").split())))

    # ---- connections: per target over all sandboxes, rows vs attempts
    conn = {}   # target -> counters
    diff = {}   # target -> sandboxes whose rows differ from their attempts
    elapsed = 0.0
    for i in range(1, nsb + 1):
        sb = "%s-s%d" % (prefix, i)
        c = json.loads(read("conn.%d.json" % i))
        elapsed = max(elapsed, c["elapsed_s"])
        per = {}
        for t in c["targets"]:
            a = per.setdefault(t["target"], {"attempts": 0, "ok": 0, "refused": 0,
                                             "timeout": 0, "reset": 0, "eof": 0, "error": 0})
            for k in a:
                a[k] += t[k]
        for dst, a in per.items():
            r = {(v, rs): int(n) for s, dd, v, rs, n in flow_rows if s == sb and dd == dst}
            tot = conn.setdefault(dst, {"attempts": 0, "ok": 0, "refused": 0, "timeout": 0,
                                        "reset": 0, "eof": 0, "error": 0,
                                        "rows": 0, "expected_rows": 0, "other": {}})
            for k in a:
                tot[k] += a[k]
            tot["rows"] += sum(r.values())
            tot["expected_rows"] += r.get(CONN_EXPECT[dst], 0)
            for k, n in r.items():
                if k != CONN_EXPECT[dst]:
                    tot["other"][k] = tot["other"].get(k, 0) + n
            if sum(r.values()) != a["attempts"]:
                diff.setdefault(dst, []).append("s%d %d/%d" % (i, sum(r.values()), a["attempts"]))
    for dst in sorted(conn):
        t, (verdict, reason) = conn[dst], CONN_EXPECT[dst]
        check(t["rows"] == t["attempts"] and not diff.get(dst),
              "%s: %d rows for %d attempts%s" % (dst, t["rows"], t["attempts"],
              "" if not diff.get(dst) else " (" + ", ".join(diff[dst]) + ")"))
        check(t["expected_rows"] == t["rows"], "%s: every row %s/%s%s" % (
              dst, verdict, reason, "" if not t["other"] else ", not " + str(t["other"])))
        fails = ", ".join("%d %s" % (t[k], k) for k in ("timeout", "reset", "eof", "error") if t[k])
        if verdict == "allow":
            check(t["ok"] == t["attempts"], "%s: %d of %d allowed connections answered%s"
                  % (dst, t["ok"], t["attempts"], "" if not fails else " (" + fails + ")"))
        else:
            check(t["ok"] == 0 and t["refused"] == t["attempts"],
                  "%s: %d of %d denied connections refused at once, %d answered%s"
                  % (dst, t["refused"], t["attempts"], t["ok"], "" if not fails else " (" + fails + ")"))

    # ---- DNS: per class over all sandboxes, rows vs queries sent
    dns = {}
    for i in range(1, nsb + 1):
        sb = "%s-s%d" % (prefix, i)
        q = json.loads(read("dns.%d.json" % i))
        elapsed = max(elapsed, q["elapsed_s"])
        for cls, st in q["classes"].items():
            qtype, qname, rc, verdict, reason = DNS_EXPECT[cls]
            mine = [(rcode, v, rs, int(n)) for s, qt, nm, rcode, v, rs, n in dns_rows
                    if s == sb and qt == qtype and nm == qname]
            t = dns.setdefault(cls, {"sent": 0, "answered": 0, "timeout": 0, "as_expected": 0,
                                     "rows": 0, "expected_rows": 0, "upstream_failed": 0,
                                     "other": {}})
            t["sent"] += st["sent"]
            t["answered"] += st["answered"]
            t["timeout"] += st["timeout"]
            t["as_expected"] += st[rc]
            for rcode, v, rs, n in mine:
                t["rows"] += n
                if (rcode, v, rs) == (rc, verdict, reason):
                    t["expected_rows"] += n
                elif cls == "a" and (rcode, v, rs) == UPSTREAM_FAILED:
                    t["upstream_failed"] += n
                else:
                    t["other"][(rcode, v, rs)] = t["other"].get((rcode, v, rs), 0) + n
    sent = sum(t["sent"] for t in dns.values())
    drows = sum(t["rows"] for t in dns.values())
    for cls in ("a", "aaaa", "exfil", "txt"):
        t = dns[cls]
        _, _, rc, verdict, reason = DNS_EXPECT[cls]
        check(t["rows"] == t["sent"], "dns %s: %d rows for %d queries sent (%d timed out at the client)"
              % (cls, t["rows"], t["sent"], t["timeout"]))
        check(not t["other"] and t["expected_rows"] + t["upstream_failed"] == t["rows"],
              "dns %s: every row %s/%s/%s%s%s" % (cls, rc, verdict, reason,
              "" if not t["upstream_failed"] else " (or SERVFAIL/upstream_failed: %d)" % t["upstream_failed"],
              "" if not t["other"] else ", not " + str(t["other"])))
        check(t["as_expected"] + t["upstream_failed"] == t["answered"],
              "dns %s: %d of %d answers %s%s" % (cls, t["as_expected"], t["answered"], rc,
              "" if not t["upstream_failed"] else " (and %d SERVFAIL)" % t["upstream_failed"]))
    check(sent == drows + gw_rcvbuf,
          "DNS accounting: %d queries sent = %d rows + %d dropped by the gateway's kernel (UDP receive buffer full)"
          % (sent, drows, gw_rcvbuf))

    # ---- the far side, the log's own losses
    check(int(lost_n) == 0, "lost_records is empty (%s rows, %s records)" % (lost_n, lost_sum))
    check(att["packets"] == 0 and att["conns"] == 0 and att["udp"] == 0,
          "the attacker host received nothing (%d packets, %d connections, %d datagrams)"
          % (att["packets"], att["conns"], att["udp"]))
    denied_port = sink.get("192.0.2.20:7001", {})
    deny_bytes = sum(v["deny_bytes"] for v in sink.values())
    check(denied_port.get("accepted", -1) == 0 and deny_bytes == 0,
          "the sink got no connection on the denied port (%s) and no \"soak-deny\" bytes (%d)"
          % (denied_port.get("accepted"), deny_bytes))
    allowed_acc = sum(v["accepted"] for k, v in sink.items() if k.endswith(":7000"))
    allow_rows = sum(int(n) for s, dd, v, rs, n in flow_rows if v == "allow")
    check(allowed_acc <= allow_rows, "connections the sink accepted (%d) <= allow rows (%d)"
          % (allowed_acc, allow_rows))
    ended = int(read("ended").strip())
    check(ended == allow_rows, "every allow row has its end counters (%d of %d)"
          % (ended, allow_rows))

    # ---- memory and descriptors
    warm = next((s for s in series if s[1] == "load" and int(s[0]) >= warm_s), series[0])
    final = series[-1]
    rss_w, fds_w, rss_f, fds_f = int(warm[2]), int(warm[3]), int(final[2]), int(final[3])
    # the resolver's upstream sockets (a pool of at most 8 per upstream,
    # opened as needed) are counted apart from the rest
    ups_w = int(warm[5]) if len(warm) > 5 else 0
    ups_f = int(final[5]) if len(final) > 5 else 0
    ups_max = max(int(s[5]) if len(s) > 5 else 0 for s in series)
    rss_peak = max(int(s[2]) for s in series)
    rss_limit = rss_w + max(8192, rss_w // 4)
    check(rss_f <= rss_limit, "VmRSS after the soak %d kB, after warm-up %d kB (limit %d kB; peak %d kB)"
          % (rss_f, rss_w, rss_limit, rss_peak))
    check(abs((fds_f - ups_f) - (fds_w - ups_w)) <= 2,
          "open descriptors after the soak %d, after warm-up %d, "
          "less the resolver's upstream sockets (%d, %d)"
          % (fds_f, fds_w, ups_f, ups_w))
    check(ups_max <= 8, "the resolver's upstream sockets stay within their "
          "pool: at most %d open (8 per upstream)" % ups_max)

    # ---- the summary
    ok = all(c for c, _ in checks)
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    cpu = l.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    attempts = sum(t["attempts"] for t in conn.values())
    c_ok = sum(t["ok"] for t in conn.values())
    c_ref = sum(t["refused"] for t in conn.values())
    answered = sum(t["answered"] for t in dns.values())
    timeouts = sum(t["timeout"] for t in dns.values())
    say("# sluice soak: %s" % ("PASS" if ok else "FAIL"))
    say()
    say("- date: %s" % now)
    say("- machine: %s, %s, %d CPUs (%s), %.1f GiB" % (socket.gethostname(), platform.platform(),
        os.cpu_count(), cpu, mem_gb))
    say("- asked: %s connections and %s DNS queries over %s s from %d sandboxes; the load took %d s"
        % (want_conns, want_dns, want_secs, nsb, load_s))
    say("- connections: %d attempts (%.0f/s): %d answered (allowed), %d refused at once (denied), "
        "%d other; %d flow rows" % (attempts, attempts / max(elapsed, 1), c_ok, c_ref,
        attempts - c_ok - c_ref, sum(t["rows"] for t in conn.values())))
    say("- DNS: %d queries (%.0f/s): %d answered, %d timed out at the client; %d dns_queries rows; "
        "%d SERVFAIL because the test bed's upstream missed a query"
        % (sent, sent / max(elapsed, 1), answered, timeouts, drows, dns["a"]["upstream_failed"]))
    say("- UDP datagrams dropped by a full socket buffer: %d in the gateway (InErrors %d), "
        "%d in the sandboxes, %d at the upstream; the resolver counted %d queries, %d answered, %d dropped"
        % (gw_rcvbuf, gw_inerr, sb_rcvbuf, up_rcvbuf, status["dns"]["queries"],
           status["dns"]["answered"], status["dns"]["dropped"]))
    say("- the gateway's conntrack: %s" % ", ".join("%s %d" % kv for kv in ct.items()))
    say("- sluiced: %d packets, %d records written, %d rejected, %d write errors; %d queries forwarded; "
        "database %.0f MiB; %s allowed rows have their end counters"
        % (status["queue"]["packets"], status["store"]["written"], status["store"]["rejected"],
           status["store"]["write_errors"], status["dns"]["forwarded"],
           int(read("dbsize")) / 2**20, read("ended").strip()))
    say("- sluiced VmRSS: %d kB after warm-up, peak %d kB, %d kB %d s after the load; open fds %d -> %d"
        % (rss_w, rss_peak, rss_f, int(final[0]) - load_s, fds_w, fds_f))
    say()
    say("| s | phase | VmRSS kB | fds | writer queue | upstream sockets |")
    say("| ---: | --- | ---: | ---: | ---: | ---: |")
    for s in series:
        say("| %s |" % " | ".join(s[:6]))
    notes = []
    for i in range(1, nsb + 1):
        try:
            with open(os.path.join(d, "conn.%d.err" % i)) as f:
                notes += ["s%d: %s" % (i, l.strip()) for l in f if l.strip()]
        except OSError:
            pass
    if notes:
        say()
        say("What the clients said:")
        say()
        for n in notes[:20]:
            say("- " + n)
    say()
    say("Checks:")
    say()
    for c, m in checks:
        say("- %s %s" % ("ok" if c else "**FAILED**", m))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "latest.md"), "w") as f:
        f.write(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
