#!/usr/bin/env python3
"""The dependency rule of DESIGN.md, checked on the sources and the binaries.

Each component may include headers only from the components it may depend
on, within the compiler each floor only from its own and those below
(COMPILER_FLOORS: by their includes, and by the symbols of the compiler's
library a floor), and neither the tuning database nor the tuner any header
of the farm store (FARM_HEADERS); the runtime library must not link LLVM,
gRPC, protobuf, SQLite or ONNX.
Exits 1 listing every violation.
"""
import os
import re
import subprocess
import sys

# component -> components (and third-party include prefixes) it may include.
ALLOWED = {
    # Header-only basics (checks, strings, flags, dtypes, SHA-256 on OpenSSL)
    # every component may use.
    "base": {"base", "openssl"},
    # OpenCL's header only for its types: the runtime loads the ICD loader
    # with dlopen (deploy/opencl_device.cc) and links no GPU library.
    # OpenSSL's libcrypto: the artifact's digests and signature.
    "deploy": {"deploy", "base", "CL", "openssl"},
    # kiln-board, the runner for boards that cannot host a compiler: the
    # deploy runtime and base only, so that it builds small for the board.
    "board": {"board", "deploy", "base", "openssl"},
    # onnx_proto is protobuf: the frontend streams large models through
    # protobuf's io (CodedInputStream) to parse them as they are read. From
    # deploy/: the thread pool's parallel-for (parallel.h), and the device
    # code GPU candidates are timed on (device.h), the runtime's own: no GPU
    # header or library of its own.
    "compiler": {"compiler", "base", "deploy", "llvm", "onnx", "google/protobuf", "openssl"},
    # The log database on SQLite or PostgreSQL (libpq); artifacts on an S3
    # object store over HTTP (cpp-httplib).
    "storage": {"storage", "base", "sqlite3.h", "libpq-fe.h", "openssl", "nlohmann", "httplib.h"},
    # From deploy/: the thread pool's parallel-for (parallel.h).
    "tuner": {"tuner", "compiler", "storage", "base", "deploy", "xgboost"},
    # protobuf: its JSON mapping of the relay's messages (proto/kiln/v1/relay.proto).
    "tracker": {"tracker", "tuner", "compiler", "storage", "base", "kiln/v1", "grpcpp", "spdlog",
                "google/protobuf", "nlohmann", "httplib.h"},
    # board/: the host's end of the board protocol (kiln-agent --board).
    "device_agent": {"device_agent", "compiler", "board", "base", "deploy", "kiln/v1", "grpcpp",
                     "spdlog"},
    # `kiln tune --local` runs the tuner's loop in-process (issue 7);
    # `kiln compile --accuracy-input` runs two builds with the runtime.
    "cli": {"cli", "compiler", "storage", "tuner", "base", "deploy", "kiln/v1", "grpcpp", "spdlog"},
}
# Includes that belong to a component (or a forbidden third party).
KNOWN = set(ALLOWED) | {"nlohmann", "llvm", "onnx", "kiln/v1", "grpcpp", "grpc", "google/protobuf",
                        "sqlite3.h", "libpq-fe.h", "xgboost", "spdlog", "CL", "cuda.h", "openssl",
                        "httplib.h"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)

# The compiler's own floors, bottom up: a file may include the compiler's
# headers of its floor and of the floors below. core: the vocabulary every
# floor speaks (workloads, their ops, configs, targets); ops: the operator library
# (templates, their lowering, the reference) and its face, compiler/kernel.h;
# top: what puts a model together (model, module writer, measurement, JIT).
COMPILER_FLOORS = ["ir", "core", "te", "lower", "codegen", "ops", "graph", "frontend", "top"]
CORE_FILES = {"workload", "op", "element_fn", "config", "target"}


def compiler_floor(path):
    """The floor of compiler/... `path` (a source file or an included header)."""
    parts = path.split("/")
    if len(parts) > 2:
        return parts[1]
    stem = os.path.splitext(parts[1])[0]
    if stem in CORE_FILES:
        return "core"
    return "ops" if stem == "kernel" else "top"


