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
APT_PACKAGES = libhiredis-dev libjemalloc-dev libssl-dev redis-server redis-tools pkg-config systemd
# The live tests also drive the server with redis-py 5 or later (RESP3), from PyPI: pip comes from Debian. The
# TLS tests make their certificates with the openssl tool; the consumer check reads the libraries a program links
# with readelf (binutils) and runs programs line-buffered with stdbuf (coreutils).
TEST_APT_PACKAGES = python3-pip openssl binutils coreutils
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: all build release run test test-plain-io consumer-check test-cluster deps deps-test install install-files uninstall clean bench bench-check \
        bench-hitratio bench-sdk fuzz fuzz-check fuzz-build test-sanitize

all: build

# System packages the build needs, installed only where missing.
deps:
	@$(call install_missing,$(APT_PACKAGES))

# What the tests need besides: redis-py 5 or later. Debian's Python refuses pip installs into the system
# (PEP 668), so it goes to the user's site-packages there.
deps-test: deps
	@$(call install_missing,$(TEST_APT_PACKAGES))
	@python3 -c 'import redis, sys; sys.exit(int(redis.__version__.split(".")[0]) < 5)' 2>/dev/null || { \
	  python3 -m pip install -q 'redis>=5' 2>/dev/null || \
	  python3 -m pip install -q --user --break-system-packages 'redis>=5' || \
	  { echo "could not install redis-py 5 or later (pip install 'redis>=5')"; exit 1; }; }

# Installs those of the Debian packages $(1) that are missing.
define install_missing
missing=""; for p in $(1); do \
  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "installing:$$missing"; \
  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
fi
endef

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release --product cached-server

run: release
	$(RELEASE_BIN) --port $(PORT)

# Unit and SDK tests first, one at a time (some check that timeouts fire promptly, which a thread pool busy with
# other tests would make meaningless), then the live tests that start servers and drive them with redis-cli,
# hiredis and redis-py, in parallel and in a process of their own. Last, the consumer check: the Swift samples of
# README.md, docs/sdk.md and docs/scaling.md, extracted into a package of their own that depends on this one, built
# in debug and run against cached-server and a loopback origin (Tests/Consumer/consumer_check.py).
test: deps-test
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --skip IntegrationTests --skip ClusterTests --no-parallel
	$(SWIFT) test --skip-build --filter IntegrationTests
	$(MAKE) consumer-check

# The live tests again, with every cached-server they start on plain SwiftNIO (io-fast-path no) instead of the
# server's own I/O fast path: the fallback must pass everything the fast path passes.
test-plain-io: deps-test
	$(SWIFT) build --build-tests
	CACHED_TEST_IO_FAST_PATH=no $(SWIFT) test --skip-build --filter IntegrationTests

consumer-check:
	$(SWIFT) build --product cached-server
	python3 Tests/Consumer/consumer_check.py --server .build/debug/cached-server

# The SDK on a real Redis Cluster (3 masters and 3 replicas of redis-server on loopback, one cluster per suite):
# the store contract, routing and key layout, traffic while `redis-cli --cluster reshard` moves slots, and a
# master killed during traffic. One test at a time: the load tests need the machine's cores. The routing unit
# tests (no cluster) run with `make test` too.
test-cluster: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --filter 'ClusterTests|ClusterRoutingTests' --no-parallel

# Server benchmark against redis-server (needs redis-server and redis-tools; see docs/performance.md), then the
# SDK benchmarks. Extra options for the server benchmark go in BENCH_ARGS, e.g. make bench BENCH_ARGS='--rounds 5'.
BENCH_ARGS ?=
bench:
	$(SWIFT) build -c release --product cached-server
	python3 Benchmarks/server_bench.py --binary $(RELEASE_BIN) $(BENCH_ARGS)
	$(MAKE) --no-print-directory bench-sdk

# The SDK benchmarks and the server's allocations per command (ordo-one/benchmark, the package in Benchmarks/;
# docs/performance.md, "SDK benchmarks"):
# runs them once into the baseline SDK_BASELINE (stored in Benchmarks/.benchmarkBaselines), prints the tool's
# table from it, then exports its percentiles and prints the targets' table (Benchmarks/sdk_summary.py).
# SDK_BENCH_ARGS go to the run, e.g. SDK_BENCH_ARGS='--filter "1 .*"'. The benchmarks start cached-server
# (the release binary built here) and a local HTTP origin on loopback ports, hence --disable-sandbox.
SDK_BASELINE   ?= sdk
SDK_BENCH_ARGS ?=
SDK_EXPORT      = .build/sdk-percentiles
SDK_PLUGIN      = cd Benchmarks && CACHED_SERVER_BIN=$(abspath $(RELEASE_BIN)) $(SWIFT) package --disable-sandbox --allow-writing-to-package-directory benchmark
bench-sdk:
	$(SWIFT) build -c release --product cached-server
	$(SDK_PLUGIN) baseline update $(SDK_BASELINE) --no-progress $(SDK_BENCH_ARGS)
	$(SDK_PLUGIN) baseline read $(SDK_BASELINE) --no-progress
	rm -rf Benchmarks/$(SDK_EXPORT)
	$(SDK_PLUGIN) baseline read $(SDK_BASELINE) --format histogramPercentiles --path $(SDK_EXPORT) --no-progress \
	  > /dev/null
	python3 Benchmarks/sdk_summary.py Benchmarks/$(SDK_EXPORT)

