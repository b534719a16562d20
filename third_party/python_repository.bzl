"""python_repository(): the Python headers and PyPI's pybind11 for the extension module
(integration/python).

Both come from the workspace's .venv, which tools/setup --test-venv makes: the venv's own Python
(its sysconfig include directory, version and extension suffix) and the pybind11 package pinned
there. Without a venv, or without pybind11 in it, the repository says so and integration/python's
targets are incompatible (SKIPPED, not failed), as integration/torch's are without LibTorch.

Exposes:
  @python_ext//:pybind11    headers of pybind11 and of the venv's Python (cc_library)
  @python_ext//:defs.bzl    PYTHON_EXT_COMPAT (target_compatible_with), PYTHON_TAG ("cp311"),
                            EXT_SUFFIX (".cpython-311-x86_64-linux-gnu.so"), PYBIND11_VERSION,
                            PYTHON_EXT_STATE (why it is absent, or "present")
"""

# Printed by the venv's Python: include dir, tag, extension suffix, pybind11's include and version.
_PROBE = """
import importlib.metadata, sys, sysconfig
import pybind11
print(sysconfig.get_paths()["include"])
print("cp%d%d" % sys.version_info[:2])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print(pybind11.get_include())
print(importlib.metadata.version("pybind11"))
"""

_BUILD_PRESENT = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "pybind11",
    hdrs = glob(["python_include/**/*.h", "pybind11_include/**/*.h"]),
    includes = ["python_include", "pybind11_include"],
)
"""

_BUILD_ABSENT = """
package(default_visibility = ["//visibility:public"])

# {why}
cc_library(
    name = "pybind11",
    target_compatible_with = ["@shardkit//third_party:incompatible"],
)
"""

_DEFS = """
# Written by python_repository (third_party/python_repository.bzl).
PYTHON_EXT_COMPAT = {compat}
PYTHON_TAG = "{tag}"
EXT_SUFFIX = "{suffix}"
PYBIND11_VERSION = "{pybind11}"
PYTHON_EXT_STATE = "{state}"
"""

def _absent(ctx, why):
    ctx.file("BUILD", _BUILD_ABSENT.format(why = why))
    ctx.file("defs.bzl", _DEFS.format(
        compat = '["@shardkit//third_party:incompatible"]',
        tag = "",
        suffix = ".so",
        pybind11 = "",
        state = why,
    ))

def _python_impl(ctx):
    venv = ctx.path(Label("//:WORKSPACE")).dirname.get_child(".venv")
    python = venv.get_child("bin").get_child("python")
    if not python.exists:
        _absent(ctx, "no .venv: run tools/setup --test-venv")
        return
    result = ctx.execute([python, "-c", _PROBE], timeout = 60)
    lines = result.stdout.strip().splitlines()
    if result.return_code != 0 or len(lines) != 5:
        _absent(ctx, "no pybind11 in .venv (tools/setup --test-venv installs it): " +
                      result.stderr.strip().replace("\"", "'").replace("\n", " ")[-300:])
        return
    include, tag, suffix, pybind11_include, pybind11_version = lines
    if not ctx.path(include + "/Python.h").exists:
        _absent(ctx, "the venv's Python has no " + include + "/Python.h")
        return
    ctx.symlink(include, "python_include")
    ctx.symlink(pybind11_include, "pybind11_include")
    ctx.file("BUILD", _BUILD_PRESENT)
    ctx.file("defs.bzl", _DEFS.format(
        compat = "[]",
        tag = tag,
        suffix = suffix,
        pybind11 = pybind11_version,
        state = "present",
    ))

# Re-run when SHARDKIT_VENV_PYTHON changes: tools/setup --test-venv writes it into
# .venv/shardkit.bazelrc (the venv's Python and pybind11 versions), as SHARDKIT_VENV_TORCH.
python_repository = repository_rule(
    implementation = _python_impl,
    configure = True,
    environ = ["SHARDKIT_VENV_PYTHON"],
    local = True,
)
