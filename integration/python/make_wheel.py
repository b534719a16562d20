#!/usr/bin/env python3
"""Builds the shardkit wheel from what Bazel built (integration/python:wheel runs it).

    make_wheel.py --out WHEEL --version V --tag cp311 --extension _core.*.so --cli shardkit
                  --plugins libshardkit_backend_*.so ... --package shardkit/*.py ...

The wheel's layout:
    shardkit/*.py, py.typed          the package (integration/python/shardkit)
    shardkit/_core<EXT_SUFFIX>       the extension module          RUNPATH $ORIGIN/lib
    shardkit/bin/shardkit            the CLI (python -m shardkit)  RUNPATH $ORIGIN/../lib
    shardkit/lib/shardkit/*.so       the backend plugins           RUNPATH $ORIGIN/.. (PLUGIN_RPATH)
    shardkit/lib/*.so*               the shared libraries those need that a bare system of this
                                     kind lacks (Abseil, Gloo, ...), each RUNPATH $ORIGIN
So the wheel installs and runs where none of the build's Debian packages are, as auditwheel
repair would make it: the loader finds every bundled library through the RUNPATHs, with no
environment variable. What is not bundled: the C library, libstdc++ and libgcc_s (every system
has them), and what only a plugin needs (UCX, Open MPI, NCCL and CUDA: a plugin whose library
is missing fails to load with the loader's message; the system's own copy must match the
cluster anyway). Binaries are stripped of debug information.
"""

import argparse
import base64
import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile

# Present on every glibc system: never bundled (auditwheel's manylinux policy lists the same).
SYSTEM = re.compile(r"^(linux-vdso|ld-linux[-\w]*|libc|libm|libpthread|libdl|librt|libutil|"
                    r"libresolv|libstdc\+\+|libgcc_s)\.so")
# A plugin finds the bundled libraries one level up, then NCCL and the CUDA runtime of PyPI's
# nvidia-* wheels (torch's) in the same site-packages, then its build's CUDA_HOME/lib (place()).
PLUGIN_RPATH = "$ORIGIN/..:$ORIGIN/../../../nvidia/nccl/lib:$ORIGIN/../../../nvidia/cu13/lib"
EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed timestamps: the same inputs give the same bytes


def needed(path):
    """(soname, resolved path) of every library `path` loads, its dependencies' included."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) => (\S+|not found)", line)
        if not m:
            continue
        if m.group(2) == "not found":
            found.append((m.group(1), None))
        else:
            found.append((m.group(1), m.group(2)))
    return found


def bundle(staging, binaries):
    """Copies into shardkit/lib what `binaries` need beyond SYSTEM (the plugins find those there
    too, and nothing else). Returns the sonames bundled."""
    lib = os.path.join(staging, "shardkit", "lib")
    os.makedirs(lib, exist_ok=True)
    bundled = {}
    for path in binaries:
        for soname, resolved in needed(path):
            if SYSTEM.match(soname):
                continue
            if resolved is None:
                sys.exit(f"make_wheel: {path} needs {soname}, which this machine lacks")
            bundled[soname] = resolved
    for soname, resolved in sorted(bundled.items()):
        target = os.path.join(lib, soname)
        shutil.copyfile(resolved, target)
        os.chmod(target, 0o755)
        subprocess.run(["strip", "--strip-debug", target], check=True)
        subprocess.run(["patchelf", "--set-rpath", "$ORIGIN", target], check=True)
    return sorted(bundled)


def place(source, target, rpath, strip_all):
    """Copies a binary in, stripped, its RUNPATH `rpath` followed by its absolute entries (the
    NCCL plugin's CUDA_HOME/lib); Bazel's own $ORIGIN-relative entries are dropped."""
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(source, target)
    os.chmod(target, 0o755)
    subprocess.run(["strip", "--strip-all" if strip_all else "--strip-unneeded", target],
                   check=True)
    old = subprocess.run(["patchelf", "--print-rpath", target], capture_output=True, text=True,
                         check=True).stdout.strip()
    absolute = [entry for entry in old.split(":") if entry.startswith("/")]
    subprocess.run(["patchelf", "--set-rpath", ":".join([rpath] + absolute), target], check=True)


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def metadata(version):
    return (f"Metadata-Version: 2.1\nName: shardkit\nVersion: {version}\n"
            "Summary: Shard model parameters across the ranks of a distributed job, and move "
            "weights between layouts\n"
            "Requires-Python: >=3.9\n"
            "Provides-Extra: torch\nRequires-Dist: torch>=2.4; extra == \"torch\"\n")


def write_wheel(staging, out, version, tag):
    dist_info = f"shardkit-{version}.dist-info"
    extra = {
        f"{dist_info}/METADATA": metadata(version),
        f"{dist_info}/WHEEL": (f"Wheel-Version: 1.0\nGenerator: shardkit make_wheel.py\n"
                               f"Root-Is-Purelib: false\nTag: {tag}-{tag}-linux_x86_64\n"),
        f"{dist_info}/entry_points.txt": "[console_scripts]\nshardkit = shardkit.__main__:main\n",
        f"{dist_info}/top_level.txt": "shardkit\n",
    }
    files = []
    for root, _, names in os.walk(staging):
        for name in names:
            path = os.path.join(root, name)
            files.append((os.path.relpath(path, staging), path))
    records = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as wheel:
        def add(arcname, data, mode):
            info = zipfile.ZipInfo(arcname, EPOCH)
            info.external_attr = (stat.S_IFREG | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
            records.append(record_line(arcname, data))
        for arcname, path in sorted(files):
            with open(path, "rb") as f:
                data = f.read()
            add(arcname, data, 0o755 if os.access(path, os.X_OK) else 0o644)
        for arcname, text in extra.items():
            add(arcname, text.encode(), 0o644)
        records.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", EPOCH)
        info.external_attr = (stat.S_IFREG | 0o644) << 16
        wheel.writestr(info, "\n".join(records) + "\n", zipfile.ZIP_DEFLATED)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--extension", required=True)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--plugins", nargs="*", default=[])
    parser.add_argument("--package", nargs="+", required=True)
    args = parser.parse_args()
    staging = tempfile.mkdtemp(prefix="shardkit-wheel-")
    try:
        package = os.path.join(staging, "shardkit")
        os.makedirs(package)
        for path in args.package:
            shutil.copyfile(path, os.path.join(package, os.path.basename(path)))
        bundle(staging, [args.extension, args.cli])
        place(args.extension, os.path.join(package, os.path.basename(args.extension)),
              "$ORIGIN/lib", strip_all=False)
        place(args.cli, os.path.join(package, "bin", "shardkit"), "$ORIGIN/../lib",
              strip_all=True)
        for plugin in args.plugins:
            place(plugin, os.path.join(package, "lib", "shardkit", os.path.basename(plugin)),
                  PLUGIN_RPATH, strip_all=False)
        write_wheel(staging, args.out, args.version, args.tag)
    finally:
        shutil.rmtree(staging)


if __name__ == "__main__":
    main()
