#!/usr/bin/env python3
"""Writes the PyTorch DCP part of the hostile input corpus: checkpoint directories that
//integration/tests:hostile_input_test opens as DCP checkpoints (DcpSource::Open, then every tensor
read whole), each of which must be refused with kInvalidArgument within the corpus' time and memory
bounds.

  testing/corpus/generate_dcp.py --small testing/corpus   # dcp/<case>/, checked in
  testing/corpus/generate_dcp.py --large OUT_DIR          # large/dcp/<case>/, at build time

The small cases start from the checkpoints torch 2.15 wrote (integration/formats/dcp/testdata,
make_fixtures.py there) and break one thing each; the metadata pickles that torch would never
write are spelled out opcode by opcode. Edit this script, not the files.
"""

import argparse
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "integration", "formats", "dcp", "testdata")
META = "torch.distributed.checkpoint.metadata"


def fixture(name):
    folder = os.path.join(FIXTURES, name)
    out = {}
    for entry in sorted(os.listdir(folder)):
        with open(os.path.join(folder, entry), "rb") as f:
            out[entry] = f.read()
    return out


def with_file(case, name, content):
    case = dict(case)
    case[name] = content
    return case


def patch_first(data, old, new):
    assert len(old) == len(new) and old in data, (old, new)
    return data.replace(old, new, 1)


def past_the_file(data):
    """The first central directory entry of `data/0`: its local header offset far past the file."""
    at = 0
    while True:
        at = data.index(b"PK\x01\x02", at)
        name_length = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + name_length].endswith(b"data/0"):
            return data[:at + 42] + struct.pack("<I", 0x7FFFFFF0) + data[at + 46:]
        at += 4


class Pickle:
    """Protocol-2 opcodes, globals written once and fetched from the memo after."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}

    def put(self, key):
        index = len(self.memo)
        self.memo[key] = index
        self.out += b"r" + struct.pack("<I", index)

    def get(self, key):
        self.out += b"j" + struct.pack("<I", self.memo[key])

    def glob(self, module, name):
        key = ("global", module, name)
        if key in self.memo:
            return self.get(key)
        self.out += b"c%s\n%s\n" % (module.encode(), name.encode())
        self.put(key)

    def text(self, value):
        data = value.encode()
        self.out += b"X" + struct.pack("<I", len(data)) + data

    def int(self, value):
        self.out += b"J" + struct.pack("<i", value)

    def size(self, dims):
        self.glob("torch", "Size")
        self.out += b"("
        for d in dims:
            self.int(d)
        self.out += b"t\x85R"

    def dataclass(self, name, fields, module=META):
        """NEWOBJ of `module.name`, then BUILD with the dict state `fields` (key, writer) pairs."""
        self.glob(module, name)
        self.out += b")\x81}("
        for key, write in fields:
            self.text(key)
            write()
        self.out += b"ub"

    def finish(self):
        return bytes(self.out + b".")


def shared_chunks_metadata(count):
    """One F32 tensor "w" of `count` elements saved as `count` chunks that are all one memoized
    ChunkStorageMetadata (offsets [0], sizes [1]), each with its own storage entry: the chunks
    overlap (and repeat one index key) — refused after reading `count` memo references."""
    p = Pickle()

    def properties():
        p.glob(META, "TensorProperties")
        p.out += b")\x81("
        p.glob("torch", "float32")
        p.glob("torch.serialization", "_get_layout")
        p.text("torch.strided")
        p.out += b"\x85R\x89"
        p.glob(META, "_MEM_FORMAT_ENCODING")
        p.int(0)
        p.out += b"\x85R\x89Ntb"

    def chunks():
        p.out += b"]("
        p.dataclass("ChunkStorageMetadata", [("offsets", lambda: p.size([0])),
                                             ("sizes", lambda: p.size([1]))])
        p.put("chunk")
        for _ in range(count - 1):
            p.get("chunk")
        p.out += b"e"

    def tensor():
        p.dataclass("TensorStorageMetadata", [("properties", properties),
                                              ("size", lambda: p.size([count])),
                                              ("chunks", chunks)])

    def state():
        p.out += b"}("
        p.text("w")
        tensor()
        p.out += b"u"

    def storage():
        p.out += b"}("
        p.dataclass("MetadataIndex", [("fqn", lambda: p.text("w")), ("offset", lambda: p.size([0])),
                                      ("index", lambda: p.int(0))])
        p.dataclass("_StorageInfo", [("relative_path", lambda: p.text("__0_0.distcp")),
                                     ("offset", lambda: p.int(0)), ("length", lambda: p.int(700))],
                    module="torch.distributed.checkpoint.filesystem")
        p.out += b"u"

    p.dataclass("Metadata", [("state_dict_metadata", state), ("storage_data", storage),
                             ("planner_data", lambda: p.out.extend(b"N")),
                             ("version", lambda: p.text("1.0.0"))])
    return p.finish()


def small_cases():
    basic, sharded = fixture("basic"), fixture("sharded")
    os_system = b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03."
    return {
        # The archive of an item cut off: the item runs past the end of the file.
        "truncated_archive": with_file(sharded, "__1_0.distcp", sharded["__1_0.distcp"][:1000]),
        # The values of the last item cut off: its central directory is gone.
        "truncated_values": with_file(basic, "__0_0.distcp", basic["__0_0.distcp"][:-300]),
        # A record whose local header lies far past the file.
        "record_past_the_file": with_file(basic, "__0_0.distcp", past_the_file(basic["__0_0.distcp"])),
        # An item's data.pkl calls a torch function off the allow-list (same length, so the zip
        # still adds up): never run, refused naming it.
        "item_forbidden_global": with_file(basic, "__0_0.distcp", patch_first(
            basic["__0_0.distcp"], b"_rebuild_tensor_v2", b"_rebuild_parameter")),
        # The metadata itself is os.system("ls").
        "metadata_forbidden_global": {".metadata": os_system, "__0_0.distcp": b""},
        "metadata_not_a_pickle": with_file(sharded, ".metadata", b'{"format": "json"}'),
        "metadata_truncated": with_file(sharded, ".metadata", sharded[".metadata"][:1200]),
        "metadata_unknown_opcode": {".metadata": b"\x80\x02\xfe.", "__0_0.distcp": b""},
        # A list that holds itself.
        "metadata_cycle": {".metadata": b"\x80\x02]q\x00h\x00a.", "__0_0.distcp": b""},
        # A string that claims 2 GiB.
        "metadata_huge_string": {".metadata": b"\x80\x02X\xff\xff\xff\x7fabc.", "__0_0.distcp": b""},
        "shared_chunks_1e3": {".metadata": shared_chunks_metadata(1000), "__0_0.distcp": b""},
    }


def large_cases():
    return {"shared_chunks_1e6": {"__0.metadata": shared_chunks_metadata(10 ** 6),
                                  "__0_0.distcp": b""}}


def write_cases(root, cases):
    for name, files in cases.items():
        folder = os.path.join(root, "dcp", name)
        os.makedirs(folder, exist_ok=True)
        for entry, content in files.items():
            with open(os.path.join(folder, entry), "wb") as f:
                f.write(content)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--small", metavar="DIR", help="write the checked-in cases under DIR")
    group.add_argument("--large", metavar="DIR", help="write the generated cases under DIR")
    args = parser.parse_args()
    write_cases(args.small or args.large, small_cases() if args.small else large_cases())


if __name__ == "__main__":
    main()
