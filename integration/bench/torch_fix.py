"""What compare_torch.py, checkpoint_compare.py and checkpoint_torch.py share: Debian's PyTorch
1.13 (its Python 3.11 import fix for torch.distributed._shard, applied at import time; the
installed package is not touched), whether a Python imports torch (dcp_compare.py asks its own)
and this process's memory figures from /proc/self/status."""
import importlib.machinery
import subprocess

TORCH_PYTHON = "/usr/bin/python3"
FIXED_MODULE = "torch.distributed._shard.sharded_tensor.metadata"
BROKEN = b"field(default=TensorProperties())"
FIXED = b"field(default_factory=TensorProperties)"


class _FixedLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module from its source with the Python 3.11 fix (never from a cached .pyc)."""

    def get_code(self, fullname):
        source = self.get_data(self.path).replace(BROKEN, FIXED)
        return compile(source, self.path, "exec", dont_inherit=True)


class FixFinder:
    @staticmethod
    def find_spec(name, path, target=None):
        if name != FIXED_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = _FixedLoader(name, spec.origin)
        return spec


def torch_importable(python=TORCH_PYTHON, code="import torch"):
    """Whether python runs code (by default: imports torch) without an error."""
    try:
        return subprocess.run([python, "-c", code], capture_output=True).returncode == 0
    except OSError:
        return False


def status_mib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass
