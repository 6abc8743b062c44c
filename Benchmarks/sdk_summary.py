#!/usr/bin/env python3
"""Summary of the SDK benchmarks: one row per target of docs/performance.md ("SDK benchmarks"), PASS or FAIL.

Row 5 is the server's: allocations on its per-command path, from Benchmarks/Benchmarks/CacheServerBenchmarks.

Reads the percentiles that `swift package benchmark baseline read <name> --format histogramPercentiles
--path DIR` exported from a stored run of Benchmarks/Benchmarks/CachedNetworkingBenchmarks (one TSV per
benchmark and metric: "Percentile<TAB><metric> (<unit>)" then one line per percentile 0..100), and prints a
Markdown table. `make bench-sdk` runs the benchmarks, exports them and calls this.

Exit status: 0 when the table was printed (even with rows that FAIL: it is a report, not a test), 1 when the
export is missing a benchmark.
"""

import argparse
import glob
import os
import re
import sys

# Benchmark names, as registered in CachedNetworkingBenchmarks.swift.
MEMORY_HIT = "1 Hit: MemoryStore, CachedNetworking.run"
RESP_HIT = "2a Hit: RESPStore on cached-server, CachedNetworking.run"
RAW_GET = "2b Hit: raw hiredis GET of the same entry"
CACHED_MISS = "3a Miss: CachedNetworking.run (origin fetch + MemoryStore write)"
BARE_MISS = "3b Miss: bare AsyncHTTPClientTransport fetch"
OWN_WORK = "3c Miss: the cache's own work (a transport that answers at once)"
HERD = "4 Herd: 1,000 concurrent identical misses"
# The server's per-command path, in Benchmarks/Benchmarks/CacheServerBenchmarks (1,000 commands per sample).
SERVER_PATHS = (
    ("GET", "S1 Server: GET, one per round trip"),
    ("SET", "S2 Server: SET, one per round trip"),
    ("GET -P 16", "S3 Server: GET, 16 per write"),
)
SERVER_COMMANDS_PER_SAMPLE = 1_000

# Targets.
MEMORY_HIT_P50_NS = 1_000
RESP_RATIO = 1.2
# Row 3: the cache's own work on a miss (3c), at most this share of a bare loopback fetch (3b), both at p50.
MISS_OWN_WORK_SHARE = 0.25
HERD_FETCHES = 1
# Row 5: allocations per 1,000 commands at p50 (a sample with a background cycle of the server in it may count a few).
SERVER_MALLOCS_P50 = 0

UNIT_NS = {"ns": 1, "us": 1e3, "μs": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}
COUNT_SCALE = {"K": 1e3, "M": 1e6, "G": 1e9}


def safe(name):
    """The file-name form of a benchmark name (the tool replaces '/' and ' ' with '_')."""
    return name.replace("/", "_").replace(" ", "_")


def load(directory, benchmark, metric):
    """Percentile -> value for one benchmark and metric, with time metrics converted to nanoseconds."""
    pattern = os.path.join(directory, "*." + glob.escape(safe(benchmark)) + "." + metric + ".histogram.percentiles.tsv")
    files = glob.glob(pattern)
    if not files:
        return None
    with open(files[0], encoding="utf-8") as f:
        lines = f.read().splitlines()
    header = lines[0].split("\t", 1)[1] if lines else ""
    scale = 1
    if metric == "wallClock":
        match = re.search(r"\((ns|us|μs|µs|ms|s)\)", header)
        if not match:
            raise SystemExit(f"unknown time unit in {files[0]}: {header!r}")
        scale = UNIT_NS[match.group(1)]
    else:
        # Counts may be shown in thousands or millions: "Malloc (total) (K) *".
        match = re.search(r"\((K|M|G)\)", header)
        if match:
            scale = COUNT_SCALE[match.group(1)]
    values = {}
    for line in lines[1:]:
        percentile, value = line.split("\t")
        values[int(percentile)] = float(value) * scale
    return values


def time_text(ns):
    if ns is None:
        return "–"
    if ns < 10_000:
        return f"{ns:,.0f} ns"
    if ns < 1_000_000:
        return f"{ns / 1e3:,.1f} µs"
    return f"{ns / 1e6:,.2f} ms"


