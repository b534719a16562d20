"""Repository rules that keep Bazel 4.2.3 offline.

stub_repositories() declares @rules_cc, @rules_java and @remote_coverage_tools as small local
stand-ins, so Bazel's built-in WORKSPACE suffix never tries to download them.
cuda_repository() exposes CUDA_HOME's runtime and NCCL, or stubs that fail with a clear message.
"""

_RULES_CC_DEFS = """
def cc_binary(**kwargs):
    native.cc_binary(**kwargs)

def cc_import(**kwargs):
    native.cc_import(**kwargs)

def cc_library(**kwargs):
    native.cc_library(**kwargs)

def cc_proto_library(**kwargs):
    native.cc_proto_library(**kwargs)

def cc_test(**kwargs):
    native.cc_test(**kwargs)

def cc_toolchain(**kwargs):
    native.cc_toolchain(**kwargs)

def cc_toolchain_suite(**kwargs):
    native.cc_toolchain_suite(**kwargs)

def objc_library(**kwargs):
    native.objc_library(**kwargs)

def objc_import(**kwargs):
    native.objc_import(**kwargs)
"""

_RULES_JAVA_DEFS = """
def java_binary(**kwargs):
    native.java_binary(**kwargs)

def java_import(**kwargs):
    native.java_import(**kwargs)

def java_library(**kwargs):
    native.java_library(**kwargs)

def java_lite_proto_library(**kwargs):
    native.java_lite_proto_library(**kwargs)

def java_proto_library(**kwargs):
    native.java_proto_library(**kwargs)

def java_test(**kwargs):
    native.java_test(**kwargs)

def java_package_configuration(**kwargs):
    native.java_package_configuration(**kwargs)

def java_plugin(**kwargs):
    native.java_plugin(**kwargs)

def java_runtime(**kwargs):
    native.java_runtime(**kwargs)

def java_toolchain(**kwargs):
    native.java_toolchain(**kwargs)
"""

def _stub_impl(ctx):
    for path, content in ctx.attr.files.items():
        ctx.file(path, content)

_stub_repository = repository_rule(
    implementation = _stub_impl,
    attrs = {"files": attr.string_dict()},
)

def stub_repositories():
    _stub_repository(
        name = "rules_cc",
        files = {
            "WORKSPACE": "workspace(name = \"rules_cc\")\n",
            "BUILD": "",
            "cc/BUILD": "",
            "cc/defs.bzl": _RULES_CC_DEFS,
        },
    )
    _stub_repository(
        name = "rules_java",
        files = {
            "WORKSPACE": "workspace(name = \"rules_java\")\n",
            "BUILD": "",
            "java/BUILD": "",
            "java/defs.bzl": _RULES_JAVA_DEFS,
        },
    )
    _stub_repository(
        name = "remote_coverage_tools",
        files = {
            "WORKSPACE": "workspace(name = \"remote_coverage_tools\")\n",
            "noop.sh": "#!/bin/sh\nexit 0\n",
            "BUILD": "\n".join([
                "package(default_visibility = [\"//visibility:public\"])",
                "sh_binary(name = \"coverage_report_generator\", srcs = [\"noop.sh\"])",
                "sh_binary(name = \"lcov_merger\", srcs = [\"noop.sh\"])",
                "",
            ]),
        },
    )