def compiler_violations(src):
    bad = []
    for root, _, files in os.walk(os.path.join(src, "compiler")):
        for f in files:
            if not f.endswith((".h", ".cc")):
                continue
            p = os.path.join(root, f)
            rel = os.path.relpath(p, src)
            floor = COMPILER_FLOORS.index(compiler_floor(rel))
            for inc in INCLUDE.findall(open(p, encoding="utf-8").read()):
                if not inc.startswith("compiler/"):
                    continue
                if COMPILER_FLOORS.index(compiler_floor(inc)) > floor:
                    bad.append(f"{rel} includes {inc} ({compiler_floor(rel)} is below "
                               f"{compiler_floor(inc)})")
    return bad


# Storage split by owner: the tuning database (workloads, records, job tasks,
# cost models: what users export and share) knows nothing of the farm store
# (jobs, tokens, agents, batches, artifacts), and the tuner uses only it.
FARM_HEADERS = {"storage/farm_store.h", "storage/job_rows.h", "storage/stores.h",
                "storage/artifact_store.h"}
TUNING_FILES = ("tuning_db", "record_rows")
TUNING_ONLY = ("tuner",)


def storage_violations(src):
    bad = []
    paths = [os.path.join(src, "storage", f) for f in os.listdir(os.path.join(src, "storage"))
             if f.startswith(TUNING_FILES)]
    for comp in TUNING_ONLY:
        for root, _, files in os.walk(os.path.join(src, comp)):
            paths += [os.path.join(root, f) for f in files]
    for p in paths:
        if not p.endswith((".h", ".cc")):
            continue
        for inc in INCLUDE.findall(open(p, encoding="utf-8").read()):
            if inc in FARM_HEADERS:
                bad.append(f"{os.path.relpath(p, src)} includes {inc} (the tuning database and "
                           "the tuner know nothing of the farm store)")
    return bad


def compiler_symbol_violations(bindir):
    """Each floor's archive (compiler/libkiln_compiler_<floor>.a, the top
    floor's libkiln_compiler.a) uses no kiln symbol that only a floor above
    it defines: the link order, one floor after the other, then always
    resolves."""
    archives = {f: os.path.join(bindir, "compiler", f"libkiln_compiler_{f}.a")
                for f in COMPILER_FLOORS if f != "top"}
    archives["top"] = os.path.join(bindir, "compiler", "libkiln_compiler.a")
    missing = [a for a in archives.values() if not os.path.exists(a)]
    if missing:
        return [f"no archive {m} (is the compiler built as one library a floor?)" for m in missing]
    defined, used = {}, {}
    for floor, archive in archives.items():
        out = subprocess.run(["nm", "-C", archive], capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split(None, 2) if line[:1] not in (" ", "") else ["", *line.split(None, 1)]
            if len(fields) < 3 or not fields[2].startswith("kiln::"):
                continue
            kind, name = fields[1], fields[2]
            if kind == "U":
                used.setdefault(floor, set()).add(name)
            elif kind in "TDBRVW":
                defined.setdefault(name, set()).add(floor)
    bad = []
    for floor, names in used.items():
        at = COMPILER_FLOORS.index(floor)
        for name in sorted(names):
            where = defined.get(name)
            if where and all(COMPILER_FLOORS.index(f) > at for f in where):
                bad.append(f"compiler floor {floor} uses {name}, defined above it in "
                           f"{', '.join(sorted(where))}")
    return bad


def owner(path):
    for k in sorted(KNOWN, key=len, reverse=True):
        if path == k or path.startswith(k + "/"):
            return k
    return None


def main():
    src, bindir = sys.argv[1], sys.argv[2]
    bad = []
    for comp, allowed in ALLOWED.items():
        for root, _, files in os.walk(os.path.join(src, comp)):
            for f in files:
                if not f.endswith((".h", ".cc")):
                    continue
                p = os.path.join(root, f)
                for inc in INCLUDE.findall(open(p, encoding="utf-8").read()):
                    o = owner(inc)
                    if o is not None and o not in allowed:
                        bad.append(f"{os.path.relpath(p, src)} includes {inc} ({comp} may not use {o})")
    bad += compiler_violations(src)
    bad += storage_violations(src)
    bad += compiler_symbol_violations(bindir)
    for lib in (os.path.join(bindir, "deploy", "libkiln_runtime.so"),
                os.path.join(bindir, "board", "kiln-board")):
        ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
        for forbidden in ("libLLVM", "libgrpc", "libprotobuf", "libsqlite3", "libonnx",
                          "libxgboost"):
            if forbidden in ldd:
                bad.append(f"{os.path.basename(lib)} links {forbidden}")
    for b in bad:
        print("VIOLATION", b)
    print(f"layering: {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
