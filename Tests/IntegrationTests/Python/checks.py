"""What the redis-py scripts share: importing redis-py, and collecting mismatches to report at the end."""
import sys

try:
    import redis  # noqa: F401 (re-exported for the scripts)
except ImportError:
    print("redis-py is not installed: pip install redis", file=sys.stderr)
    sys.exit(2)

failures = []


def check(what, got, expected):
    if got != expected:
        failures.append(f"{what}: got {got!r}, expected {expected!r}")


def check_that(what, condition, got):
    if not condition:
        failures.append(f"{what}: got {got!r}")
