"""Build macros for shardkit's own code: the same warnings (as errors) on every target.

System and third-party code is compiled without these flags; only shardkit's files use them.
"""

SHARDKIT_COPTS = [
    "-Wall",
    "-Wextra",
    "-Werror",
    "-Wno-unused-parameter",
    "-Wno-missing-field-initializers",
]

def shardkit_cc_library(name, copts = [], **kwargs):
    native.cc_library(name = name, copts = SHARDKIT_COPTS + copts, **kwargs)

def shardkit_cc_binary(name, copts = [], **kwargs):
    native.cc_binary(name = name, copts = SHARDKIT_COPTS + copts, **kwargs)

def shardkit_cc_test(name, copts = [], deps = [], **kwargs):
    native.cc_test(
        name = name,
        copts = SHARDKIT_COPTS + copts,
        deps = deps + ["@com_google_googletest//:gtest_main"],
        **kwargs
    )

# Targets that need CUDA: skipped (SKIPPED, not failed) unless built with --config=cuda.
CUDA_ONLY = select({
    "//third_party:cuda_enabled": [],
    "//conditions:default": ["//third_party:incompatible"],
})

# Tests that run uninstrumented system code (Debian's Open MPI: ASan/LSan report its own leaks,
# TSan its own threads, as ours) are skipped (SKIPPED, not failed) in the asan and tsan
# configurations; tag them "no-sanitizers" too, so the reason shows in `bazel query`.
NOT_UNDER_SANITIZERS = select({
    "//third_party:sanitizers_enabled": ["//third_party:incompatible"],
    "//conditions:default": [],
})

def shardkit_gpu_cc_test(name, tags = [], linkopts = [], **kwargs):
    """A test that needs CUDA devices: built only with --config=cuda, tagged requires-gpu.

    It must skip (not fail) when the machine has too few devices. Linked statically with the
    DT_RPATH $ORIGIN/lib (not DT_RUNPATH: it also covers the bundled libraries' own
    dependencies), so tools/gpu_bundle can carry it to a GPU machine with its libraries in lib/.
    """
    shardkit_cc_test(
        name = name,
        tags = tags + ["requires-gpu"],
        linkopts = linkopts + ["-Wl,--disable-new-dtags", "-Wl,-rpath,$$ORIGIN/lib"],
        linkstatic = True,
        target_compatible_with = CUDA_ONLY,
        **kwargs
    )

def layering_sources():
    """This package's C++ files, for the layering check (//tools:layering_test)."""
    native.filegroup(
        name = "layering_sources",
        srcs = native.glob(["**/*.h", "**/*.cc"]),
        visibility = ["//tools:__pkg__"],
    )
