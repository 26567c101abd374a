#!/usr/bin/env python3
"""report.py: turns the benchmark's raw samples (one JSON object a line,
written by run.sh) into the markdown report: ratios of the same
repetition's runs (median, min-max), absolute medians, sluiced's internals,
and every target of issue 8 with its margin.

  report.py --raw FILE [--secs S] [--elapsed S] [--skipped WORDS] [--perf FILE]
"""
import argparse
import json
import os
import platform
import statistics
import time


def load(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def spread(xs):
    xs = [x for x in xs if x is not None]
    return (min(xs), max(xs)) if xs else (None, None)


def fmt(v, nd=2):
    if v is None:
        return "–"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{nd}f}"


def cell(xs, nd=2):
    """median (min–max) of xs."""
    m = med(xs)
    if m is None:
        return "–"
    lo, hi = spread(xs)
    if len([x for x in xs if x is not None]) == 1:
        return fmt(m, nd)
    return f"{fmt(m, nd)} ({fmt(lo, nd)}–{fmt(hi, nd)})"


class Samples:
    def __init__(self, rows):
        self.rows = rows

    def get(self, phase, test, cfg, key, **extra):
        """{rep: value} for one measure."""
        out = {}
        for r in self.rows:
            if (r.get("phase") == phase and r.get("test") == test
                    and r.get("cfg") == cfg and not r.get("failed")
                    and all(r.get(k) == v for k, v in extra.items())):
                v = r.get(key)
                if v is not None:
                    out[r.get("rep")] = v
        return out

    def vals(self, *a, **k):
        return list(self.get(*a, **k).values())

    def ratio(self, phase, test, num, den, key, **extra):
        """Per-repetition ratios num/den of the same repetition."""
        a = self.get(phase, test, num, key, **extra)
        b = self.get(phase, test, den, key, **extra)
        return [a[r] / b[r] for r in sorted(a) if r in b and b[r]]

    def diff(self, phase, test, a_cfg, b_cfg, key):
        a = self.get(phase, test, a_cfg, key)
        b = self.get(phase, test, b_cfg, key)
        return [a[r] - b[r] for r in sorted(a) if r in b]