_CUDA_BUILD_PRESENT = """
package(default_visibility = ["//visibility:public"])

# Only what host code reaches from <cuda_runtime_api.h> and <nccl.h> (top-level headers, crt/,
# nv/ and CCCL's nv/target): the whole include/ tree is ~2000 files and would be staged into the
# sandbox of every compile.
cc_library(
    name = "cuda_headers",
    hdrs = glob([
        "include/*.h",
        "include/*.hpp",
        "include/crt/**",
        "include/nv/**",
        "include/cccl/nv/**",
    ]),
    includes = ["include", "include/cccl"],
)

# The CUDA runtime, linked statically (as PyTorch does): binaries then need only the driver's
# libcuda.so.1 at run time, which cudart loads itself; no libcudart.so has to travel with them.
cc_library(
    name = "cudart",
    linkopts = ["-L{home}/lib64", "-L{home}/lib", "-l:libcudart_static.a", "-ldl", "-lrt", "-pthread"],
    deps = [":cuda_headers"],
)

# NCCL, linked dynamically: found at run time through this rpath or LD_LIBRARY_PATH (on GPU
# machines without a toolkit, the nvidia-nccl-cu13 Python package's lib/ directory).
cc_library(
    name = "nccl",
    linkopts = ["-L{home}/lib", "-L{home}/lib64", "-Wl,-rpath,{home}/lib", "-lnccl"],
    deps = [":cuda_headers"],
)
"""

_CUDA_BUILD_ABSENT = """
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'CUDA not found at {home}: set CUDA_HOME to a CUDA toolkit with NCCL' >&2; exit 1",
)

cc_library(name = "cuda_headers", hdrs = [":missing"])
cc_library(name = "cudart", deps = [":cuda_headers"])
cc_library(name = "nccl", deps = [":cuda_headers"])
"""

def _cuda_impl(ctx):
    home = ctx.os.environ.get("CUDA_HOME", "/usr/local/cuda")
    if ctx.path(home + "/include/cuda_runtime_api.h").exists:
        ctx.symlink(home + "/include", "include")
        ctx.file("BUILD", _CUDA_BUILD_PRESENT.format(home = home))
    else:
        ctx.file("BUILD", _CUDA_BUILD_ABSENT.format(home = home))

cuda_repository = repository_rule(
    implementation = _cuda_impl,
    environ = ["CUDA_HOME"],
    local = True,
)

_MPI_BUILD_PRESENT = """
package(default_visibility = ["//visibility:public"])

# Open MPI's C API (mpi.h and the headers it includes). OMPI_SKIP_MPICXX: the deprecated C++
# bindings are neither included nor linked.
cc_library(
    name = "mpi",
    hdrs = glob(["include/*.h"]),
    defines = ["OMPI_SKIP_MPICXX=1"],
    includes = ["include"],
    linkopts = ["-L{libdir}", "-lmpi"],
)
"""

_MPI_BUILD_ABSENT = """
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'Open MPI not found ({why}): run tools/setup (libopenmpi-dev, openmpi-bin)' >&2; exit 1",
)

cc_library(name = "mpi", hdrs = [":missing"])
"""

def _mpi_impl(ctx):
    # mpicc knows where its distribution keeps mpi.h and libmpi (Debian: a multiarch folder).
    mpicc = ctx.which("mpicc")
    why = "no mpicc on PATH"
    if mpicc != None:
        incdirs = ctx.execute([mpicc, "--showme:incdirs"])
        libdirs = ctx.execute([mpicc, "--showme:libdirs"])
        why = "mpicc --showme failed: " + incdirs.stderr + libdirs.stderr
        if incdirs.return_code == 0 and libdirs.return_code == 0:
            incdir = incdirs.stdout.split(" ")[0].strip()
            libdir = libdirs.stdout.split(" ")[0].strip()
            if ctx.path(incdir + "/mpi.h").exists:
                ctx.symlink(incdir, "include")
                ctx.file("BUILD", _MPI_BUILD_PRESENT.format(libdir = libdir))
                return
            why = "no mpi.h in " + incdir
    ctx.file("BUILD", _MPI_BUILD_ABSENT.format(why = why.replace("'", "").replace("\n", " ")))

# Open MPI (Debian's libopenmpi-dev), found through mpicc; stubs that fail with a clear message
# when it is not installed.
mpi_repository = repository_rule(
    implementation = _mpi_impl,
    local = True,
)

