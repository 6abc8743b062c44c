#!/usr/bin/env python3
"""Server benchmark: cached-server against redis-server on this machine.

Starts both servers on free loopback ports (persistence off), runs every workload on one and then the
other (A B A B ...), repeats the whole set for a number of rounds, and prints one table of medians with
each row's target and PASS/FAIL. Servers are stopped on exit, on failure and on Ctrl-C.

Needs only Python 3 (standard library), the cached-server binary, and Debian's redis-server and
redis-tools (redis-benchmark, redis-cli).

Exit status: 0 when the report was produced (even when rows FAIL), 1 when something broke,
130 when interrupted.
"""

import argparse
import csv
import ctypes
import io
import os
import re
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# Payload of one memory-test key: "key:%09d" (13 bytes) + a 100-byte value.
MEMORY_KEY_BYTES = 13
MEMORY_VALUE_BYTES = 100
MEMORY_PAYLOAD = MEMORY_KEY_BYTES + MEMORY_VALUE_BYTES
MEMORY_TTL_SECONDS = 3600

EXPIRY_TTL_SECONDS = 2
EXPIRY_VALUE_BYTES = 32
POLL_INTERVAL = 0.05
RSS_DROP_SHARE = 0.25
SETTLE_AFTER_SWEEP = 1.5

# redis-benchmark workloads: (row id, label, tests, clients, pipeline, pilot requests, p99 target applies, TLS)
WORKLOADS = [
    ("set", "SET, 50 clients", "set", 50, 1, 10_000, True, False),
    ("get", "GET, 50 clients", "get", 50, 1, 10_000, True, False),
    ("set-p16", "SET, 50 clients, -P 16", "set", 50, 16, 50_000, False, False),
    ("get-p16", "GET, 50 clients, -P 16", "get", 50, 16, 50_000, False, False),
    ("get-1c", "GET, 1 client (round trip)", "get", 1, 1, 3_000, False, False),
    ("mset", "MSET (10 keys), 50 clients", "mset", 50, 1, 5_000, False, False),
    ("incr", "INCR, 50 clients", "incr", 50, 1, 10_000, False, False),
    # The same over TLS (both servers on their tls-port, TLS 1.3, no client certificates).
    ("tls-set", "TLS SET, 50 clients", "set", 50, 1, 10_000, True, True),
    ("tls-get", "TLS GET, 50 clients", "get", 50, 1, 10_000, True, True),
    ("tls-set-p16", "TLS SET, 50 clients, -P 16", "set", 50, 16, 50_000, False, True),
    ("tls-get-p16", "TLS GET, 50 clients, -P 16", "get", 50, 16, 50_000, False, True),
    ("tls-get-1c", "TLS GET, 1 client (round trip)", "get", 1, 1, 3_000, False, True),
]
PILOT_SECONDS = 0.5  # a pilot run shorter than this is repeated with more requests
KEYSPACE = 100_000  # -r: redis-benchmark's keys are key:%012d below this
VALUE_BYTES = 100   # -d

SERVERS = ("cached", "redis")
# The throughput rows also run cached-server on plain SwiftNIO (`io-fast-path no`), reported beside the others
# without a target of its own: what the fast path is worth, and that the fallback stays usable.
PLAIN = "cached-plain"
LOAD_AT_START = 0.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """Something broke (as opposed to a row that misses its target)."""


def log(message):
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------------------
# Processes


