#!/usr/bin/env python3
"""Client-side caching and pub/sub through redis-py, the way an application uses them.

usage: redis_py_tracking.py PORT

1. A RESP3 client that keeps a local cache of GETs, turns CLIENT TRACKING on and drops what the server's
   invalidation pushes name (redis-py's own CacheConfig insists on Redis 7.4, so the cache is this script's).
   It must see the value another client wrote once the invalidation arrives.
2. PubSub: a subscriber on one connection receives what another publishes, channel and pattern alike.

Prints every mismatch and exits 1 if there was any; exits 2 when redis-py is missing.
"""
import sys
import time

from checks import check, check_that, failures, redis


def eventually(what, probe, expected, timeout=10.0):
    deadline = time.monotonic() + timeout
    got = probe()
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.01)
        got = probe()
    check(what, got, expected)


class TrackedCache:
    """GET through a local dictionary that the server's invalidations keep honest."""

    def __init__(self, port):
        self.client = redis.Redis(port=port, protocol=3, single_connection_client=True)
        self.client.connection._parser.set_invalidation_push_handler(self.invalidate)
        self.client.client_tracking_on()
        self.local = {}
        self.invalidations = 0

    def invalidate(self, push):
        self.invalidations += 1
        keys = push[1]
        if keys is None:
            self.local.clear()
        else:
            for key in keys:
                self.local.pop(key, None)

    def get(self, key):
        self.client.ping()  # reads any invalidation that has arrived meanwhile
        key = key.encode()
        if key not in self.local:
            self.local[key] = self.client.get(key)
        return self.local[key]

    def set(self, key, value):
        self.client.set(key, value)

    def client_trackinginfo(self):
        return self.client.client_trackinginfo()


port = int(sys.argv[1])
cached = TrackedCache(port)
writer = redis.Redis(port=port)

# Client-side caching.
writer.set("csc:a", "1")
check("first read", cached.get("csc:a"), b"1")
info = cached.client_trackinginfo()
check("tracking is on", sorted(info.get(b"flags", info.get("flags", []))), [b"on"])
check("cached read", cached.get("csc:a"), b"1")
writer.set("csc:a", "2")
eventually("read after another client's write", lambda: cached.get("csc:a"), b"2")
writer.delete("csc:a")
eventually("read after another client's DEL", lambda: cached.get("csc:a"), None)
writer.set("csc:b", "x", px=50)
check("read of a key with a TTL", cached.get("csc:b"), b"x")
eventually("read after the key expired", lambda: cached.get("csc:b"), None)
cached.set("csc:c", "mine")
check("own write", cached.get("csc:c"), b"mine")
writer.flushall()
eventually("read after FLUSHALL", lambda: cached.get("csc:c"), None)
check_that("invalidations received", cached.invalidations >= 4, cached.invalidations)

# Pub/sub.
listener = redis.Redis(port=port, protocol=3)
pubsub = listener.pubsub()
pubsub.subscribe("ps:news")
pubsub.psubscribe("ps:*")
confirmations = [pubsub.get_message(timeout=5) for _ in range(2)]
check("confirmations", [m["type"] if m else None for m in confirmations], ["subscribe", "psubscribe"])
check("receivers", writer.publish("ps:news", "hello"), 2)
received = []
deadline = time.monotonic() + 10
while len(received) < 2 and time.monotonic() < deadline:
    message = pubsub.get_message(timeout=1)
    if message:
        received.append((message["type"], message["channel"], message["data"]))
check("messages", sorted(received), [("message", b"ps:news", b"hello"), ("pmessage", b"ps:news", b"hello")])
check("NUMSUB", writer.pubsub_numsub("ps:news"), [(b"ps:news", 1)])
pubsub.close()

for failure in failures:
    print(failure)
sys.exit(1 if failures else 0)