_TORCH_BUILD_PRESENT = """
package(default_visibility = ["//visibility:public"])

# LibTorch's C++ frontend headers live outside the built-in include directories
# (/usr/include/torch/csrc/api/include): `includes` makes Bazel pass them with -isystem, so
# warnings inside them do not trip shardkit's -Werror. ATen/, c10/ and torch/csrc/ come from
# /usr/include itself (a system directory already). The libraries are in the multiarch lib dir.
cc_library(
    name = "torch",
    hdrs = glob(["api_include/**/*.h"]),
    includes = ["api_include"],
    linkopts = ["-ltorch", "-ltorch_cpu", "-lc10", "-pthread"],
)

# Debian's LibTorch is CPU-only: CUDA tensors are refused at run time.
cc_library(name = "torch_cuda", deps = [":torch"])
"""

_TORCH_BUILD_ABSENT = """
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'LibTorch not found ({why}): run tools/setup (libtorch-dev)' >&2; exit 1",
)

cc_library(name = "torch", hdrs = [":missing"])
cc_library(name = "torch_cuda", hdrs = [":missing"])
"""

_TORCH2_BUILD = """
package(default_visibility = ["//visibility:public"])

# LibTorch {version} from {origin}: {root}
# Headers from include/ with -isystem (warnings inside them do not trip shardkit's -Werror). The
# libraries are linked by absolute path, not through Bazel's _solib symlinks: libtorch_cpu.so
# finds what it needs (libgomp beside it, and CUDA's runtime libcudart/libcupti, which it loads
# even on a CPU machine) through its own $ORIGIN rpath, and that only works from its real
# directory. Only libtorch_cpu.so and libc10.so: libtorch.so would pull in libtorch_cuda.so,
# cuDNN, NCCL and cuBLAS.
# -lgloo first: libtorch_cpu.so exports a Gloo of its own (about 300 symbols of namespace gloo,
# another version than Debian's libgloo). A program's symbols bind to the library named first, so
# shardkit's Gloo backend must find Debian's libgloo ahead of libtorch_cpu.so, or it runs torch's
# Gloo code on Debian's objects (a crash in the first connect).
cc_library(
    name = "torch",
    hdrs = glob(["include/**"]),
    includes = ["include", "include/torch/csrc/api/include"],
    linkopts = [
        "-L{lib}",
        "-Wl,-rpath,{lib}",
        "-Wl,--push-state,--no-as-needed",
        "-lgloo",
        "-Wl,--pop-state",
        "-ltorch_cpu",
        "-lc10",
    ] + {cuda_linkopts} + ["-pthread"],
)

# LibTorch's CUDA part ({torch_cuda_state}), for a program that holds CUDA tensors in LibTorch
# (integration/torch's GPU test; users' programs usually link libtorch.so, which pulls it in).
# --no-as-needed: nothing references it by name; loading it registers LibTorch's CUDA hooks and
# kernels. Its own dependencies (cuDNN, cuBLAS, NCCL, …) come through its $ORIGIN rpath into
# PyPI's nvidia/ packages. NCCL: a process has one libnccl.so.2, the first found. A program that
# also links shardkit's NCCL backend finds CUDA_HOME's first (its rpath comes earlier), and
# LibTorch then runs on it: fine for shardkit's paths (LibTorch itself calls no NCCL there), but
# LibTorch's own process groups may need functions only newer NCCLs have.
cc_library(
    name = "torch_cuda",
    linkopts = {torch_cuda_linkopts},
    deps = [":torch"],
)
"""

# The LibTorch 2.x tree to use, or None: $LIBTORCH_HOME (an unpacked LibTorch archive, or a
# `torch` package directory), else the `torch` package in the workspace's .venv (tools/setup
# --test-venv installs PyPI's torch there). Returns (root, origin).
def _find_torch2(ctx):
    home = ctx.os.environ.get("LIBTORCH_HOME", "")
    if home:
        return (home, "LIBTORCH_HOME")
    venv_lib = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv").get_child("lib")
    if not venv_lib.exists:
        return None
    for python in venv_lib.readdir():
        torch = python.get_child("site-packages").get_child("torch")
        if torch.get_child("lib").get_child("libtorch_cpu.so").exists:
            return (str(torch), "the test venv (tools/setup --test-venv)")
    return None