def _die_with_parent():
    """Runs in the child before exec: receive SIGTERM if this script dies, however it dies."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process on a loopback port."""

    def __init__(self, kind, argv_for_port, workdir):
        self.kind = kind
        self.workdir = workdir
        self.port = None
        self.tls_port = None
        self.process = None
        self.log_path = None
        self._argv_for_port = argv_for_port
        self._log_file = None

    def start(self):
        last_error = None
        for _attempt in range(3):  # a free port can be taken between finding it and binding it
            self.port, self.tls_port = free_port(), free_port()
            self.log_path = os.path.join(self.workdir, f"{self.kind}-{self.port}.log")
            self._log_file = open(self.log_path, "wb")
            self.process = subprocess.Popen(
                self._argv_for_port(self.port, self.tls_port),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches this script, which stops the server itself
                preexec_fn=_die_with_parent,
            )
            try:
                self._wait_ready()
                return self
            except BenchError as error:
                last_error = error
                self.stop()
        raise last_error

    def _wait_ready(self, timeout=15.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"{self.kind} exited with status {self.process.returncode} at start\n"
                                 + self.log_tail())
            try:
                with RespConnection(self.port, timeout=1.0) as c:
                    if c.command("PING") == "PONG":
                        return
            except (OSError, BenchError):
                pass
            time.sleep(0.05)
        raise BenchError(f"{self.kind} did not answer PING on port {self.port} within {timeout:.0f} s\n"
                         + self.log_tail())

    def check_alive(self):
        if self.process is None or self.process.poll() is not None:
            code = None if self.process is None else self.process.returncode
            raise BenchError(f"{self.kind} is not running (exit status {code})\n" + self.log_tail())

    def rss_bytes(self):
        self.check_alive()
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise BenchError(f"no VmRSS in /proc/{self.process.pid}/status")

    def cpu_seconds(self):
        """User + system CPU time of the server process so far (all its threads)."""
        self.check_alive()
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace").splitlines()
            return "\n".join(f"  {self.kind}| {l}" for l in text[-lines:])
        except OSError:
            return ""

    def stop(self):
        p = self.process
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        self.process = None


class Servers:
    """Starts servers and guarantees they are stopped."""

    def __init__(self, cached_binary, workdir, cached_args=()):
        self.cached_binary = cached_binary
        self.cached_args = list(cached_args)
        self.workdir = workdir
        self.running = []
        self.tls = None  # TLSMaterial, once made

    def argv(self, kind, tls):
        def tls_args(tls_port):
            if not tls:
                return []
            return ["--tls-port", str(tls_port), "--tls-cert-file", self.tls.certificate, "--tls-key-file",
                    self.tls.key, "--tls-auth-clients", "no"]
        if kind in ("cached", PLAIN):
            # PLAIN: cached-server on plain SwiftNIO, without its I/O fast path (io-fast-path no).
            plain = ["--io-fast-path", "no"] if kind == PLAIN else []
            return lambda port, tls_port: [self.cached_binary, "--port", str(port), "--bind", "127.0.0.1",
                                           "--save", "", "--appendonly", "no", "--dir", self.workdir] \
                + tls_args(tls_port) + plain + self.cached_args
        return lambda port, tls_port: ["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                       "--save", "", "--appendonly", "no", "--daemonize", "no",
                                       "--dir", self.workdir] + tls_args(tls_port)

    def start(self, kind, tls=False):
        if tls and self.tls is None:
            self.tls = TLSMaterial(self.workdir)
        server = Server(kind, self.argv(kind, tls), self.workdir)
        self.running.append(server)
        return server.start()

    def stop(self, server):
        server.stop()
        if server in self.running:
            self.running.remove(server)

    def stop_all(self):
        for server in list(self.running):
            self.stop(server)


class RespConnection:
    """A minimal RESP client for PING, DBSIZE and the like (simple replies only)."""

    def __init__(self, port, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.reader = self.sock.makefile("rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        try:
            self.reader.close()
            self.sock.close()
        except OSError:
            pass

    def command(self, *args):
        parts = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(parts))
        line = self.reader.readline()
        if not line.endswith(b"\r\n"):
            raise BenchError("connection closed by the server")
        kind, body = line[:1], line[1:-2].decode()
        if kind == b"+":
            return body
        if kind == b":":
            return int(body)
        if kind == b"-":
            raise BenchError(f"server error: {body}")
        if kind == b"$":
            n = int(body)
            if n < 0:
                return None
            data = self.reader.read(n + 2)
            return data[:-2]
        raise BenchError(f"unexpected reply {line!r}")


# ---------------------------------------------------------------------------------------------------------
# Loading data with redis-cli --pipe


def resp_set(key, value, ex=None):
    if ex is None:
        return b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key, len(value), value)
    ex = str(ex).encode()
    return (b"*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nEX\r\n$%d\r\n%s\r\n"
            % (len(key), key, len(value), value, len(ex), ex))


