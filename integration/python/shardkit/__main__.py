"""`python -m shardkit ARGS` (and the `shardkit` command the wheel installs): the shardkit CLI,
the binary this package carries, run in this process's place."""

import os
import sys


def binary() -> str:
    """The path of the shardkit CLI inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "shardkit")


def main() -> None:
    path = binary()
    if not os.access(path, os.X_OK):
        sys.exit(f"shardkit: the CLI binary {path} is missing or not executable "
                 "(reinstall the wheel)")
    os.execv(path, ["shardkit"] + sys.argv[1:])


if __name__ == "__main__":
    main()
