#!/usr/bin/env python3
"""The PyTorch 2.x side of compare_torch.py's DCP mode (dcp_compare.py runs it with --python, one
process per rank): torch's own way for each of issue 32's targets, timed inside the job.

  dcp_torch.py hf-to-dcp --rank R --world N --store FILE --src HF_DIR --out DCP_DIR      # D2
  dcp_torch.py reshard   --rank R --world N --store FILE --src DCP_DIR --out DCP_DIR2 --dim 1  # D3
  dcp_torch.py dcp-to-hf --src DCP_DIR --out HF_DIR                                      # D1

- hf-to-dcp, reshard: N ranks over gloo (file:// rendezvous at --store); every rank learns the
  names, shapes and dtypes from the reader's metadata (the model's, before the timing), then, timed
  from a barrier to a barrier: empty DTensors chunked on --dim (Shard(dim) over a 1-d mesh of N),
  `dcp.load` from --src (hf-to-dcp: `HuggingFaceStorageReader`, every *.safetensors of HF_DIR;
  reshard: the default `FileSystemReader`, any world size) and `dcp.save` to --out (the default
  `FileSystemWriter`, which fsyncs its files);
- dcp-to-hf: one process: `dcp_to_torch_save` of --src into --out/model.pt, `torch.load` of it
  (mmap) and safetensors' `save_file` into --out/model.safetensors, fsynced. torch 2.15's
  Hugging Face consolidation (`_consolidate_hf_safetensors`) reads only `HuggingFaceStorageWriter`
  output, not a `FileSystemWriter` directory, so this is its way for a trainer's checkpoint.
Each rank prints one JSON line: rank, in_job_s (rank 0's is the job's), baseline_rss_mib (VmRSS
before the timing), peak_rss_mib (VmHWM of the whole process, torch's import included); dcp-to-hf
adds to_torch_save_s.
"""
import argparse
import json
import os
import time

from torch_fix import status_mib


def dcp_rank(args):
    """One rank of hf-to-dcp or reshard."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, empty

    dist.init_process_group("gloo", init_method="file://" + args.store, rank=args.rank,
                            world_size=args.world)
    mesh = init_device_mesh("cpu", (args.world,))
    reader_type = (dcp.HuggingFaceStorageReader if args.step == "hf-to-dcp"
                   else dcp.FileSystemReader)
    layout = reader_type(args.src).read_metadata().state_dict_metadata
    baseline = status_mib("VmRSS")
    dist.barrier()
    start = time.perf_counter()
    state = {name: empty(list(meta.size), dtype=meta.properties.dtype, device_mesh=mesh,
                         placements=[Shard(args.dim)])
             for name, meta in sorted(layout.items())}
    dcp.load(state, storage_reader=reader_type(args.src))
    dcp.save(state, checkpoint_id=args.out)
    dist.barrier()
    seconds = time.perf_counter() - start
    print(json.dumps({"rank": args.rank, "in_job_s": seconds, "baseline_rss_mib": baseline,
                      "peak_rss_mib": status_mib("VmHWM")}), flush=True)
    dist.destroy_process_group()


def dcp_to_hf(args):
    """dcp-to-hf: dcp_to_torch_save, then save_file, in this one process."""
    import torch
    from safetensors.torch import save_file
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    os.makedirs(args.out, exist_ok=True)
    pt, out = os.path.join(args.out, "model.pt"), os.path.join(args.out, "model.safetensors")
    baseline = status_mib("VmRSS")
    start = time.perf_counter()
    dcp_to_torch_save(args.src, pt)
    exported = time.perf_counter()
    save_file(torch.load(pt, mmap=True, weights_only=True), out)
    fd = os.open(out, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    end = time.perf_counter()
    print(json.dumps({"rank": 0, "in_job_s": end - start, "to_torch_save_s": exported - start,
                      "baseline_rss_mib": baseline, "peak_rss_mib": status_mib("VmHWM")}),
          flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["hf-to-dcp", "reshard", "dcp-to-hf"])
    parser.add_argument("--src", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument("--store")
    parser.add_argument("--dim", type=int, default=0)
    args = parser.parse_args()
    if args.step == "dcp-to-hf":
        dcp_to_hf(args)
    else:
        dcp_rank(args)


if __name__ == "__main__":
    main()