def write_stream(path, commands):
    """Writes an iterable of RESP commands to `path`; returns how many."""
    count = 0
    with open(path, "wb") as f:
        chunk = []
        for c in commands:
            chunk.append(c)
            if len(chunk) == 10_000:
                f.write(b"".join(chunk))
                count += len(chunk)
                chunk = []
        f.write(b"".join(chunk))
        count += len(chunk)
    return count


def memory_stream(keys, ttl):
    value = b"v" * MEMORY_VALUE_BYTES
    for i in range(keys):
        yield resp_set(b"key:%09d" % i, value, ttl)


def expiry_stream(pairs):
    value = b"e" * EXPIRY_VALUE_BYTES
    for i in range(pairs):
        yield resp_set(b"ttl:%09d" % i, value, EXPIRY_TTL_SECONDS)
        yield resp_set(b"keep:%09d" % i, value)


def benchmark_stream(keys):
    value = b"x" * VALUE_BYTES
    for i in range(keys):
        yield resp_set(b"key:%012d" % i, value)


def pipe(server, path, expected):
    """Sends the commands in `path` with redis-cli --pipe and checks every reply arrived without errors."""
    with open(path, "rb") as f:
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(server.port), "--pipe"],
                           stdin=f, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    if r.returncode != 0 or f"errors: 0, replies: {expected}" not in out:
        server.check_alive()
        raise BenchError(f"redis-cli --pipe into {server.kind} failed (status {r.returncode}):\n{out.strip()}")


# ---------------------------------------------------------------------------------------------------------
# Workloads


class TLSMaterial:
    """A CA and a server certificate for 127.0.0.1 (RSA 2048), made with the openssl tool for this run."""

    def __init__(self, workdir):
        self.ca = os.path.join(workdir, "tls-ca.crt")
        self.certificate = os.path.join(workdir, "tls-server.crt")
        self.key = os.path.join(workdir, "tls-server.key")
        ca_key, request, ext = (os.path.join(workdir, name) for name in ("tls-ca.key", "tls-server.csr", "tls.ext"))
        with open(ext, "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        steps = [
            ["req", "-x509", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", ca_key, "-out", self.ca,
             "-days", "2", "-subj", "/CN=cached bench CA"],
            ["req", "-new", "-nodes", "-newkey", "rsa:2048", "-keyout", self.key, "-out", request,
             "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", request, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial",
             "-out", self.certificate, "-days", "2", "-extfile", ext],
        ]
        for step in steps:
            r = subprocess.run(["openssl"] + step, capture_output=True, text=True)
            if r.returncode != 0:
                raise BenchError(f"openssl {' '.join(step)} failed:\n{r.stderr.strip()}")


def redis_benchmark(server, tests, clients, pipeline, requests, tls=None):
    port = server.tls_port if tls else server.port
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(clients),
            "-n", str(requests), "-d", str(VALUE_BYTES), "-r", str(KEYSPACE), "-t", tests, "--csv"]
    if pipeline > 1:
        argv += ["-P", str(pipeline)]
    if tls:
        argv += ["--tls", "--cacert", tls.ca]
    cpu_before, client_before = server.cpu_seconds(), os.times()
    started = time.monotonic()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    elapsed = time.monotonic() - started
    client_after = os.times()
    client_cpu = (client_after.children_user + client_after.children_system
                  - client_before.children_user - client_before.children_system)
    rows = [row for row in csv.reader(io.StringIO(r.stdout)) if row and row[0] != "test"]
    if r.returncode != 0 or len(rows) != 1 or len(rows[0]) < 8:
        server.check_alive()
        raise BenchError(f"redis-benchmark {' '.join(argv[1:])} against {server.kind} failed "
                         f"(status {r.returncode}):\n{(r.stdout + r.stderr).strip()}")
    row = rows[0]
    try:
        return {"rps": float(row[1]), "p50": float(row[4]), "p99": float(row[6]), "seconds": elapsed,
                "server_us": (server.cpu_seconds() - cpu_before) / requests * 1e6,
                "client_cpu": client_cpu / elapsed}
    except ValueError:
        raise BenchError(f"unexpected redis-benchmark CSV row: {row}")


