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
