#!/usr/bin/env python3
"""Hit ratio of each maxmemory-policy under a memory limit, for cached-server and redis-server.

A cache-aside client: a Zipf(s) stream of reads over N keys; each batch of reads is pipelined as GETs, and
every miss is then written back with SET (a value of 100 bytes, EX 3600 so that the volatile-* policies have
keys to evict; nothing expires during a run). The limit is 10% of what the N keys take on that server:
each server is first loaded with all N keys without a limit, and

    maxmemory = used_memory(empty) + 10% * (used_memory(all N keys) - used_memory(empty))

The first `--warmup` reads fill the cache; the hit ratio is measured over the following `--requests` reads.
The stream is the same for every run (fixed seed). Standard library and numpy only.
"""
import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

VALUE = b"v" * 100


def resp(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Client:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.pos = 0

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf = self.buf[self.pos:] + chunk
        self.pos = 0

    def _line(self):
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = self.buf[self.pos:end]
                self.pos = end + 2
                return line
            self._fill()

    def reply(self):
        line = self._line()
        kind = line[:1]
        if kind == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) - self.pos < n + 2:
                self._fill()
            data = self.buf[self.pos:self.pos + n]
            self.pos += n + 2
            return data
        if kind == b"*":
            return [self.reply() for _ in range(int(line[1:]))]
        if kind == b":":
            return int(line[1:])
        if kind == b"-":
            return RuntimeError(line[1:].decode())
        return line[1:].decode()

    def command(self, *args):
        self.sock.sendall(resp(*args))
        r = self.reply()
        if isinstance(r, RuntimeError):
            raise r
        return r

    def pipeline(self, payload, count):
        self.sock.sendall(payload)
        return [self.reply() for _ in range(count)]

    def info(self, section):
        text = self.command("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(executable, kind, work):
    port = free_port()
    args = [executable, "--port", str(port), "--bind", "127.0.0.1"]
    if kind == "redis":
        args += ["--save", "", "--appendonly", "no", "--dir", work]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    for _ in range(200):
        try:
            c = Client(port)
            c.command("PING")
            return proc, c
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{executable} did not start")


def used_memory(client, kind):
    if kind == "cached":
        time.sleep(0.3)  # the sweeper refreshes the heap's share of used_memory at every cycle (10 Hz)
    return int(client.info("memory")["used_memory"])


def encoded_keys(n):
    return [b"$11\r\nkey:%07d\r\n" % i for i in range(n)]


GET = b"*2\r\n$3\r\nGET\r\n"
SET = b"*5\r\n$3\r\nSET\r\n"
SET_TAIL = b"$100\r\n" + VALUE + b"\r\n$2\r\nEX\r\n$4\r\n3600\r\n"


def load_all(client, keys, batch=1000):
    for start_ in range(0, len(keys), batch):
        chunk = keys[start_:start_ + batch]
        replies = client.pipeline(b"".join(SET + k + SET_TAIL for k in chunk), len(chunk))
        if any(r != "OK" for r in replies):
            raise RuntimeError(f"loading failed: {[r for r in replies if r != 'OK'][:1]}")


def run_stream(client, keys, stream, warmup, batch):
    hits = misses = 0
    refused = 0
    for start_ in range(0, len(stream), batch):
        chunk = stream[start_:start_ + batch]
        replies = client.pipeline(b"".join(GET + keys[k] for k in chunk), len(chunk))
        missed = [k for k, r in zip(chunk, replies) if r is None]
        if start_ >= warmup:
            misses += len(missed)
            hits += len(chunk) - len(missed)
        if missed:
            # Cache-aside: write back what was missing (each key once per batch).
            unique = list(dict.fromkeys(missed))
            for r in client.pipeline(b"".join(SET + keys[k] + SET_TAIL for k in unique), len(unique)):
                if r != "OK":
                    refused += 1
    return hits / max(1, hits + misses), refused


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cached", default=".build/release/cached-server")
    parser.add_argument("--redis", default=shutil.which("redis-server") or "redis-server")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--zipf", type=float, default=0.99)
    parser.add_argument("--warmup", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=2_000_000)
    parser.add_argument("--batch", type=int, default=200)
    parser.add_argument("--fraction", type=float, default=0.10)
    parser.add_argument("--seed", type=int, default=20260101)
    parser.add_argument("--policies", default="allkeys-sieve,allkeys-lru,allkeys-lfu,allkeys-random,"
                        "volatile-lru,volatile-lfu,volatile-random,volatile-ttl")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    weights = 1.0 / np.arange(1, args.keys + 1, dtype=np.float64) ** args.zipf
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    popularity = rng.permutation(args.keys)  # rank -> key id, so that hot keys are spread over the key space
    total = args.warmup + args.requests
    ranks = np.minimum(np.searchsorted(cdf, rng.random(total)), args.keys - 1)
    stream = popularity[ranks].tolist()
    keys = encoded_keys(args.keys)

    runs = [("cached", p) for p in args.policies.split(",")] + [("redis", "allkeys-lru")]
    results = []
    work = tempfile.mkdtemp(prefix="hitratio-")
    try:
        for kind in ("cached", "redis"):
            executable = os.path.abspath(args.cached) if kind == "cached" else args.redis
            proc, client = start(executable, kind, work)
            try:
                client.command("FLUSHALL")
                empty = used_memory(client, kind)
                load_all(client, keys)
                full = used_memory(client, kind)
                client.command("FLUSHALL")
                dataset = full - empty
                limit = empty + int(dataset * args.fraction)
                print(f"{kind}: {args.keys} keys take {dataset} bytes ({dataset / args.keys:.1f} per key); "
                      f"empty {empty}; maxmemory {limit}", file=sys.stderr, flush=True)
                for run_kind, policy in runs:
                    if run_kind != kind:
                        continue
                    client.command("FLUSHALL")
                    client.command("CONFIG", "SET", "maxmemory-policy", policy)
                    client.command("CONFIG", "SET", "maxmemory", str(limit))
                    client.command("CONFIG", "RESETSTAT")
                    started = time.time()
                    ratio, refused = run_stream(client, keys, stream, args.warmup, args.batch)
                    held = client.command("DBSIZE")
                    evicted = int(client.info("stats")["evicted_keys"])
                    results.append((kind, policy, limit, dataset, held, evicted, ratio, refused))
                    print(f"  {policy}: hit ratio {ratio:.4f}, {held} keys held, {evicted} evicted, "
                          f"{refused} writes refused ({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
                    client.command("CONFIG", "SET", "maxmemory", "0")
            finally:
                proc.terminate()
                proc.wait(timeout=30)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"Zipf s={args.zipf} over {args.keys:,} keys, {args.warmup:,} warm-up reads then {args.requests:,} "
          f"measured, batches of {args.batch}, 100-byte values, maxmemory = {args.fraction:.0%} of the keys' memory.")
    print()
    print("| Server | Policy | maxmemory (bytes) | Memory of all keys (bytes) | Keys held | Hit ratio |")
    print("|---|---|---:|---:|---:|---:|")
    for kind, policy, limit, dataset, held, evicted, ratio, refused in sorted(results, key=lambda r: -r[6]):
        server = "cached-server" if kind == "cached" else "redis-server 7.0"
        print(f"| {server} | `{policy}` | {limit:,} | {dataset:,} | {held:,} | {ratio:.4f} |")


if __name__ == "__main__":
    main()
