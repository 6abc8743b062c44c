#!/usr/bin/env python3
"""Drives a server with redis-py the way an application would, over RESP2 or RESP3: strings, counters,
expiry, pipelines, transactions (MULTI/EXEC, WATCH), decoded responses.

usage: redis_py_client.py PORT PROTOCOL   (PROTOCOL is 2 or 3)

Prints every mismatch and exits 1 if there was any; exits 2 when redis-py is missing or the usage is wrong.
Runs against an empty server (the test starts one for it); it only touches keys under `py:`.
"""
import sys

from checks import check, check_that, failures, redis


def version_tuple(text):
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        return ()


def check_hello(r, protocol):
    # HELLO with the protocol already in use re-announces the connection without switching it.
    reply = r.execute_command("HELLO", str(protocol))
    if protocol == 2:
        check_that("HELLO 2 is a flat array of 7 pairs", isinstance(reply, list) and len(reply) == 14, reply)
        if not isinstance(reply, list):
            return
        reply = dict(zip(reply[0::2], reply[1::2]))
    else:
        check_that("HELLO 3 is a map", isinstance(reply, dict), reply)
        if not isinstance(reply, dict):
            return
    check("HELLO fields", sorted(reply.keys()),
          sorted([b"server", b"version", b"proto", b"id", b"mode", b"role", b"modules"]))
    check("HELLO proto", reply.get(b"proto"), protocol)
    check("HELLO mode", reply.get(b"mode"), b"standalone")
    check("HELLO role", reply.get(b"role"), b"master")
    check("HELLO modules", reply.get(b"modules"), [])
    check_that("HELLO id is an integer", isinstance(reply.get(b"id"), int), reply.get(b"id"))
    version = reply.get(b"version", b"").decode()
    check_that("HELLO version is a Redis version >= 7.0 (clients gate features on it)",
               version_tuple(version) >= (7, 0, 0), version)


def check_strings(r):
    check("SET", r.set("py:k", "v"), True)
    check("GET", r.get("py:k"), b"v")
    check("GET missing", r.get("py:missing"), None)
    check("SET NX on an existing key", r.set("py:k", "other", nx=True), None)
    check("SET XX on a missing key", r.set("py:missing", "x", xx=True), None)
    check("SET GET returns the old value", r.set("py:k", "w", get=True), b"v")
    check("MSET", r.mset({"py:a": "1", "py:b": "2"}), True)
    check("MGET with a missing key", r.mget(["py:a", "py:missing", "py:b"]), [b"1", None, b"2"])
    check("APPEND returns the new length", r.append("py:a", "23"), 3)
    check("STRLEN", r.strlen("py:a"), 3)
    check("GETRANGE", r.getrange("py:a", 1, -1), b"23")
    check("GETDEL", r.getdel("py:b"), b"2")
    check("GETDEL again", r.getdel("py:b"), None)
    check("EXISTS counts", r.exists("py:a", "py:b", "py:k"), 2)
    check("DELETE counts", r.delete("py:a", "py:b"), 1)


def check_counters(r):
    check("INCR", r.incr("py:n"), 1)
    check("INCRBY", r.incrby("py:n", 10), 11)
    check("DECR", r.decr("py:n"), 10)
    check("DECRBY", r.decrby("py:n", 15), -5)
    check("GET a counter", r.get("py:n"), b"-5")
    r.set("py:word", "abc")
    try:
        r.incr("py:word")
        failures.append("INCR of a non-integer: no error")
    except redis.ResponseError as error:
        check("INCR of a non-integer", str(error), "value is not an integer or out of range")