def _torch_version(ctx, root):
    for name in ["version.py", "build-version"]:
        path = ctx.path(root + "/" + name)
        if path.exists:
            for line in ctx.read(path).splitlines():
                if line.startswith("__version__"):
                    return line.split("=")[1].strip().strip("'\"")
                if name == "build-version" and line.strip():
                    return line.strip()
    return "(version unknown)"

def _torch2_build(ctx, root, origin):
    lib = root + "/lib"
    if not ctx.path(lib + "/libtorch_cpu.so").exists or not ctx.path(
        root + "/include/torch/csrc/api/include/torch/torch.h",
    ).exists:
        fail("LibTorch at %s (%s) lacks lib/libtorch_cpu.so or the C++ API headers" % (root, origin))
    ctx.symlink(root + "/include", "include")

    # PyPI's wheel keeps CUDA's runtime in nvidia/cu13/lib beside the torch package.
    cuda_lib = ctx.path(root).dirname.get_child("nvidia").get_child("cu13").get_child("lib")
    cuda_linkopts = []
    if cuda_lib.exists:
        cuda_linkopts = ["-Wl,-rpath-link," + str(cuda_lib), "-Wl,-rpath," + str(cuda_lib)]
    torch_cuda_linkopts = []
    torch_cuda_state = "absent from this LibTorch: CUDA tensors are refused at run time"
    if ctx.path(lib + "/libtorch_cuda.so").exists:
        torch_cuda_state = "present"
        nvidia = ctx.path(root).dirname.get_child("nvidia")
        for package in ["nccl", "cudnn", "cusparselt", "nvshmem", "cu13"]:
            package_lib = nvidia.get_child(package).get_child("lib")
            if package_lib.exists:
                torch_cuda_linkopts += ["-Wl,-rpath," + str(package_lib)]
                torch_cuda_linkopts += ["-Wl,-rpath-link," + str(package_lib)]
        torch_cuda_linkopts += [
            "-Wl,--push-state,--no-as-needed",
            "-ltorch_cuda",
            "-lc10_cuda",
            "-Wl,--pop-state",
        ]
    ctx.file("BUILD", _TORCH2_BUILD.format(
        version = _torch_version(ctx, root),
        origin = origin,
        root = root,
        lib = lib,
        cuda_linkopts = repr(cuda_linkopts),
        torch_cuda_linkopts = repr(torch_cuda_linkopts),
        torch_cuda_state = torch_cuda_state,
    ))

def _torch_impl(ctx):
    found = _find_torch2(ctx)
    if found:
        _torch2_build(ctx, found[0], found[1])
        return
    api = "/usr/include/torch/csrc/api/include"
    if ctx.path(api + "/torch/torch.h").exists:
        ctx.symlink(api, "api_include")
        ctx.file("BUILD", _TORCH_BUILD_PRESENT)
    else:
        ctx.file("BUILD", _TORCH_BUILD_ABSENT.format(why = "no " + api + "/torch/torch.h"))

# LibTorch for integration/torch, the first found of: $LIBTORCH_HOME; PyPI's torch 2.x in the
# workspace's .venv (what tools/setup --test-venv installs, and CI tests); Debian's LibTorch 1.13
# (libtorch-dev, CPU only), the fallback without PyPI; else stubs that fail with a clear message.
# Re-run when LIBTORCH_HOME or SHARDKIT_VENV_TORCH changes. The latter says which torch the venv
# holds: tools/setup --test-venv writes it into .venv/shardkit.bazelrc (which .bazelrc imports:
# every Bazel command sees it) and removes that file when the venv has no torch, so that Bazel
# looks again whenever the venv gains, changes or loses its torch, whatever ran Bazel before.
torch_repository = repository_rule(
    implementation = _torch_impl,
    configure = True,
    environ = ["LIBTORCH_HOME", "SHARDKIT_VENV_TORCH"],
    local = True,
)