def workloads(args):
    """The throughput rows to run: all, or those whose id matches --rows."""
    return [w for w in WORKLOADS if not args.rows or re.fullmatch(args.rows, w[0])]


def run_throughput(args, servers, workdir, results):
    kinds = SERVERS + ((PLAIN,) if args.plain else ())
    log(f"== throughput: starting {', '.join(kinds)} (each with a TLS port too)")
    running = {kind: servers.start(kind, tls=True) for kind in kinds}
    tls = servers.tls
    stream = os.path.join(workdir, "benchmark-keys.resp")
    n = write_stream(stream, benchmark_stream(KEYSPACE))
    for kind in kinds:  # GET rows read keys that exist
        pipe(running[kind], stream, n)

    requests = {}
    if args.requests:
        requests = {w[0]: args.requests for w in workloads(args)}
    else:
        log(f"== throughput: pilot runs (also warm-up) to size each run to >= {args.duration:g} s")
        for wid, label, tests, clients, pipeline, pilot, _, over_tls in workloads(args):
            fastest = 0.0
            for kind in SERVERS:
                m = redis_benchmark(running[kind], tests, clients, pipeline, pilot, tls if over_tls else None)
                if m["seconds"] < PILOT_SECONDS and not args.quick:
                    # Too short to trust (connection setup, noise): once more, sized to last PILOT_SECONDS.
                    n = max(pilot, int(m["rps"] * PILOT_SECONDS * 1.2))
                    m = redis_benchmark(running[kind], tests, clients, pipeline, n, tls if over_tls else None)
                fastest = max(fastest, m["rps"])
            n = int(fastest * args.duration)
            n = max(n, pilot) if not args.quick else max(n, 1000)
            requests[wid] = -(-n // 1000) * 1000
            log(f"   {label}: fastest pilot {fastest:,.0f} rps -> -n {requests[wid]:,}")

    for rnd in range(1, args.rounds + 1):
        for wid, label, tests, clients, pipeline, _, _, over_tls in workloads(args):
            for kind in kinds:
                m = redis_benchmark(running[kind], tests, clients, pipeline, requests[wid], tls if over_tls else None)
                results.setdefault(wid, {}).setdefault(kind, []).append(m)
                log(f"   round {rnd} {label:<28} {kind:<12} {m['rps']:>12,.0f} rps  p50 {m['p50']:.3f}  "
                    f"p99 {m['p99']:.3f} ms  ({m['seconds']:.1f} s; server CPU {m['server_us']:.2f} µs/req, "
                    f"client CPU {m['client_cpu']:.0%})")
    for kind in kinds:
        servers.stop(running[kind])
    os.unlink(stream)
    return requests


def run_memory(args, servers, workdir, results):
    streams = {}
    for ttl in (None, MEMORY_TTL_SECONDS):
        path = os.path.join(workdir, f"memory-{'ttl' if ttl else 'plain'}.resp")
        streams[ttl] = (path, write_stream(path, memory_stream(args.keys, ttl)))
    for rnd in range(1, args.rounds + 1):
        for ttl in (None, MEMORY_TTL_SECONDS):
            row = "mem-ttl" if ttl else "mem"
            path, count = streams[ttl]
            for kind in SERVERS:
                server = servers.start(kind)
                time.sleep(0.3)
                before = server.rss_bytes()
                pipe(server, path, count)
                with RespConnection(server.port) as c:
                    size = c.command("DBSIZE")
                if size != args.keys:
                    raise BenchError(f"{kind}: DBSIZE {size} after loading {args.keys} keys")
                time.sleep(args.settle)
                after = server.rss_bytes()
                servers.stop(server)
                per_key = (after - before) / args.keys
                results.setdefault(row, {}).setdefault(kind, []).append(
                    {"per_key": per_key, "beyond": per_key - MEMORY_PAYLOAD})
                log(f"   round {rnd} memory {'EX 3600' if ttl else 'no TTL '} {kind:<6} RSS "
                    f"{before / 2**20:.1f} -> {after / 2**20:.1f} MiB = {per_key:.1f} B/key "
                    f"({per_key - MEMORY_PAYLOAD:+.1f} beyond payload)")
    for path, _ in streams.values():
        os.unlink(path)


def run_expiry(args, servers, workdir, results):
    path = os.path.join(workdir, "expiry.resp")
    count = write_stream(path, expiry_stream(args.expiry_keys))
    for rnd in range(1, args.rounds + 1):
        for kind in SERVERS:
            server = servers.start(kind)
            time.sleep(0.3)
            rss_empty = server.rss_bytes()
            pipe(server, path, count)
            load_end = time.monotonic()
            rss_load = server.rss_bytes()
            with RespConnection(server.port) as c:
                t0 = load_end + EXPIRY_TTL_SECONDS
                time.sleep(max(0.0, t0 - time.monotonic()))
                deadline = t0 + args.expiry_timeout
                swept_at = None
                while True:
                    now = time.monotonic()
                    if c.command("DBSIZE") == args.expiry_keys:
                        swept_at = now
                        break
                    if now >= deadline:
                        break
                    time.sleep(max(0.0, POLL_INTERVAL - (time.monotonic() - now)))
                rss_swept = server.rss_bytes()
                time.sleep(SETTLE_AFTER_SWEEP)
                rss_settled = server.rss_bytes()
                left = c.command("DBSIZE")
            servers.stop(server)
            seconds = (swept_at - t0) if swept_at is not None else float("inf")
            results.setdefault("expiry", {}).setdefault(kind, []).append(
                {"seconds": seconds, "rss_empty": rss_empty, "rss_load": rss_load, "rss_swept": rss_swept, "rss_settled": rss_settled})
            shown = f"{seconds:.2f} s" if swept_at is not None else f"not done after {args.expiry_timeout:g} s"
            log(f"   round {rnd} expiry {kind:<6} {shown}; RSS {rss_load / 2**20:.1f} -> "
                f"{rss_swept / 2**20:.1f} -> {rss_settled / 2**20:.1f} MiB (DBSIZE {left})")
    os.unlink(path)


# ---------------------------------------------------------------------------------------------------------
# Report


def med(values, key):
    return statistics.median(v[key] for v in values)


def machine_lines(cached_binary):
    def first_line(argv):
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            return (r.stdout or r.stderr).strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "unknown"

    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    rev = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return [
        f"date:    {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
        f"machine: {os.cpu_count()} CPUs (nproc {first_line(['nproc'])}), {model}, "
        f"Linux {platform.release()}",
        f"load:    1-min load average {LOAD_AT_START:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
        f"cached:  {first_line([cached_binary, '--version'])}, git {rev}{' (modified)' if dirty else ''}",
        f"redis:   {first_line(['redis-server', '--version'])}",
    ]


def mib(b):
    return f"{b / 2**20:.0f}"


def report(args, results, requests, elapsed):
    header = ["Row", "cached", "redis", "cached/redis", "p50 ms (cached / redis)",
              "p99 ms (cached / redis)", "server CPU µs/req (cached / redis)", "Target", "Result",
              "plain SwiftNIO: rps, p99 ms"]
    rows = []
    failures = 0

    def add(cells, ok):
        nonlocal failures
        if ok is not None and not ok[0]:
            failures += 1
        result = "–" if ok is None else ("PASS" if ok[0] else "FAIL" + (f" ({ok[1]})" if ok[1] else ""))
        rows.append(cells[:8] + [result] + (cells[8:] or ["–"]))

    for wid, label, _, clients, pipeline, _, p99_target, _ in WORKLOADS:
        if wid not in results:
            continue
        c, r = results[wid]["cached"], results[wid]["redis"]
        crps, rrps = med(c, "rps"), med(r, "rps")
        ratio = crps / rrps
        cp99, rp99 = med(c, "p99"), med(r, "p99")
        why = []
        if ratio < 1.0:
            why.append("rps")
        if p99_target and cp99 > rp99:
            why.append("p99")
        target = "ratio ≥ 1.00" + ("; p99 ≤ redis" if p99_target else "")
        add([f"{label} (-n {requests[wid]:,})", f"{crps:,.0f} rps", f"{rrps:,.0f} rps", f"{ratio:.3f}",
             f"{med(c, 'p50'):.3f} / {med(r, 'p50'):.3f}", f"{cp99:.3f} / {rp99:.3f}",
             f"{med(c, 'server_us'):.2f} / {med(r, 'server_us'):.2f}", target]
            + ([f"{med(pl, 'rps'):,.0f} rps, {med(pl, 'p99'):.3f}"] if (pl := results[wid].get(PLAIN)) else []),
            (not why, ", ".join(why)))

    for row, label, limit in (("mem", "Memory, no TTL", 40), ("mem-ttl", f"Memory, EX {MEMORY_TTL_SECONDS}", 48)):
        if row not in results:
            continue
        c, r = results[row]["cached"], results[row]["redis"]
        cb, rb = med(c, "per_key"), med(r, "per_key")
        cx, rx = med(c, "beyond"), med(r, "beyond")
        add([f"{label}: RSS per key, {args.keys:,} keys", f"{cb:.1f} B ({cx:+.1f})",
             f"{rb:.1f} B ({rx:+.1f})", f"{cb / rb:.3f}", "–", "–", "–",
             f"≤ {limit} B beyond {MEMORY_PAYLOAD}-byte payload"], (cx <= limit, ""))

    if "expiry" in results:
        c, r = results["expiry"]["cached"], results["expiry"]["redis"]
        cs, rs = med(c, "seconds"), med(r, "seconds")

        def secs(s):
            return f"{s:.2f} s" if s != float("inf") else f"> {args.expiry_timeout:g} s"

        ratio = f"{cs / rs:.3f}" if rs not in (0.0, float("inf")) and cs != float("inf") else "–"
        add([f"Expiry: {args.expiry_keys:,} of {2 * args.expiry_keys:,} keys, sweep time after TTL",
             secs(cs), secs(rs), ratio, "–", "–", "–", "≤ 1.0 s"], (cs <= 1.0, ""))
        ce, cl, csw, cst = (med(c, k) for k in ("rss_empty", "rss_load", "rss_swept", "rss_settled"))
        rl, rsw, rst = (med(r, k) for k in ("rss_load", "rss_swept", "rss_settled"))
        # "Dropping": 1.5 s after the sweep, RSS gave back at least a quarter of what the load added
        # (the expired keys are half the keys).
        dropped = (cl - cst) >= RSS_DROP_SHARE * (cl - ce)
        add(["Expiry: RSS MiB, load end → swept → +1.5 s", f"{mib(cl)} → {mib(csw)} → {mib(cst)}",
             f"{mib(rl)} → {mib(rsw)} → {mib(rst)}", f"{cst / rst:.3f}", "–", "–", "–",
             f"+1.5 s RSS ≥ {RSS_DROP_SHARE:.0%} of load's growth below load end"], (dropped, ""))

    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) for i in range(len(header))]

    def line(cells):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"

    out = []
    out += machine_lines(args.binary)
    if args.cached_args:
        out.append(f"flags:   cached-server started with extra flags: {args.cached_args}")
    out.append(f"run:     {'--quick, ' if args.quick else ''}{args.rounds} round(s), median of rounds, "
               f"cached and redis interleaved; took {elapsed:.0f} s")
    if args.quick:
        out.append("note:    --quick checks the harness; its short runs and smaller key counts are not "
                   "comparable with the targets")
    out.append("")
    out.append(line(header))
    out.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    out += [line(row) for row in rows]
    out.append("")
    out.append(f"{len(rows) - failures} of {len(rows)} rows PASS" + (f", {failures} FAIL" if failures else ""))
    print("\n".join(out), flush=True)


