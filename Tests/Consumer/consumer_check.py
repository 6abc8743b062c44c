#!/usr/bin/env python3
"""The consumer check: the SDK used as a service would use it, from the documentation alone.

Every ```swift block of README.md, docs/sdk.md and docs/scaling.md is extracted, exactly as written, into a new package beside
this one (.build-consumer/service), which depends on this package by path:

- the block that starts with `// swift-tools-version` is that package's Package.swift;
- a block whose first line is `// Sources/<Target>/<File>.swift` (or `// Tests/<Target>/<File>.swift`) is that
  file; targets the manifest does not declare are added, with the dependencies their imports name;
- any other block is a file of a library target, DocSamples, so it must be a whole file of declarations, its
  imports included.

The package is built in debug, its tests are run, and each executable runs to completion (exit 0) against a live
cached-server and a loopback HTTP origin, whose addresses it reads from CACHE_URL and ORIGIN. Every executable that
imports only the SDK's core is also built alone, in a scratch path of its own and with pkg-config finding no hiredis
(as without libhiredis-dev), to show that the core needs neither hiredis nor AsyncHTTPClient: no module of theirs
may be compiled, and the program may not link hiredis or OpenSSL.

Usage: consumer_check.py [--server PATH] [--build-only]
  --server PATH   the cached-server to run the programs against (default: .build/debug/cached-server)
  --build-only    only build what the check builds (CI starts this early, beside the tests), check nothing
"""
import argparse
import http.server
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORK = ROOT / ".build-consumer"
PACKAGE = WORK / "service"
DOCS = ["README.md", "docs/sdk.md", "docs/scaling.md"]
HEADER = re.compile(r"^// ((?:Sources|Tests)/([A-Za-z0-9_-]+)/[A-Za-z0-9_+.-]+\.swift)\s*$")
IMPORT = re.compile(r"^(?:@testable |@_spi\(\w+\) |public |@_exported )*import\s+(?:struct |class |enum |protocol |func )?([A-Za-z0-9_]+)", re.M)
GENERATED_CLIENT = ROOT / "Tests" / "CachedNetworkingOpenAPITests" / "Generated"

# Modules a sample may import, and the product and package each comes from (None: the toolchain's own).
MODULES = {
    "CachedNetworking": ("CachedNetworking", "cached"),
    "CachedNetworkingRedis": ("CachedNetworkingRedis", "cached"),
    "CachedNetworkingAsyncHTTPClient": ("CachedNetworkingAsyncHTTPClient", "cached"),
    "CachedNetworkingTesting": ("CachedNetworkingTesting", "cached"),
    "ServiceLifecycle": ("ServiceLifecycle", "swift-service-lifecycle"),
    "Logging": ("Logging", "swift-log"),
    "Tracing": ("Tracing", "swift-distributed-tracing"),
    "AsyncHTTPClient": ("AsyncHTTPClient", "async-http-client"),
    "NIOCore": ("NIOCore", "swift-nio"),
    "HTTPTypes": ("HTTPTypes", "swift-http-types"),
    "CachedNetworkingOpenAPI": ("CachedNetworkingOpenAPI", "cached"),
    "OpenAPIRuntime": ("OpenAPIRuntime", "swift-openapi-runtime"),
    "OpenAPIAsyncHTTPClient": ("OpenAPIAsyncHTTPClient", "swift-openapi-async-http-client"),
    "Foundation": None, "FoundationNetworking": None, "FoundationEssentials": None, "Testing": None,
    "Dispatch": None, "Glibc": None, "Synchronization": None,
}
PACKAGES = {
    "swift-service-lifecycle": '.package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0")',
    "swift-log": '.package(url: "https://github.com/apple/swift-log.git", from: "1.16.2")',
    "swift-distributed-tracing": '.package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3")',
    "async-http-client": '.package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0")',
    "swift-nio": '.package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2")',
    "swift-http-types": '.package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0")',
    "swift-openapi-runtime": '.package(url: "https://github.com/apple/swift-openapi-runtime.git", from: "1.13.4")',
    "swift-openapi-async-http-client":
        '.package(url: "https://github.com/swift-server/swift-openapi-async-http-client.git", from: "1.5.0")',
}
# Modules that a build of the core alone must not compile.
NOT_IN_CORE = ["CachedNetworkingRedis", "CachedNetworkingAsyncHTTPClient", "CHiredis", "CachedTLS", "CTLS",
               "AsyncHTTPClient", "NIOSSL", "CNIOBoringSSL"]


