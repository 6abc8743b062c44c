# cached: a RESP cache daemon and a Swift HTTP-cache SDK.
# One target per purpose; CI runs `make test`.

SWIFT      ?= swift
PREFIX     ?= /usr/local
DESTDIR    ?=
PORT       ?= 6379
BINDIR      = $(DESTDIR)$(PREFIX)/bin
RELEASE_BIN = .build/release/cached-server
APT_PACKAGES = libhiredis-dev libjemalloc-dev redis-server redis-tools pkg-config
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build release run test deps install uninstall clean bench bench-check bench-hitratio

all: build

# System packages the build and the tests need, installed only where missing.
deps:
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@python3 -c 'import redis' 2>/dev/null || python3 -m pip install -q 'redis>=5' || \
	  { echo "could not install redis-py (pip install redis)"; exit 1; }

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product cached-server

run: release
	$(RELEASE_BIN) --port $(PORT)

# Unit and SDK tests first, then the live tests that start servers and drive them with redis-cli, hiredis and
# redis-py: in separate processes, so that tests that wait on processes and sockets never hold up the
# thread pool of tests that measure timeouts.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip IntegrationTests
	$(SWIFT) test --skip-build --filter IntegrationTests

# Server benchmark against redis-server (needs redis-server and redis-tools; see docs/performance.md).
# Extra options go in BENCH_ARGS, e.g. make bench BENCH_ARGS='--rounds 5'.
BENCH_ARGS ?=
bench:
	$(SWIFT) build -c release --product cached-server
	python3 Benchmarks/server_bench.py --binary $(RELEASE_BIN) $(BENCH_ARGS)

# The same, short: checks that the harness works (under two minutes).
bench-check:
	$(SWIFT) build -c release --product cached-server
	python3 Benchmarks/server_bench.py --binary $(RELEASE_BIN) --quick $(BENCH_ARGS)

# Hit ratio of every maxmemory-policy (and of redis-server's allkeys-lru) on a Zipf workload at a memory
# limit of 10% of the working set (Benchmarks/hitratio.py; python3 with numpy).
bench-hitratio: release
	python3 Benchmarks/hitratio.py --cached $(RELEASE_BIN)

install: release
	install -d $(BINDIR)
	install -m 0755 $(RELEASE_BIN) $(BINDIR)/cached-server

uninstall:
	rm -f $(BINDIR)/cached-server

clean:
	$(SWIFT) package clean