def machine():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({cpu}), Linux {platform.release()}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--secs", default="2")
    ap.add_argument("--elapsed", default="?")
    ap.add_argument("--skipped", default="")
    ap.add_argument("--perf")
    a = ap.parse_args()
    rows = load(a.raw)
    S = Samples(rows)
    reps = sorted({r["rep"] for r in rows if r.get("phase") == "main"})
    out = []
    w = out.append
    meta = next((r for r in rows if r.get("phase") == "meta"), {})
    date = meta.get("date") or time.strftime("%Y-%m-%d %H:%M %Z")
    w(f"## sluice benchmark, {date}")
    w("")
    rev = f"sluice {meta['rev']}; " if meta.get("rev") else ""
    w(f"{rev}{meta.get('machine') or machine()}. {len(reps)} repetitions, "
      f"{a.secs} s per load, configurations interleaved; the whole run took "
      f"{a.elapsed} s.")
    if a.skipped.strip():
        w(f"**Skipped (time bound reached):** {a.skipped.strip()}.")
    w("")
    w("Ratios are taken between runs of the same repetition, then the median "
      "(min–max) over the repetitions is given. B0: plain forwarding; B1: "
      "conntrack, established-accept, NAT; S: sluiced (DNS bindings, TLS/HTTP "
      "first-flight inspection, logging); P: tinyproxy, explicit proxy on the "
      "gateway; Q: squid beside it, explicit proxy, no cache; D: dnsmasq "
      "forwarding without a cache; Dc: dnsmasq with its "
      "default cache, the peer of S, whose resolver caches too (--dns-cache, "
      "4096 by default); Dl: Dc logging every query to a file (--log-queries), "
      "the nearest it comes to S's row per query.")
    w("")

    targets = []   # (what, value, goal text, ok)

    def target(what, xs, goal, ok_fn, nd=2):
        m = med(xs)
        targets.append((what, m, goal, None if m is None else ok_fn(m), nd))

    # -------------------------------------------------------- ratios
    w("### Ratios")
    w("")
    w("| measure | S/B0 | S/B1 | S/P | S/Q | S/D | target |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for n in (1, 2):
        t = f"bulk_{n}"
        r1 = S.ratio("main", t, "S", "B1", "gbps")
        w(f"| bulk TCP, {n} stream{'s' if n > 1 else ''} | "
          f"{cell(S.ratio('main', t, 'S', 'B0', 'gbps'))} | {cell(r1)} | | | | S/B1 ≥ 0.95 |")
        target(f"bulk throughput S/B1, {n} stream{'s' if n > 1 else ''}", r1,
               "≥ 0.95", lambda m: m >= 0.95)
    for mode in ("tls", "http"):
        for c in (4, 16):
            t = f"{mode}_c{c}"
            r1 = S.ratio("main", t, "S", "B1", "rate")
            rp = S.ratio("main", t, "S", "P", "rate")
            rq = S.ratio("main", t, "S", "Q", "rate")
            goal = "S/B1 ≥ 0.75, S/P and S/Q ≥ 2.5" if mode == "tls" else ""
            w(f"| {mode.upper()} new connections/s, {c} clients | "
              f"{cell(S.ratio('main', t, 'S', 'B0', 'rate'))} | {cell(r1)} | "
              f"{cell(rp)} | {cell(rq)} | | {goal} |")
            if mode == "tls":
                target(f"TLS connection rate S/B1, {c} clients", r1, "≥ 0.75",
                       lambda m: m >= 0.75)
                target(f"TLS connection rate S/P, {c} clients", rp, "≥ 2.5",
                       lambda m: m >= 2.5)
                target(f"TLS connection rate S/Q (squid), {c} clients", rq,
                       "≥ 2.5", lambda m: m >= 2.5)
    rq = S.ratio("main", "dns", "S", "Dc", "qps")
    rc = S.ratio("main", "dns", "S", "Dc", "cpu_us_per_query")
    rqd = S.ratio("main", "dns", "S", "D", "qps")
    rcd = S.ratio("main", "dns", "S", "D", "cpu_us_per_query")
    w(f"| DNS queries/s (100 allowed names), S/Dc (both cache) | | | | | {cell(rq)} | ≥ 0.95 |")
    w(f"| DNS CPU per query, S/Dc | | | | | {cell(rc)} | ≤ 1 |")
    w(f"| DNS queries/s, S/D (D without a cache) | | | | | {cell(rqd)} | |")
    w(f"| DNS CPU per query, S/D | | | | | {cell(rcd)} | |")
    w(f"| DNS queries/s, S/Dl (Dc logging each query to a file) | | | | | "
      f"{cell(S.ratio('main', 'dns', 'S', 'Dl', 'qps'))} | |")
    w(f"| DNS CPU per query, S/Dl | | | | | "
      f"{cell(S.ratio('main', 'dns', 'S', 'Dl', 'cpu_us_per_query'))} | |")
    target("DNS qps S/Dc", rq, "≥ 0.95", lambda m: m >= 0.95)
    target("DNS CPU per query S/Dc", rc, "≤ 1", lambda m: m <= 1.0)
    w("")

    # -------------------------------------------------------- absolute
    w("### Absolute medians (min–max)")
    w("")
    w("| measure | B0 | B1 | S | P | Q |")
    w("| --- | --- | --- | --- | --- | --- |")
    for n in (1, 2):
        t = f"bulk_{n}"
        w(f"| bulk TCP {n} stream{'s' if n > 1 else ''}, Gbit/s | "
          + " | ".join(cell(S.vals("main", t, c, "gbps"), 1) for c in ("B0", "B1", "S"))
          + " | | |")
    for mode in ("tls", "http"):
        for c in (4, 16):
            t = f"{mode}_c{c}"
            w(f"| {mode.upper()} {c} clients: connections/s | "
              + " | ".join(cell(S.vals("main", t, x, "rate"), 0) for x in ("B0", "B1", "S", "P", "Q")) + " |")
            w(f"| {mode.upper()} {c} clients: setup p50 / p99, µs | "
              + " | ".join(f"{fmt(med(S.vals('main', t, x, 'lat_p50_us')))} / "
                           f"{fmt(med(S.vals('main', t, x, 'lat_p99_us')))}"
                           for x in ("B0", "B1", "S", "P", "Q")) + " |")
        t = f"{mode}_lat"
        w(f"| {mode.upper()} 1 client at {fmt(med(S.vals('main', t, 'B1', 'target_rate')), 0)}/s: "
          "setup p50 / p99, µs | "
          + " | ".join(f"{cell(S.vals('main', t, x, 'lat_p50_us'), 0)} / "
                       f"{cell(S.vals('main', t, x, 'lat_p99_us'), 0)}"
                       for x in ("B0", "B1", "S", "P", "Q")) + " |")
    w("")
    w("| DNS | S | D | Dc | Dl |")
    w("| --- | --- | --- | --- | --- |")
    w("| queries/s | " + " | ".join(cell(S.vals("main", "dns", x, "qps"), 0) for x in ("S", "D", "Dc", "Dl")) + " |")
    w("| server CPU µs per query | " + " | ".join(
        cell(S.vals("main", "dns", x, "cpu_us_per_query"), 1) for x in ("S", "D", "Dc", "Dl")) + " |")
    w("| queries lost | " + " | ".join(
        fmt(sum(S.vals("main", "dns", x, "lost")), 0) for x in ("S", "D", "Dc", "Dl")) + " |")
    w("")

    # -------------------------------------------------------- latency
    w("### Added setup latency over B1 (1 client, light load)")
    w("")
    w("Setup latency: from connect() to the server's first byte (the "
      "ServerHello; the HTTP status line), so it includes sluiced holding "
      "the first flight. Per repetition S − B1, median (min–max):")
    w("")
    w("| | added p50, µs | added p99, µs | target |")
    w("| --- | --- | --- | --- |")
    for mode in ("tls", "http"):
        t = f"{mode}_lat"
        d50 = S.diff("main", t, "S", "B1", "lat_p50_us")
        d99 = S.diff("main", t, "S", "B1", "lat_p99_us")
        goal = "p50 ≤ 50, p99 ≤ 150" if mode == "tls" else ""
        w(f"| {mode.upper()} | {cell(d50, 0)} | {cell(d99, 0)} | {goal} |")
        if mode == "tls":
            target("TLS added setup latency p50 (µs)", d50, "≤ 50", lambda m: m <= 50, 0)
            target("TLS added setup latency p99 (µs)", d99, "≤ 150", lambda m: m <= 150, 0)
    w("")

    # -------------------------------------------------------- sluiced internals
    w("### Inside S: queue, log, CPU (per run, median)")
    w("")
    w("| load | conn/s | queued packets per conn | server packets copied per conn "
      "| flows held at once (max) | sluiced CPU µs per conn (loop + writer) "
      "| log rows/s | writer lag, ms (max) | writer queue depth (max) | client errors "
      "| completed without a row | failed without a row "
      "| records refused or lost | kernel queue drops | denials |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    peak = None
    all_lost = 0
    all_drops = 0
    all_denied = {}
    for phase, t in [("main", f"{m}_c{c}") for m in ("tls", "http") for c in (4, 16)] + \
            [("main", "tls_lat"), ("main", "http_lat")]:
        rs = [r for r in rows if r.get("phase") == phase and r.get("test") == t
              and r.get("cfg") == "S" and not r.get("failed")]
        if not rs:
            continue
        secs = [r["secs"] for r in rs]
        rate = med([r["rate"] for r in rs])
        ppc = med([r["s_pkts"] / r["started"] for r in rs if r.get("started")])
        cpc = med([r.get("s_copies", 0) / r["started"] for r in rs if r.get("started")])
        held = max(r.get("s_held_max", 0) for r in rs)
        cpu = med([(r["s_cpu_main_ns"] + r["s_cpu_writer_ns"]) / 1000 / r["started"]
                   for r in rs if r.get("started")])
        cpu_m = med([r["s_cpu_main_ns"] / 1000 / r["started"] for r in rs if r.get("started")])
        rows_s = med([r["s_rows"] / r["secs"] for r in rs])
        lag = [r["s_lag_ms"] for r in rs]
        depth = max(r["s_depth_max"] for r in rs)
        def ndenied(r):
            return sum(int(x.partition(":")[2]) for x in r.get("s_denials", "").split())
        cerr = sum(r["errors"] for r in rs)
        norow_ok = sum(max(0, r["ok"] - (r["s_rows"] - ndenied(r))) for r in rs)
        norow_err = sum(max(0, r["errors"] - ndenied(r)) for r in rs)
        norow = norow_ok + norow_err
        refused = sum(r["s_rejected"] + r["s_lost_records"] + r["s_denied_unlogged"]
                      for r in rs)
        lost = norow + refused
        drops = sum(r["s_qdrop"] + r["s_udrop"] for r in rs)
        all_lost += lost
        all_drops += drops
        for r in rs:
            for item in r.get("s_denials", "").split():
                k, _, n = item.partition(":")
                all_denied[k] = all_denied.get(k, 0) + int(n)
        den = {}
        for r in rs:
            for item in r.get("s_denials", "").split():
                k, _, n = item.partition(":")
                den[k] = den.get(k, 0) + int(n)
        w(f"| {t} | {fmt(rate, 0)} | {fmt(ppc, 1)} | {fmt(cpc, 1)} | {held} | {fmt(cpu, 1)} ({fmt(cpu_m, 1)} + "
          f"{fmt(cpu - cpu_m if cpu is not None and cpu_m is not None else None, 1)}) | "
          f"{fmt(rows_s, 0)} | {fmt(med(lag), 0)} ({fmt(max(lag), 0)}) | {depth} | {cerr} | {norow_ok} | "
          f"{norow_err} | {refused} | "
          f"{drops} | {' '.join(f'{k}:{v}' for k, v in den.items()) or '0'} |")
        for r in rs:
            if peak is None or r["rate"] > peak["rate"]:
                peak = r
    w("")
    dns_rs = [r for r in rows if r.get("phase") == "main" and r.get("test") == "dns"
              and r.get("cfg") == "S" and not r.get("failed")]
    if dns_rs:
        # a query whose record was refused (a full queue) has no row and is
        # counted in s_rejected and in lost_records too: count it once
        dl = sum(max(0, int(r["sent"] or 0) - r["s_dns_rows"]) for r in dns_rs)
        drej = sum(r["s_rejected"] for r in dns_rs)
        paused = sum(r.get("s_dns_paused", 0) for r in dns_rs)
        all_lost += max(dl, drej)
        w(f"DNS through S: {fmt(med([r['s_dns_rows'] / float(a.secs) for r in dns_rs]), 0)} "
          f"query rows/s logged, writer lag {fmt(med([r['s_lag_ms'] for r in dns_rs]), 0)} ms "
          f"(max {max(r['s_lag_ms'] for r in dns_rs)}), queue depth max "
          f"{max(r['s_depth_max'] for r in dns_rs)}, {dl} queries without a row "
          f"({drej} records refused by a full queue, each answered SERVFAIL and "
          f"counted in lost_records), the resolver held off {paused} times "
          f"while the writer was behind.")
        w("")
    if peak is not None:
        w(f"At S's peak ({peak['test']}, {fmt(peak['rate'], 0)} connections/s): "
          f"{fmt(peak['s_rows'] / peak['secs'], 0)} flow rows/s, writer lag "
          f"{peak['s_lag_ms']} ms after the load, {max(0, peak['started'] - peak['s_rows'])} "
          f"attempts without a row, {peak['s_rejected']} records refused, "
          f"{peak['s_lost_records']} counted lost.")
        w("")
        target("attempts without a row + records lost (all S runs)", [all_lost], "0",
               lambda m: m == 0, 0)
        target("writer lag at S's peak rate (ms)", [peak["s_lag_ms"]], "< 1000",
               lambda m: 0 <= m < 1000, 0)

    # -------------------------------------------------------- scale
    w("### Scale")
    w("")
    e_rows = [r for r in rows if r.get("phase") == "entries" and not r.get("failed")]
    mems = [r for r in rows if r.get("phase") == "mem"]
    if e_rows:
        ents = sorted({r["entries"] for r in e_rows})
        small, big = ents[0], ents[-1]
        a_ = {r["rep"]: r for r in e_rows if r["entries"] == small}
        b_ = {r["rep"]: r for r in e_rows if r["entries"] == big}
        rr = [b_[k]["rate"] / a_[k]["rate"] for k in sorted(b_) if k in a_ and a_[k]["rate"]]
        cpu_a = med([(r["s_cpu_main_ns"]) / 1000 / r["started"] for r in a_.values() if r["started"]])
        cpu_b = med([(r["s_cpu_main_ns"]) / 1000 / r["started"] for r in b_.values() if r["started"]])
        nsb = med([m["sandboxes"] for m in mems if m["tag"] == "after-entries"]) or 1
        w(f"- Allowlist of {big:,} entries (a.test last) against {small}, "
          f"{nsb:.0f} sandboxes present: HTTP, 16 clients, "
          f"connection rate ratio {cell(rr)}; sluiced's event loop "
          f"{fmt(cpu_a, 1)} → {fmt(cpu_b, 1)} µs CPU per connection "
          f"({fmt(med([r['rate'] for r in a_.values()]), 0)} → "
          f"{fmt(med([r['rate'] for r in b_.values()]), 0)} connections/s).")
        target(f"connection rate with {big:,} entries vs {small}", rr, "≥ 0.90",
               lambda m: m >= 0.90)
    add = [r for r in rows if r.get("phase") == "sandbox_add"]
    if add:
        ad = add[-1]
        rate = ad["added"] / (ad["ms"] / 1000) if ad["ms"] else 0
        w(f"- `sandbox add`: {ad['added']} added in {ad['ms'] / 1000:.1f} s "
          f"({rate:.0f}/s, {ad['ms'] / max(ad['added'], 1):.1f} ms each), "
          f"{ad['failures']} failures; {ad['sandboxes']} sandboxes in all.")
        r_big = S.ratio("sandboxes", "http_c16", "S", "B1", "rate")
        r_one = S.ratio("main", "http_c16", "S", "B1", "rate")
        if r_big and r_one:
            rel = [x / med(r_one) for x in r_big]
            def cpc(phase):
                return med([r["s_cpu_main_ns"] / 1000 / r["started"] for r in rows
                            if r.get("phase") == phase and r.get("test") == "http_c16"
                            and r.get("cfg") == "S" and r.get("started")])
            w(f"- HTTP, 16 clients, with {ad['sandboxes']} sandboxes: S/B1 {cell(r_big)} "
              f"against {cell(r_one)} with one sandbox: ratio {cell(rel)}; sluiced's "
              f"event loop {fmt(cpc('main'), 1)} → {fmt(cpc('sandboxes'), 1)} µs CPU "
              f"per connection.")
            target(f"connection rate with {ad['sandboxes']} sandboxes vs 1 (S/B1 over S/B1)",
                   rel, "≥ 0.90", lambda m: m >= 0.90)
    if mems:
        w("- sluiced's memory: " + "; ".join(
            f"{m['tag']}: RSS {m['rss_kib'] / 1024:.1f} MiB (peak {m['hwm_kib'] / 1024:.1f}), "
            f"{m['sandboxes']} sandboxes, {m['conntrack']:,} conntrack entries in the gateway, "
            f"{m['flows_total']:,} flow rows so far" for m in mems) + ".")
        # The target's point: 1,000 sandboxes and 100,000 tracked flows.
        # The peak RSS over the run so far; short of either count the
        # target counts as missed, whatever the memory.
        last = next((m for m in mems if m["tag"] == "tracked"),
                    next((m for m in mems if m["tag"] == "after-sandboxes"), mems[-1]))
        reached = last["sandboxes"] >= 1000 and last["conntrack"] >= 100000
        target(f"sluiced RSS (peak) at {last['sandboxes']} sandboxes, "
               f"{last['conntrack']:,} tracked connections (MiB)",
               [last["hwm_kib"] / 1024], "< 64 at 1,000 and 100,000",
               lambda m: m < 64 and reached, 1)
    w("")

    # -------------------------------------------------------- targets
    w("### Targets of issue 8")
    w("")
    w("| target | measured (median) | goal | |")
    w("| --- | --- | --- | --- |")
    for what, m, goal, ok, nd in targets:
        mark = "–" if ok is None else ("met" if ok else "**missed**")
        w(f"| {what} | {fmt(m, nd)} | {goal} | {mark} |")
    w("")
    w(f"Kernel queue drops over all S runs: {all_drops}. Denied flows over all S "
      f"runs: {' '.join(f'{k}:{v}' for k, v in all_denied.items()) or 'none'}. "
      "Completed without a row: connections the client completed through S beyond "
      "the allow rows written; failed without a row: client errors beyond the "
      "deny rows written (refused in the kernel by a connection mark, say).")
    unsampled = [r for r in rows if r.get("cfg") == "S" and "s_samples" in r and
                 r["s_samples"] == 0 and
                 r.get("test", "").startswith(("tls_c", "http_c", "dns"))]
    if unsampled:
        w(f"The queue depth and held flows of {len(unsampled)} S run(s) are "
          "missing: `connbench -m status` got no status from sluiced (their "
          "maxima read 0).")
    w("")
    if a.perf and os.path.exists(a.perf):
        w("### Profile of sluiced (perf)")
        w("")
        w("```")
        with open(a.perf) as f:
            w(f.read().rstrip())
        w("```")
        w("")
    print("\n".join(out))


if __name__ == "__main__":
    main()