def fail(message):
    print(f"consumer check: {message}", file=sys.stderr)
    sys.exit(1)


def swift_blocks(doc):
    text = (ROOT / doc).read_text()
    for match in re.finditer(r"^```swift\n(.*?)^```", text, re.S | re.M):
        yield text[: match.start()].count("\n") + 1, match.group(1)


def extract():
    """Writes the package; returns {target: (kind, set of imports)}."""
    manifest = None
    files = {}  # relative path -> text
    for doc in DOCS:
        for line, block in swift_blocks(doc):
            first = block.split("\n", 1)[0]
            if first.startswith("// swift-tools-version"):
                if manifest is not None:
                    fail(f"{doc}:{line}: a second Package.swift sample")
                manifest = block
                continue
            header = HEADER.match(first)
            if header:
                path = header.group(1)
            else:
                path = f"Sources/DocSamples/{pathlib.Path(doc).stem}-{line}.swift"
            if path in files:
                fail(f"{doc}:{line}: {path} is written by two samples")
            files[path] = block
    if manifest is None:
        fail("README.md has no Package.swift sample")
    targets = {}
    for path, text in files.items():
        kind, name = path.split("/")[0], path.split("/")[1]
        entry = targets.setdefault(name, {"tests": kind == "Tests", "main": False, "imports": set()})
        entry["main"] |= path.endswith("/main.swift") or "@main" in text
        entry["imports"] |= set(IMPORT.findall(text))
    # A sample that uses the OpenAPI middleware calls a client that swift-openapi-generator made: this package's
    # test client (Tests/CachedNetworkingOpenAPITests/Generated) stands in for the reader's own.
    for name, entry in list(targets.items()):
        if "CachedNetworkingOpenAPI" in entry["imports"]:
            folder = ("Tests" if entry["tests"] else "Sources") + f"/{name}/Generated"
            for generated in sorted(GENERATED_CLIENT.glob("*.swift")):
                files[f"{folder}/{generated.name}"] = generated.read_text()
                entry["imports"] |= set(IMPORT.findall(files[f"{folder}/{generated.name}"]))
    declared = set(re.findall(r'(?:Target|target|testTarget)\(\s*name:\s*"([^"]+)"', manifest))
    additions, packages = [], set()
    for name, entry in sorted(targets.items()):
        for module in entry["imports"]:
            if module not in MODULES and module not in targets:
                fail(f"target {name} imports {module}, which the consumer check does not know")
        if name in declared:
            continue
        dependencies = []
        for module in sorted(entry["imports"]):
            if module in targets:
                dependencies.append(f'"{module}"')
            elif MODULES[module]:
                product, package = MODULES[module]
                dependencies.append(f'.product(name: "{product}", package: "{package}")')
                if package != "cached":
                    packages.add(package)
        kind = "testTarget" if entry["tests"] else "executableTarget" if entry["main"] else "target"
        additions.append(f'    .{kind}(name: "{name}", dependencies: [{", ".join(dependencies)}]),')
    extra = "\n// The consumer check adds the targets of the documentation's other samples.\n"
    if packages:
        extra += "package.dependencies += [\n" + "".join(f"    {PACKAGES[p]},\n" for p in sorted(packages)) + "]\n"
    if additions:
        extra += "package.targets += [\n" + "\n".join(additions) + "\n]\n"
    files["Package.swift"] = manifest + extra
    synchronize(PACKAGE, files)
    # The manifest names this package as `../cached`, as for a service checked out beside it.
    link = WORK / "cached"
    if not (link.is_symlink() and link.resolve() == ROOT):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(ROOT)
    return targets