def count_text(values):
    """The p50 of a count metric (exported rounded to its unit: thousands are shown as such)."""
    if not values:
        return "–"
    value = values[50]
    return f"{value / 1e3:,.0f} K" if value >= 10_000 else f"{value:,.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", help="where the percentiles were exported")
    args = parser.parse_args()

    missing = []

    def get(benchmark, metric="wallClock"):
        values = load(args.directory, benchmark, metric)
        if values is None and metric == "wallClock":
            missing.append(benchmark)
        return values

    rows = []

    memory = get(MEMORY_HIT)
    memory_mallocs = get(MEMORY_HIT, "mallocCountTotal")
    if memory:
        p50 = memory[50]
        rows.append((
            "1. MemoryStore hit (`run`, per hit)",
            f"p50 {time_text(p50)}, p99 {time_text(memory[99])}",
            count_text(memory_mallocs),
            f"p50 ≤ {time_text(MEMORY_HIT_P50_NS)}",
            "PASS" if p50 <= MEMORY_HIT_P50_NS else "FAIL",
        ))

    def pair(label, sdk, floor, limit):
        """A row comparing the SDK's path (`sdk`) with the floor it is measured against, by the ratio of p50s."""
        ours, theirs = get(sdk), get(floor)
        if not (ours and theirs):
            return
        ours_mallocs, theirs_mallocs = get(sdk, "mallocCountTotal"), get(floor, "mallocCountTotal")
        ratio = ours[50] / theirs[50]
        rows.append((
            label,
            f"p50 {time_text(ours[50])} vs {time_text(theirs[50])} (×{ratio:.2f}); "
            f"p99 {time_text(ours[99])} vs {time_text(theirs[99])}",
            f"{count_text(ours_mallocs)} vs {count_text(theirs_mallocs)}",
            f"p50 ≤ {limit}× raw",
            "PASS" if ratio <= limit else "FAIL",
        ))

    pair("2. RESPStore hit (`run`) vs raw hiredis GET", RESP_HIT, RAW_GET, RESP_RATIO)
    # Row 3: what a miss adds to the fetch. The verdict is on the cache's own work, measured without a network
    # (3c); the miss through the cache with a real loopback fetch (3a) is shown against the bare fetch (3b) too,
    # with the process's CPU time per miss (every thread: caller, HTTP client, origin).
    own, cached_miss, bare = get(OWN_WORK), get(CACHED_MISS), get(BARE_MISS)
    if own and cached_miss and bare:
        share = own[50] / bare[50]
        measured = (f"own work p50 {time_text(own[50])} (3c) = {share:.2f} of the bare fetch's p50 {time_text(bare[50])} "
                    f"(3b); with the fetch (3a) p50 {time_text(cached_miss[50])} vs {time_text(bare[50])} "
                    f"(×{cached_miss[50] / bare[50]:.2f}), p99 {time_text(cached_miss[99])} vs {time_text(bare[99])}")
        cached_cpu, bare_cpu = load(args.directory, CACHED_MISS, "process_cpu_ns"), load(args.directory, BARE_MISS, "process_cpu_ns")
        if cached_cpu and bare_cpu:
            measured += (f"; process CPU p50 {time_text(cached_cpu[50])} vs {time_text(bare_cpu[50])} "
                         f"(×{cached_cpu[50] / bare_cpu[50]:.2f})")
        own_mallocs, miss_mallocs, bare_mallocs = (get(name, "mallocCountTotal") for name in (OWN_WORK, CACHED_MISS, BARE_MISS))
        rows.append((
            "3. Miss: the cache's own work (3c), and `run` with a loopback fetch (3a) vs the bare fetch (3b)",
            measured,
            f"{count_text(own_mallocs)}; {count_text(miss_mallocs)} vs {count_text(bare_mallocs)}",
            f"3c p50 ≤ {MISS_OWN_WORK_SHARE}× 3b p50",
            "PASS" if share <= MISS_OWN_WORK_SHARE else "FAIL",
        ))

    herd = get(HERD)
    herd_mallocs = get(HERD, "mallocCountTotal")
    fetches = load(args.directory, HERD, "origin_fetches_per_herd")
    if herd:
        if fetches:
            low, high = fetches[0], fetches[100]
            seen = f"{low:.0f}" if low == high else f"{low:.0f}–{high:.0f}"
            verdict = "PASS" if low == high == HERD_FETCHES else "FAIL"
        else:
            seen, verdict = "not recorded", "FAIL"
        rows.append((
            "4. 1,000 concurrent identical misses",
            f"wall p50 {time_text(herd[50])}, p99 {time_text(herd[99])}; origin fetches per herd: {seen}",
            count_text(herd_mallocs),
            f"origin sees exactly {HERD_FETCHES} fetch",
            verdict,
        ))

    # Row 5: the server's command path allocates nothing (counted over 1,000 commands, so the count is exact).
    server = [(label, get(name), get(name, "mallocCountTotal")) for label, name in SERVER_PATHS]
    if all(times and mallocs for _, times, mallocs in server):
        measured = "; ".join(
            f"{label}: {mallocs[50]:.0f} at p50, {mallocs[100]:.0f} at most, "
            f"{time_text(times[50] / SERVER_COMMANDS_PER_SAMPLE)} per command"
            for label, times, mallocs in server)
        rows.append((
            "5. Server: allocations per 1,000 commands (in process, client on raw sockets)",
            measured,
            " / ".join(f"{mallocs[50]:.0f}" for _, _, mallocs in server),
            f"p50 = {SERVER_MALLOCS_P50}",
            "PASS" if all(mallocs[50] <= SERVER_MALLOCS_P50 for _, _, mallocs in server) else "FAIL",
        ))

    header = ("Row", "Measured", "mallocs (p50)", "Target", "Result")
    table = [header] + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |")
    passed = sum(1 for row in rows if row[-1] == "PASS")
    print(f"\n{passed} of {len(rows)} rows PASS, {len(rows) - passed} FAIL")
    if missing:
        print(f"missing from the export: {', '.join(missing)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
