# cached: a RESP cache daemon and a Swift HTTP-cache SDK.
# One target per purpose; CI runs `make test`.

SWIFT      ?= swift
PREFIX     ?= /usr/local
DESTDIR    ?=
PORT       ?= 6379
BINDIR      = $(DESTDIR)$(PREFIX)/bin
# systemd reads units from $(PREFIX)/lib/systemd/system for PREFIX /usr/local and /usr.
UNITDIR     = $(DESTDIR)$(PREFIX)/lib/systemd/system
# The config file's place is fixed, whatever PREFIX is: the unit names it.
CONFDIR     = $(DESTDIR)/etc/cached
RELEASE_BIN = .build/release/cached-server
# The binary install-files installs (install builds it first).
INSTALL_BIN ?= $(RELEASE_BIN)
# systemd provides systemd-analyze, which the tests use to verify the unit.
APT_PACKAGES = libhiredis-dev libjemalloc-dev redis-server redis-tools pkg-config systemd
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build release run test test-cluster deps install install-files uninstall clean bench bench-check bench-hitratio

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

# Unit and SDK tests first, one at a time (some check that timeouts fire promptly, which a thread pool busy with
# other tests would make meaningless), then the live tests that start servers and drive them with redis-cli,
# hiredis and redis-py, in parallel and in a process of their own.
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip IntegrationTests --skip ClusterTests --no-parallel
	$(SWIFT) test --skip-build --filter IntegrationTests

# The SDK on a real Redis Cluster (3 masters and 3 replicas of redis-server on loopback, one cluster per suite):
# the store contract, routing and key layout, traffic while `redis-cli --cluster reshard` moves slots, and a
# master killed during traffic. One test at a time: the load tests need the machine's cores. The routing unit
# tests (no cluster) run with `make test` too.
test-cluster: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter 'ClusterTests|ClusterRoutingTests' --no-parallel

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

# Builds a release binary, then installs it with the systemd unit and the default config.
install: release
	$(MAKE) --no-print-directory install-files

# Installs without building: the binary (INSTALL_BIN), the unit with ExecStart pointing at that binary, and
# the config file unless one is there already (an operator's edits are kept; the shipped one is left beside it
# as cached.conf.default).
install-files:
	install -d $(BINDIR) $(UNITDIR) $(CONFDIR)
	install -m 0755 $(INSTALL_BIN) $(BINDIR)/cached-server
	sed 's|^ExecStart=/usr/local/bin/cached-server |ExecStart=$(PREFIX)/bin/cached-server |' \
	  deploy/cached-server.service > $(UNITDIR)/cached-server.service.tmp
	chmod 0644 $(UNITDIR)/cached-server.service.tmp
	mv $(UNITDIR)/cached-server.service.tmp $(UNITDIR)/cached-server.service
	@if [ -e $(CONFDIR)/cached.conf ]; then \
	  install -m 0644 deploy/cached.conf $(CONFDIR)/cached.conf.default; \
	  echo "kept the existing $(CONFDIR)/cached.conf (the shipped one is cached.conf.default)"; \
	else \
	  install -m 0644 deploy/cached.conf $(CONFDIR)/cached.conf; \
	fi

# Removes the binary and the unit; the config file and the snapshots stay.
uninstall:
	rm -f $(BINDIR)/cached-server $(UNITDIR)/cached-server.service

clean:
	$(SWIFT) package clean