def synchronize(folder, files):
    """Makes `folder` hold exactly `files` ({relative path: text}), writing only what changed: a build of the
    package that is running (CI starts one early) is not disturbed by a check that writes the same package."""
    for path, text in files.items():
        destination = folder / path
        if destination.is_file() and destination.read_text() == text:
            continue
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(text)
    for existing in sorted(folder.rglob("*"), reverse=True):
        relative = existing.relative_to(folder).as_posix()
        # What SwiftPM keeps in the package (Package.resolved, .swiftpm) stays.
        if relative == "Package.resolved" or relative.startswith("."):
            continue
        if existing.is_file() and relative not in files:
            existing.unlink()
        elif existing.is_dir() and not any(existing.iterdir()):
            existing.rmdir()


def swift(*arguments, scratch, environment=None, timeout=3600):
    command = ["swift", *arguments, "--package-path", str(PACKAGE), "--scratch-path", str(scratch)]
    print("+", " ".join(command), flush=True)
    result = subprocess.run(command, timeout=timeout, env=environment)
    if result.returncode != 0:
        fail(f"`{' '.join(arguments)}` failed ({result.returncode})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Origin(http.server.ThreadingHTTPServer):
    """A loopback origin: JSON lists, fresh for a minute, and a count of the requests per path."""

    daemon_threads = True

    def __init__(self):
        self.requests = {}
        self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(handler):
                with self.lock:
                    self.requests[handler.path] = self.requests.get(handler.path, 0) + 1
                body = b'[{"id":1,"name":"one"},{"id":2,"name":"two"}]'
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Cache-Control", "max-age=60")
                handler.send_header("Content-Length", str(len(body)))
                handler.end_headers()
                handler.wfile.write(body)

            def log_message(handler, *arguments):
                pass

        super().__init__(("127.0.0.1", 0), Handler)


# What the documented programs do, run in this order against one cached-server and one origin: the README's
# program fetches /items from the origin and then from the store; the service of docs/sdk.md's "Lifecycle" finds
# /items in the store that the first process filled; the core-only program keeps its cache in memory.
EXPECTED = {
    "Catalog": {"origin": {"/items": 1}, "output": "network cache cached; hit; ttl="},
    "CatalogService": {"origin": {}, "output": "items: cached; hit; ttl="},
    "Prices": {"origin": {"/prices": 1}, "output": "200 cached; fwd=uri-miss; stored"},
}


def run_program(binary, environment):
    """Runs a sample program to completion; one that prints `ready` is a service, and gets SIGTERM then."""
    print(f"+ {binary.name}", flush=True)
    # Line-buffered (stdbuf), as on a terminal: a pipe would hold `ready` back until the program exits.
    process = subprocess.Popen(["stdbuf", "-oL", str(binary)], env=environment, stdout=subprocess.PIPE, text=True)
    timer = threading.Timer(120, process.kill)
    timer.start()
    lines = []
    try:
        for line in process.stdout:
            print(f"  | {line}", end="", flush=True)
            lines.append(line)
            if line.strip() == "ready":
                process.send_signal(signal.SIGTERM)
        status = process.wait()
    finally:
        timer.cancel()
        if process.poll() is None:
            process.kill()
            process.wait()
    if status != 0:
        fail(f"{binary.name} exited with status {status}" + (" (killed after 120 s)" if status == -signal.SIGKILL else ""))
    return "".join(lines)


def run_executables(targets, server_binary):
    port = free_port()
    with open(WORK / "cached-server.log", "w") as log:
        server = subprocess.Popen(
            [str(server_binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(WORK)],
            stdout=log, stderr=subprocess.STDOUT)
    origin = Origin()
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    fail("cached-server did not start (see .build-consumer/cached-server.log)")
                time.sleep(0.1)
        environment = dict(os.environ, CACHE_URL=f"redis://127.0.0.1:{port}",
                           ORIGIN=f"127.0.0.1:{origin.server_address[1]}")
        for name, entry in sorted(targets.items()):
            if entry["tests"] or not entry["main"]:
                continue
            before = dict(origin.requests)
            output = run_program(WORK / "scratch" / "debug" / name, environment)
            made = {p: n - before.get(p, 0) for p, n in origin.requests.items() if n > before.get(p, 0)}
            print(f"  {name}: exit 0; origin requests {made}", flush=True)
            expected = EXPECTED.get(name)
            if expected is not None:
                if made != expected["origin"]:
                    fail(f"{name} made the origin requests {made}, expected {expected['origin']}")
                if expected["output"] not in output:
                    fail(f"{name} printed {output!r}, expected a line with {expected['output']!r}")
        missing = sorted(set(EXPECTED) - {name for name, entry in targets.items() if entry["main"] and not entry["tests"]})
        if missing:
            fail(f"the documented programs {', '.join(missing)} are no longer in the docs (update EXPECTED)")
    finally:
        origin.shutdown()
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def core_only_programs(targets):
    """The sample programs that import the SDK's core and nothing else of the SDK or of other packages."""
    core_only = [name for name, entry in sorted(targets.items())
                 if entry["main"] and not entry["tests"]
                 and {m for m in entry["imports"] if MODULES.get(m) and MODULES[m][1] == "cached"} == {"CachedNetworking"}
                 and not any(MODULES.get(m) and MODULES[m][1] != "cached" for m in entry["imports"])]
    if not core_only:
        fail("no sample program uses the core alone (import CachedNetworking and nothing else of the SDK)")
    return core_only


def compiled_modules(debug, modules):
    """Those of `modules` compiled in the build folder `debug`: SwiftPM lays out a folder for every target of the
    graph, but only a compiled one has objects or a module."""
    return sorted(module for module in modules
                  if any((debug / f"{module}.build").rglob("*.o")) or (debug / "Modules" / f"{module}.swiftmodule").exists())


def build_core_alone(name, scratch):
    """Builds the program `name` alone in `scratch`, as on a machine without libhiredis-dev: pkg-config finds no
    hiredis, nor anything else."""
    swift("build", "--product", name, scratch=scratch, environment=dict(os.environ, PKG_CONFIG_LIBDIR=str(WORK / "no-pkg-config")))


def check_core_alone(name, scratch):
    """Builds the core-only program `name` alone, and checks that it compiled and links none of NOT_IN_CORE."""
    build_core_alone(name, scratch)
    debug = scratch / "debug"
    compiled = compiled_modules(debug, NOT_IN_CORE)
    if compiled:
        fail(f"building {name}, which imports only CachedNetworking, compiled {', '.join(compiled)}")
    # The libraries the program itself needs (FoundationNetworking's own libcurl needs OpenSSL in turn).
    needed = subprocess.run(["readelf", "-d", str(debug / name)], capture_output=True, text=True).stdout
    needed = [line for line in needed.splitlines() if "(NEEDED)" in line]
    libraries = sorted(library for library in ["libhiredis", "libssl", "libcrypto"] if any(library in line for line in needed))
    if libraries:
        fail(f"{name}, which imports only CachedNetworking, links {', '.join(libraries)}")
    print(f"  {name}: built alone; compiled none of {', '.join(NOT_IN_CORE)}; links no hiredis or OpenSSL", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", default=str(ROOT / ".build" / "debug" / "cached-server"))
    parser.add_argument("--build-only", action="store_true")
    arguments = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    targets = extract()
    print(f"consumer check: {len(targets)} targets from {', '.join(DOCS)}", flush=True)
    core_only = core_only_programs(targets)
    core_scratch = {name: WORK / f"core-{name}" for name in core_only}
    if arguments.build_only:
        swift("build", "--build-tests", scratch=WORK / "scratch")
        for name in core_only:
            build_core_alone(name, core_scratch[name])
        print("consumer check: built", flush=True)
        return
    swift("build", "--build-tests", scratch=WORK / "scratch")
    if any(entry["tests"] for entry in targets.values()):
        swift("test", "--skip-build", scratch=WORK / "scratch")
    run_executables(targets, pathlib.Path(arguments.server))
    for name in core_only:
        check_core_alone(name, core_scratch[name])
    print("consumer check: passed", flush=True)


if __name__ == "__main__":
    main()