def check_expiry(r):
    r.set("py:e", "1")
    check("TTL without expiry", r.ttl("py:e"), -1)
    check("TTL of a missing key", r.ttl("py:missing"), -2)
    check("EXPIRE", r.expire("py:e", 100), True)
    ttl = r.ttl("py:e")
    check_that("TTL after EXPIRE 100", 99 <= ttl <= 100, ttl)
    pttl = r.pttl("py:e")
    check_that("PTTL after EXPIRE 100", 98_000 < pttl <= 100_000, pttl)
    check("EXPIRE of a missing key", r.expire("py:missing", 100), False)
    check("PERSIST", r.persist("py:e"), True)
    check("TTL after PERSIST", r.ttl("py:e"), -1)
    check("SET PXAT in the past", r.set("py:gone", "x", pxat=1000), True)
    check("a key set to expire in the past is gone", r.get("py:gone"), None)
    check("SET EX", r.set("py:ex", "x", ex=50), True)
    ttl = r.ttl("py:ex")
    check_that("TTL after SET EX 50", 49 <= ttl <= 50, ttl)


def check_pipeline(r):
    pipe = r.pipeline(transaction=False)
    for _ in range(100):
        pipe.incr("py:pipelined")
    pipe.get("py:pipelined")
    check("pipelined INCRs, in order", pipe.execute(), list(range(1, 101)) + [b"100"])


def check_transactions(r, port, protocol):
    # r.pipeline() sends its commands in MULTI/EXEC unless told otherwise.
    with r.pipeline() as pipe:
        pipe.set("py:tx", 1).incr("py:tx").get("py:tx")
        check("a transaction: pipeline() with MULTI/EXEC", pipe.execute(), [True, 2, b"2"])

    # A command that fails when EXEC runs it: execute() raises, and the commands around it ran.
    r.set("py:tx:text", "abc")
    pipe = r.pipeline()
    pipe.set("py:tx:before", "x").incr("py:tx:text").set("py:tx:after", "y")
    try:
        pipe.execute()
        failures.append("INCR of a string inside a transaction: execute() should raise")
    except redis.ResponseError:
        pass
    check("the commands around the failing one ran", r.mget(["py:tx:before", "py:tx:after"]), [b"x", b"y"])

    # Optimistic locking: another client changes the watched key, EXEC fails with WatchError.
    other = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10)
    r.set("py:balance", 100)
    with r.pipeline() as pipe:
        pipe.watch("py:balance")
        balance = int(pipe.get("py:balance"))
        other.incrby("py:balance", 5)
        pipe.multi()
        pipe.set("py:balance", balance - 10)
        try:
            pipe.execute()
            failures.append("EXEC after another client changed a watched key: execute() should raise WatchError")
        except redis.WatchError:
            pass
    check("the other client's change stands", r.get("py:balance"), b"105")

    # r.transaction() retries the function until EXEC goes through.
    attempts = []

    def withdraw(pipe):
        attempts.append(1)
        balance = int(pipe.get("py:balance"))
        if len(attempts) == 1:
            other.incrby("py:balance", 1)
        pipe.multi()
        pipe.set("py:balance", balance - 10)

    r.transaction(withdraw, "py:balance")
    check("r.transaction() tried again after the conflict", len(attempts), 2)
    check("and then applied its change", r.get("py:balance"), b"96")
    other.close()


def check_decoded(port, protocol):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, decode_responses=True, socket_timeout=10)
    r.set("py:text", "héllo")
    check("decoded GET", r.get("py:text"), "héllo")
    check("decoded MGET", r.mget(["py:text", "py:missing"]), ["héllo", None])
    r.close()


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("2", "3"):
        print("usage: redis_py_client.py PORT PROTOCOL(2|3)", file=sys.stderr)
        sys.exit(2)
    port, protocol = int(sys.argv[1]), int(sys.argv[2])
    r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol, socket_timeout=10, socket_connect_timeout=5)
    try:
        check("PING", r.ping(), True)
        check_hello(r, protocol)
        check_strings(r)
        check_counters(r)
        check_expiry(r)
        check_pipeline(r)
        check_transactions(r, port, protocol)
        check_decoded(port, protocol)
    except redis.RedisError as error:
        failures.append(f"unexpected {type(error).__name__}: {error}")
    finally:
        r.close()
    if failures:
        print(f"redis-py (RESP{protocol}) saw {len(failures)} mismatch(es):", file=sys.stderr)
        for failure in failures:
            print("  " + failure, file=sys.stderr)
        sys.exit(1)
    print(f"redis-py (RESP{protocol}): all checks passed")


if __name__ == "__main__":
    main()