# The same, short: checks that the harness works (under two minutes).
bench-check:
	$(SWIFT) build -c release --product cached-server
	python3 Benchmarks/server_bench.py --binary $(RELEASE_BIN) --quick $(BENCH_ARGS)

# Hit ratio of every maxmemory-policy (and of redis-server's allkeys-lru) on a Zipf workload at a memory
# limit of 10% of the working set (Benchmarks/hitratio.py; python3 with numpy).
bench-hitratio: release
	python3 Benchmarks/hitratio.py --cached $(RELEASE_BIN)

# Fuzzing with libFuzzer (docs/architecture.md, "Hardening"): the request parser, the reply decoder and the
# command layer, each for FUZZ_SECONDS, starting from the corpus in Tests/Fuzz/corpus. New inputs go to
# fuzz-artifacts/corpus, and a crash stops the run with its input in fuzz-artifacts/. The targets are built in
# their own scratch directory with -sanitize=fuzzer,address and -D FUZZING (their main then runs libFuzzer).
FUZZ_TARGETS  = fuzz-request fuzz-reply fuzz-commands
FUZZ_SECONDS ?= 60
FUZZ_BUILD    = .build-fuzz
FUZZ_FLAGS    = --scratch-path $(FUZZ_BUILD) -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING
# One input may take at most 10 s; no single allocation may exceed 256 MB (nothing the inputs can declare
# must turn into memory); inputs are at most 8 KB.
FUZZ_OPTIONS ?= -timeout=10 -malloc_limit_mb=256 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1

# One target's libFuzzer command line ($$t is the target; seconds to run appended by the caller).
FUZZ_RUN = mkdir -p fuzz-artifacts/corpus/$$t && SWIFT_BACKTRACE=enable=no $(FUZZ_BUILD)/debug/$$t \
  fuzz-artifacts/corpus/$$t Tests/Fuzz/corpus/$$t -dict=Tests/Fuzz/$${t\#fuzz-}.dict \
  -artifact_prefix=fuzz-artifacts/$$t- $(FUZZ_OPTIONS)

fuzz-build:
	@for t in $(FUZZ_TARGETS); do $(SWIFT) build $(FUZZ_FLAGS) --product $$t || exit 1; done

fuzz: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $$t for $(FUZZ_SECONDS) s"; \
	  $(FUZZ_RUN) -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

# The same, bounded: the three targets side by side for 20 s (about 2.5 minutes with a cold build on two
# cores). .ci/run calls it after make test. Each target's output is in fuzz-artifacts/<target>.log.
fuzz-check: fuzz-build
	@mkdir -p fuzz-artifacts; pids=""; \
	for t in $(FUZZ_TARGETS); do \
	  ( $(FUZZ_RUN) -max_total_time=20 > fuzz-artifacts/$$t.log 2>&1 \
	    && echo "$$t: $$(grep -E 'DONE' fuzz-artifacts/$$t.log)" \
	    || { echo "$$t FAILED:"; tail -60 fuzz-artifacts/$$t.log; exit 1; } ) & pids="$$pids $$!"; \
	done; status=0; for p in $$pids; do wait $$p || status=1; done; exit $$status

# The server's unit tests (RESP, storage, commands, connection handler, configuration, the fuzzing corpus, and
# the HTTP caching rules) under ThreadSanitizer, then under AddressSanitizer, each in its own scratch directory;
# slow, so not part of make test (see docs/architecture.md, "Hardening"). libjemalloc exports its own operator
# new and delete: the sanitizer's C++ runtime is linked in whole so that C++ allocations, like malloc, go
# through the sanitizer. Leak checking is off: LeakSanitizer cannot follow references that Swift keeps with
# tag bits in multi-payload enums (RESPValue), and reports their targets as leaked.
SANITIZER_RT = $(dir $(realpath $(shell command -v $(SWIFT))))../lib/swift/clang/lib/linux
sanitizer_cxx = -Xlinker --whole-archive -Xlinker $(SANITIZER_RT)/libclang_rt.$(1)_cxx-x86_64.a \
  -Xlinker --no-whole-archive -Xlinker --dynamic-list=$(SANITIZER_RT)/libclang_rt.$(1)_cxx-x86_64.a.syms
SANITIZE_TESTS = ^(RESPTests|CacheCoreTests|CacheServerTests|FuzzCorpusTests|HTTPCachingTests)\.

test-sanitize:
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan $(call sanitizer_cxx,tsan)
	$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan --filter '$(SANITIZE_TESTS)'
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan $(call sanitizer_cxx,asan)
	ASAN_OPTIONS=detect_leaks=0 \
	  $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --filter '$(SANITIZE_TESTS)'

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