# ---------------------------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description="Benchmark cached-server against redis-server (see docs/performance.md).")
    p.add_argument("--binary", default=os.path.join(ROOT, ".build", "release", "cached-server"),
                   help="the cached-server binary (default: .build/release/cached-server)")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1 round, short runs, fewer keys (checks the harness, not the servers)")
    p.add_argument("--rounds", type=int, help="rounds per row, reported as the median (default 3; quick 1)")
    p.add_argument("--duration", type=float,
                   help="seconds each redis-benchmark run should last at least; -n is sized from a pilot run "
                        "(default 2.5; quick 0.3)")
    p.add_argument("--requests", type=int, help="fixed -n for every redis-benchmark run (skips the pilot)")
    p.add_argument("--keys", type=int, help="keys in the memory rows (default 1000000; quick 200000)")
    p.add_argument("--expiry-keys", type=int,
                   help="keys with a TTL, and as many without, in the expiry row (default 500000; quick 100000)")
    p.add_argument("--expiry-timeout", type=float, default=30.0,
                   help="seconds after the TTL to wait for the expiry sweep before giving up (default 30)")
    p.add_argument("--settle", type=float, default=0.0,
                   help="seconds to wait after a memory load before reading RSS (default 0: as soon as DBSIZE "
                        "confirms the load)")
    p.add_argument("--cached-args", default="",
                   help="extra cached-server flags, e.g. '--io-threads 1' (shown in the report)")
    p.add_argument("--no-plain", dest="plain", action="store_false",
                   help="skip cached-server on plain SwiftNIO (io-fast-path no) in the throughput rows")
    p.add_argument("--rows", help="run only the throughput rows whose id matches this regular expression "
                   "(ids: " + ", ".join(w[0] for w in WORKLOADS) + ")")
    p.add_argument("--only", action="append", choices=["throughput", "memory", "expiry"],
                   help="run only these parts (repeatable)")
    args = p.parse_args(argv)
    q = args.quick
    args.rounds = args.rounds or (1 if q else 3)
    args.duration = args.duration or (0.3 if q else 2.5)
    args.keys = args.keys or (200_000 if q else 1_000_000)
    args.expiry_keys = args.expiry_keys or (100_000 if q else 500_000)
    args.only = args.only or ["throughput", "memory", "expiry"]
    if args.rounds < 1 or args.duration <= 0 or args.keys < 1 or args.expiry_keys < 1:
        p.error("rounds, duration and key counts must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    for tool in ("redis-server", "redis-benchmark", "redis-cli", "openssl"):
        if shutil.which(tool) is None:
            log(f"error: {tool} not found (install Debian's redis-server and redis-tools)")
            return 1
    if not os.access(args.binary, os.X_OK):
        log(f"error: no cached-server binary at {args.binary} "
            "(build it with: swift build -c release --product cached-server)")
        return 1
    args.binary = os.path.abspath(args.binary)

    def on_term(signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)

    global LOAD_AT_START
    LOAD_AT_START = os.getloadavg()[0]
    workdir = tempfile.mkdtemp(prefix="cached-bench-")
    servers = Servers(args.binary, workdir, shlex.split(args.cached_args))
    results, requests = {}, {}
    started = time.monotonic()
    try:
        if "throughput" in args.only:
            requests = run_throughput(args, servers, workdir, results)
        if "memory" in args.only:
            log(f"== memory: {args.keys:,} keys into fresh servers, without and with a TTL")
            run_memory(args, servers, workdir, results)
        if "expiry" in args.only:
            log(f"== expiry: {args.expiry_keys:,} keys with a {EXPIRY_TTL_SECONDS} s TTL among "
                f"{args.expiry_keys:,} without")
            run_expiry(args, servers, workdir, results)
        servers.stop_all()
        report(args, results, requests, time.monotonic() - started)
        return 0
    except BenchError as error:
        log(f"error: {error}")
        return 1
    except KeyboardInterrupt:
        log("interrupted; stopping the servers")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # don't leave servers behind on a second Ctrl-C
        servers.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
