#!/usr/bin/env python3
"""The DCP writers (metadata_writer.h, torch_zip_writer.h) against the real torch 2.15, under
SHARDKIT_TEST_PYTHON: write_dcp_sample writes a tiny checkpoint by hand (F32 split in 2 chunks,
BF16, I64, FP8, U16, a 0-dim and an empty tensor, one __0_0.distcp), then with torch:

- torch.load of each item's byte range gives the chunk's bytes (data/0's CRC-32 is 0: torch.load
  does not check it), while Python's zipfile reports that CRC as bad and every other record's as
  good;
- each item equals torch.save's own archive of the same tensor byte for byte, serialization_id
  and data/0's CRC-32 aside;
- pickle.load of `.metadata` gives a Metadata; dcp.load(no_dist=True) into plain tensors gives
  every tensor's bytes; format_utils.dcp_to_torch_save gives them under their flat names.

Without that Python, or without torch in it, the test records "skipped" with the reason.
"""

import io
import json
import os
import pickle
import struct
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.join(os.environ.get("TEST_SRCDIR", "."), "shardkit/integration/tests"))
from checkpoint_testlib import check, finish, skip_test, tmp_path  # noqa: E402

NAME = "dcp_writer_torch_test"
TOOL = os.path.join(os.environ.get("TEST_SRCDIR", "."),
                    "shardkit/integration/formats/dcp/write_dcp_sample")


def zip_mask(archive, names):
    """`archive` with the CRC-32s of `names` zeroed (descriptor and central directory), and the
    serialization_id's digits."""
    out = bytearray(archive)
    z = zipfile.ZipFile(io.BytesIO(archive))
    for name in names:
        info = z.getinfo(name)
        h = info.header_offset
        name_len, extra_len = struct.unpack_from("<HH", archive, h + 26)
        data = h + 30 + name_len + extra_len
        if name.endswith("serialization_id"):
            out[data:data + info.file_size] = b"0" * info.file_size
        if info.file_size:
            out[data + info.file_size + 4:data + info.file_size + 8] = b"\0" * 4
    end = archive.rindex(b"PK\x05\x06")
    pos = struct.unpack_from("<I", archive, end + 16)[0]  # the central directory
    while archive[pos:pos + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", archive, pos + 28)
        if archive[pos + 46:pos + 46 + name_len].decode() in names:
            out[pos + 16:pos + 20] = b"\0" * 4
        pos += 46 + name_len + extra_len + comment_len
    return bytes(out)


def raw(tensor, torch):
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def check_items(torch, folder, manifest):
    with open(os.path.join(folder, "__0_0.distcp"), "rb") as f:
        data = f.read()
    masked = ["archive/data/0", "archive/.data/serialization_id"]
    for item in manifest["items"]:
        label = f"item {item['fqn']} at {item['offsets']}"
        archive = data[item["offset"]:item["offset"] + item["length"]]
        tensor = torch.load(io.BytesIO(archive), weights_only=True)
        check(list(tensor.shape) == item["sizes"], f"{label}: torch.load shape {tensor.shape}")
        check(raw(tensor, torch) == bytes.fromhex(item["hex"]), f"{label}: torch.load bytes differ")
        z = zipfile.ZipFile(io.BytesIO(archive))
        bad = z.testzip()
        check(bad == ("archive/data/0" if item["hex"] else None),
              f"{label}: zipfile's CRC check found {bad!r}")
        for info in z.infolist():
            if info.filename != "archive/data/0":
                z.read(info.filename)  # raises on a bad CRC-32
        theirs = io.BytesIO()
        torch.save(tensor, theirs)
        check(zip_mask(archive, masked) == zip_mask(theirs.getvalue(), masked),
              f"{label}: differs from torch.save's archive of the same tensor")


def check_loads(torch, folder, manifest):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    from torch.distributed.checkpoint.metadata import Metadata
    with open(os.path.join(folder, ".metadata"), "rb") as f:
        metadata = pickle.load(f)
    check(isinstance(metadata, Metadata), f"pickle.load(.metadata) gave {type(metadata)}")
    want = {t["fqn"]: t for t in manifest["tensors"]}
    check(sorted(metadata.state_dict_metadata) == sorted(want), "metadata keys")
    state = {fqn: torch.empty(t["shape"], dtype=getattr(torch, t["dtype"]))
             for fqn, t in want.items()}
    dcp.load(state, checkpoint_id=folder, no_dist=True)
    for fqn, t in want.items():
        check(raw(state[fqn], torch) == bytes.fromhex(t["hex"]), f"dcp.load {fqn}: bytes differ")
    out = tmp_path("converted.pt")
    dcp_to_torch_save(folder, out)
    loaded = torch.load(out, weights_only=True)
    check(sorted(loaded) == sorted(want), f"dcp_to_torch_save keys {sorted(loaded)}")
    for fqn, t in want.items():
        if fqn in loaded:
            check(str(loaded[fqn].dtype) == "torch." + t["dtype"] and
                  raw(loaded[fqn], torch) == bytes.fromhex(t["hex"]),
                  f"dcp_to_torch_save {fqn}: dtype or bytes differ")


def main():
    python = os.environ.get("SHARDKIT_TEST_PYTHON")
    if not os.environ.get("DCP_WRITER_UNDER_TORCH"):
        if not python:
            skip_test(NAME, "no SHARDKIT_TEST_PYTHON (a Python with torch 2.15)")
        probe = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            skip_test(NAME, f"no torch in SHARDKIT_TEST_PYTHON {python}: "
                      f"{probe.stderr.strip().splitlines()[-1:]}")
        env = dict(os.environ, DCP_WRITER_UNDER_TORCH="1")
        sys.exit(subprocess.run([python, os.path.abspath(__file__)], env=env).returncode)
    import torch
    folder = tmp_path("written")
    os.makedirs(folder, exist_ok=True)
    r = subprocess.run([TOOL, folder], capture_output=True, text=True)
    check(r.returncode == 0, f"write_dcp_sample: exit {r.returncode}: {r.stderr}")
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    check_items(torch, folder, manifest)
    check_loads(torch, folder, manifest)
    print(f"torch {torch.__version__}: {len(manifest['items'])} items checked")
    finish(NAME)


if __name__ == "__main__":
    main()
