"""pairs: the report of ab.sh and tls-split.sh.

    pairs.py rate|lat|cpu FILE [--base LABEL] LABEL=NAME...

FILE holds one pair of loads a line, "LABEL B1-RATE S-RATE" (rate),
"LABEL B1-P50 B1-P99 S-P50 S-P99" (lat; µs) or "LABEL Dc-CPU S-CPU
Dc-QPS S-QPS" (cpu; µs of the server's CPU a DNS query); a pair with a 0
in it (a failed load) is left out. Prints a markdown table, one row a
LABEL in the order given, named NAME: the median S/B1 and its spread and
the median rates, what S added to B1's p50 and p99 and the median
latencies, or S/Dc of the CPU per query, of the queries/s, and the
median CPU per query. With
--base, each other row also says how far its median is from LABEL's.
"""
import statistics
import sys


def spread(xs, fmt):
    return (f"{statistics.median(xs):{fmt}} "
            f"({min(xs):{fmt}}-{max(xs):{fmt}})")


def med(p, i):
    return f"{statistics.median(r[i] for r in p):,.0f}"


def main(argv):
    kind, path, rest = argv[1], argv[2], argv[3:]
    base = None
    if rest[:1] == ["--base"]:
        base, rest = rest[1], rest[2:]
    rows = {}
    for line in open(path):
        v, *f = line.split()
        f = [float(x) for x in f]
        if all(x > 0 for x in f):
            rows.setdefault(v, []).append(f)
    if kind == "rate":
        head = ["S/B1 median (min-max)", "B1 conn/s", "S conn/s"]
        fmt = ".3f"

        def key(p):
            return [s / b for b, s in p]

        def others(p):
            return [med(p, 0), med(p, 1)]
    elif kind == "cpu":
        head = ["S/Dc CPU per query", "S/Dc queries/s", "Dc µs/query",
                "S µs/query"]
        fmt = ".3f"

        def key(p):
            return [r[1] / r[0] for r in p]

        def others(p):
            return [spread([r[3] / r[2] for r in p], ".3f"),
                    f"{statistics.median(r[0] for r in p):.2f}",
                    f"{statistics.median(r[1] for r in p):.2f}"]
    else:
        head = ["added p50, µs", "added p99, µs", "B1 p50 / p99",
                "S p50 / p99"]
        fmt = ".0f"

        def key(p):
            return [r[2] - r[0] for r in p]

        def others(p):
            return [spread([r[3] - r[1] for r in p], ".0f"),
                    f"{med(p, 0)} / {med(p, 1)}",
                    f"{med(p, 2)} / {med(p, 3)}"]
    b = statistics.median(key(rows[base])) if rows.get(base) else None
    print("| build | " + " | ".join(head) + " | pairs |")
    print("|" + " --- |" * (len(head) + 2))
    for arg in rest:
        v, _, name = arg.partition("=")
        p = rows.get(v, [])
        if not p:
            cells = ["no valid pair"] + [""] * (len(head) - 1)
        else:
            first = spread(key(p), fmt)
            if b is not None and v != base:
                first += f", {statistics.median(key(p)) - b:+{fmt}} on {base}"
            cells = [first] + others(p)
        print(f"| {name} | " + " | ".join(cells) + f" | {len(p)} |")


if __name__ == "__main__":
    main(sys.argv)
