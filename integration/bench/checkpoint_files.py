"""The files of compare_torch.py's checkpoint mode (checkpoint_compare.py): the checkpoint it
writes, the read that warms the page cache, and the byte and tensor comparisons of the outputs
(a Hugging Face output's files included)."""
import hashlib
import json
import os
import struct

CK_ROWS = CK_COLS = 4096                      # one [4096, 4096] F32 tensor = 64 MiB
CK_TENSOR_BYTES = CK_ROWS * CK_COLS * 4
CHUNK = 8 << 20


def read_header(path):
    """(offset of the data section, {name: entry}) of a safetensors file (no __metadata__)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    header.pop("__metadata__", None)
    return 8 + length, header


def write_checkpoint(path, count):
    """count tensors "w000"... of [4096, 4096] F32: one 64 MiB SHAKE-128 block, rotated by a
    different number of bytes per tensor (no two rows or tensors alike); fsynced."""
    names = [f"w{i:03d}" for i in range(count)]
    header = {name: {"dtype": "F32", "shape": [CK_ROWS, CK_COLS],
                     "data_offsets": [i * CK_TENSOR_BYTES, (i + 1) * CK_TENSOR_BYTES]}
              for i, name in enumerate(names)}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    block = memoryview(hashlib.shake_128(b"shardkit checkpoint bench").digest(CK_TENSOR_BYTES))
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for i in range(count):
            k = (i * 16388 + 4) % CK_TENSOR_BYTES
            f.write(block[k:])
            f.write(block[:k])
        f.flush()
        os.fsync(f.fileno())


def read_through(path):
    """Reads the whole file once (warms the page cache)."""
    buf = bytearray(CHUNK)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def same_bytes(a, b):
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    with open(a, "rb", buffering=0) as fa, open(b, "rb", buffering=0) as fb:
        while True:
            x, y = fa.read(CHUNK), fb.read(CHUNK)
            if x != y:
                return False
            if not x:
                return True


def same_tensors(path, reference, names=None):
    """Whether the safetensors file at path holds exactly reference's tensors (dtype, shape,
    bytes), or exactly those of them in names; the headers' text and the data's order may differ.
    Returns (ok, a reason)."""
    base_a, head_a = read_header(path)
    base_b, head_b = read_header(reference)
    wanted = sorted(head_b if names is None else names)
    if sorted(head_a) != wanted:
        return False, "tensor names differ"
    with open(path, "rb", buffering=0) as fa, open(reference, "rb", buffering=0) as fb:
        for name in wanted:
            a, b = head_a[name], head_b[name]
            if (a["dtype"], a["shape"]) != (b["dtype"], b["shape"]):
                return False, f"{name}: dtype or shape differs"
            (begin_a, end_a), (begin_b, end_b) = a["data_offsets"], b["data_offsets"]
            if end_a - begin_a != end_b - begin_b:
                return False, f"{name}: byte count differs"
            fa.seek(base_a + begin_a)
            fb.seek(base_b + begin_b)
            left = end_b - begin_b
            while left:
                n = min(left, CHUNK)
                if fa.read(n) != fb.read(n):
                    return False, f"{name}: bytes differ"
                left -= n
    return True, ""


def same_hf_tensors(directory, reference):
    """Whether the Hugging Face checkpoint in directory — model.safetensors alone, or the files
    its model.safetensors.index.json names — holds exactly reference's tensors, each in the file
    the index says, with total_size their bytes. Returns (ok, a reason, number of files)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    if not os.path.exists(index):
        return (*same_tensors(os.path.join(directory, "model.safetensors"), reference), 1)
    with open(index) as f:
        content = json.load(f)
    weight_map, files = content["weight_map"], sorted(set(content["weight_map"].values()))
    _, head = read_header(reference)
    total = sum(e["data_offsets"][1] - e["data_offsets"][0] for e in head.values())
    if sorted(weight_map) != sorted(head) or content["metadata"]["total_size"] != total:
        return False, "the index's names or total_size differ", len(files)
    for file in files:
        ok, why = same_tensors(os.path.join(directory, file), reference,
                               [t for t, f in weight_map.items() if f == file])
        if not ok:
            return False, f"{file}: {why}", len(files)
    return True, "", len(files)


def same_output(a, b, compared):
    """Whether the directories a and b hold the same files (logs aside), byte-identical where
    compared(name) says so."""
    names = sorted(n for n in os.listdir(a) if not n.endswith(".log"))
    if names != sorted(n for n in os.listdir(b) if not n.endswith(".log")):
        return False
    return all(same_bytes(os.path.join(a, n), os.path.join(b, n)) for n in names if compared(n))
