#!/usr/bin/env python3
"""Writes seed inputs for the DCP fuzz targets from the fixtures (integration/formats/dcp/testdata).

  seeds.py dcp_pickle OUT_DIR   # every .metadata / __R.metadata, and every item's data.pkl
  seeds.py dcp_zip OUT_DIR      # every item of every .distcp file: one torch.save archive each

A .distcp file is the items' archives back to back; each ends with its end of central directory
record (22 bytes, no comment, as torch.save writes it), which is where the file is cut.
"""

import io
import os
import sys
import zipfile

TESTDATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "testdata")
END = b"PK\x05\x06"


def items(path):
    data = open(path, "rb").read()
    start = 0
    while start < len(data):
        end = data.find(END, start)
        if end < 0:
            return
        yield data[start:end + 22]
        start = end + 22


def main(argv):
    if len(argv) != 3 or argv[1] not in ("dcp_pickle", "dcp_zip"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    target, out = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    count = 0
    for case in sorted(os.listdir(TESTDATA)):
        folder = os.path.join(TESTDATA, case)
        if not os.path.isdir(folder) or case.endswith(".expected"):
            continue
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if target == "dcp_pickle" and name.endswith(".metadata"):
                seeds = [open(path, "rb").read()]
            elif name.endswith(".distcp"):
                archives = list(items(path))
                if target == "dcp_zip":
                    seeds = archives
                else:
                    seeds = [zipfile.ZipFile(io.BytesIO(a)).read("archive/data.pkl")
                             for a in archives if a.startswith(b"PK\x03\x04")]
            else:
                continue
            for i, seed in enumerate(seeds):
                with open(os.path.join(out, f"{case}_{name}_{i}"), "wb") as f:
                    f.write(seed)
                count += 1
    print(f"seeds.py: {count} {target} seeds in {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
