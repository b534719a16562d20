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
"""

_TORCH_BUILD_ABSENT = """
package(default_visibility = ["//visibility:public"])

genrule(
    name = "missing",
    outs = ["missing.h"],
    cmd = "echo 'LibTorch not found ({why}): run tools/setup (libtorch-dev)' >&2; exit 1",
)

cc_library(name = "torch", hdrs = [":missing"])
"""

def _torch_impl(ctx):
    api = "/usr/include/torch/csrc/api/include"
    if ctx.path(api + "/torch/torch.h").exists:
        ctx.symlink(api, "api_include")
        ctx.file("BUILD", _TORCH_BUILD_PRESENT)
    else:
        ctx.file("BUILD", _TORCH_BUILD_ABSENT.format(why = "no " + api + "/torch/torch.h"))

# Debian's LibTorch 1.13 (libtorch-dev, CPU only); stubs that fail with a clear message when it is
# not installed.
torch_repository = repository_rule(
    implementation = _torch_impl,
    local = True,
)
