#!/usr/bin/env python3
"""A PyTorch 2.15 trainer's checkpoints through the real binary, checked with torch itself (the
.venv's torch, SHARDKIT_TEST_PYTHON). Four gloo ranks train a small model two AdamW steps and save
the whole training state, torchtitan's way — {"model": ..., "optimizer": ..., "train_state":
{"step": 2, "ntokens": tensor}} — twice: FSDP2 (`fully_shard`) with dcp.save, and parameters made
DTensors by `distribute_tensor` (rows, columns, replicated) with dcp.async_save. Each has
non-tensor items (the optimizer's param_groups, train_state.step).

- A torch checkpoint at --out is never replaced: `reshard` (both formats), `shard` and
  `gather --format dcp` into a copy of it are exit 2 naming what is there, the copy unchanged.
- `reshard --format dcp` onto 3 and 2 ranks keeps the non-tensor items: a plain dcp.load (strict)
  of the whole state into a freshly built trainer of the same layout resumes it — every tensor,
  lr and the step equal to what was saved. `reshard --exclude 'optimizer.**'` leaves the optimizer
  out (tensors and items), keeping train_state.
- `gather --include 'model.**' --strip-prefix model. --max-shard-size` into a model folder that
  holds config.json, generation_config.json and tokenizer files: the model's tensors alone under
  their module names, equal to the saved ones, {"format": "pt"} in every file, the other files
  untouched. An --include that matches nothing warns (and is exit 2 under --strict); one that
  leaves nothing is exit 2.
- An unfinished save (no .metadata) and a .metadata of another checkpoint are named as such.
Without torch in that environment the test is recorded as skipped, with the reason.
"""

import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 4
HIDDEN, VOCAB = 16, 32


def build_model(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq = nn.Linear(HIDDEN, HIDDEN, bias=False)
            self.wo = nn.Linear(HIDDEN, HIDDEN)
            self.norm = nn.LayerNorm(HIDDEN)

        def forward(self, x):
            return self.norm(x + self.wo(torch.relu(self.wq(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, HIDDEN)
            self.layers = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(HIDDEN, VOCAB, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    return Model()


def trainer(torch, layout, mesh, seed):
    """A model in `layout` ("fsdp2" or "tp") and its AdamW, after one or two steps."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    torch.manual_seed(seed)
    model = build_model(torch)
    if layout == "fsdp2":
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    else:  # rows of the embedding and projections, columns of the head, norms replicated
        for name, module in model.named_modules():
            for pname, param in list(module.named_parameters(recurse=False)):
                placement = (Shard(1) if name == "head" else Shard(0)) if param.dim() == 2 \
                    else Replicate()
                module.register_parameter(pname, torch.nn.Parameter(
                    distribute_tensor(param.detach(), mesh, [placement])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2 if seed == 0 else 0.5)
    for step in range(2 if seed == 0 else 1):
        if layout == "fsdp2":
            torch.manual_seed(100 + step)
            model(torch.randint(0, VOCAB, (4, 8))).float().pow(2).mean().backward()
        else:  # DTensor parameters take DTensor inputs: gradients made up, alike on every rank
            for param in model.parameters():
                param.grad = torch.full_like(param, 0.25 * (step + 1) - seed)
        optimizer.step()
        optimizer.zero_grad()
    return model, optimizer


def training_state(torch, model, optimizer, step, ntokens):
    from torch.distributed.checkpoint.state_dict import get_state_dict
    model_sd, optim_sd = get_state_dict(model, optimizer)
    return {"model": model_sd, "optimizer": optim_sd,
            "train_state": {"step": step, "ntokens": torch.tensor(ntokens)}}


def flat(torch, tree, prefix=""):
    """{dotted key: value} of a nested state, DTensors made whole (a collective: every rank)."""
    from torch.distributed.tensor import DTensor
    out = {}
    items = tree.items() if isinstance(tree, dict) else enumerate(tree)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, DTensor):
            out[name] = value.full_tensor()
        elif isinstance(value, dict) or (isinstance(value, list) and
                                         any(isinstance(v, (dict, list)) for v in value)):
            out.update(flat(torch, value, name + "."))
        else:
            out[name] = value
    return out


def rank_main(rank, world, port, job, dirs, result):
    """One torch rank: `save` both checkpoints (and their whole values, on rank 0), or `load`
    each (dirs: {layout: directory}) into a fresh trainer and write what it holds then."""
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import set_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    values = {}
    for layout, directory in sorted(dirs.items()):
        if job == "save":
            model, optimizer = trainer(torch, layout, mesh, seed=0)
            state = training_state(torch, model, optimizer, step=2, ntokens=64)
            if layout == "fsdp2":
                dcp.save(state, checkpoint_id=directory)
            else:
                dcp.async_save(state, checkpoint_id=directory).result()
        else:
            model, optimizer = trainer(torch, layout, mesh, seed=1)  # other values everywhere
            state = training_state(torch, model, optimizer, step=0, ntokens=0)
            dcp.load(state, checkpoint_id=directory)  # strict: every key must be there
            set_state_dict(model, optimizer, model_state_dict=state["model"],
                           optim_state_dict=state["optimizer"])
            state = training_state(torch, model, optimizer, step=state["train_state"]["step"],
                                   ntokens=int(state["train_state"]["ntokens"]))
            values[f"{layout}.lr"] = optimizer.param_groups[0]["lr"]
        values.update({f"{layout}/{k}": v for k, v in flat(torch, state).items()})
    dist.barrier()
    if rank == 0:
        torch.save(values, result)
    dist.destroy_process_group()


def run_torch_ranks(job, dirs, result):
    import torch
    import torch.multiprocessing as mp
    from checkpoint_testlib import free_port
    mp.spawn(rank_main, args=(WORLD, free_port(), job, dirs, result), nprocs=WORLD)
    return torch.load(result, weights_only=False)


def same(torch, a, b):
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and
                a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))
    return a == b


def shardkit(args, label, code=0):
    from checkpoint_testlib import check, run
    r = run(args, timeout=300)
    check(r.returncode == code, f"{label}: exit {r.returncode}, expected {code}: {r.stderr}")
    return r


def plan(name):
    from checkpoint_testlib import write_json
    every = {"ranks": "all"}
    return write_json(name, {"rules": [
        {"match": "**.head.weight", "spec": {"type": "chunk", "dim": 1, "placements": every}},
        {"match": "**.weight", "spec": {"type": "chunk", "dim": 0, "placements": every}},
        {"match": "**.exp_avg*", "spec": {"type": "chunk", "dim": 0, "placements": every}}]})


def torch_checkpoint_is_never_replaced(saved, other, tmp_path):
    """Every command that writes a directory refuses a copy of torch's checkpoint, untouched."""
    from checkpoint_testlib import check, snapshot, write_safetensors
    target = tmp_path("torch-at-out")
    shutil.copytree(saved, target)
    before = snapshot(target)
    safetensors = tmp_path("small.safetensors")
    write_safetensors(safetensors, {"w": ("F32", [2, 2], bytes(16))})
    p = plan("p-refuse.json")
    for label, args in (
            ("reshard --format dcp", ["reshard", "--in", other, "--plan", p, "--out", target,
                                      "--format", "dcp", "--nproc", "2"]),
            ("reshard", ["reshard", "--in", other, "--plan", p, "--out", target]),
            ("shard", ["shard", "--checkpoint", safetensors, "--plan", p, "--out", target]),
            ("gather --format dcp", ["gather", "--in", other, "--out", target, "--format", "dcp"])):
        r = shardkit(args, f"{label} into torch's checkpoint", code=2)
        check(f"{target}: holds a PyTorch DCP checkpoint that shardkit did not write (.metadata, "
              "__0_0.distcp, __1_0.distcp, __2_0.distcp and 1 more; no .shardkit-output)"
              in r.stderr, f"{label} into torch's checkpoint: {r.stderr}")
        check(snapshot(target) == before, f"{label}: torch's checkpoint was changed")


def resumed_equal(torch, saved_values, loaded_values, layout, label):
    from checkpoint_testlib import check
    want = {k: v for k, v in saved_values.items() if k.startswith(layout + "/")}
    got = {k: v for k, v in loaded_values.items() if k.startswith(layout + "/")}
    check(sorted(got) == sorted(want), f"{label}: keys {sorted(set(got) ^ set(want))}")
    differ = [k for k in want if k in got and not same(torch, want[k], got[k])]
    check(not differ, f"{label}: differ from what was saved: {differ[:5]}")
    check(got.get(f"{layout}/train_state.step") == 2 and loaded_values.get(f"{layout}.lr") == 1e-2,
          f"{label}: step {got.get(f'{layout}/train_state.step')}, lr "
          f"{loaded_values.get(f'{layout}.lr')}")


def training_state_survives_reshard(torch, saved, values, tmp_path):
    """reshard --format dcp of each save, onto 3 and 2 ranks; torch resumes from both."""
    from checkpoint_testlib import check
    out = {"fsdp2": tmp_path("re-fsdp2"), "tp": tmp_path("re-tp")}
    r = shardkit(["reshard", "--in", saved["fsdp2"], "--plan", plan("p3.json"), "--out",
                  out["fsdp2"], "--format", "dcp", "--nproc", "3"], "reshard fsdp2 -> 3 ranks")
    check("non-tensor" not in r.stderr, f"reshard --format dcp warns of items: {r.stderr}")
    shardkit(["reshard", "--in", saved["tp"], "--plan", plan("p2.json"), "--out", out["tp"],
              "--format", "dcp", "--nproc", "2"], "reshard tp -> 2 ranks")
    loaded = run_torch_ranks("load", out, tmp_path("loaded.pt"))
    for layout in out:
        resumed_equal(torch, values, loaded, layout, f"dcp.load of reshard --format dcp ({layout})")


def selection(torch, saved, values, tmp_path):
    """reshard --exclude and gather --include/--strip-prefix into a model folder."""
    import torch.distributed.checkpoint as dcp
    from safetensors import safe_open
    from checkpoint_testlib import check
    serving = tmp_path("serving")
    r = shardkit(["reshard", "--in", saved, "--plan", plan("p-serve.json"), "--out", serving,
                  "--format", "dcp", "--exclude", "optimizer.**", "--nproc", "2"],
                 "reshard --exclude")
    keys = set(dcp.FileSystemReader(serving).read_metadata().state_dict_metadata)
    check(keys and not any(k.startswith("optimizer.") for k in keys) and
          "train_state.step" in keys and "train_state.ntokens" in keys and
          "model.embed.weight" in keys, f"reshard --exclude optimizer.**: {sorted(keys)[:8]}")
    folder = tmp_path("hf-model")
    os.makedirs(folder)
    others = {"config.json": '{"model_type": "tiny"}\n', "generation_config.json": "{}\n",
              "tokenizer.json": '{"version": "1.0"}\n', "tokenizer_config.json": "{}\n"}
    for name, text in others.items():
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    r = shardkit(["gather", "--in", saved, "--out", folder, "--include", "model.**",
                  "--strip-prefix", "model.", "--max-shard-size", "4KB"], "gather --include")
    check("non-tensor" not in r.stderr and "warning" not in r.stderr,
          f"gather --include model.** warns: {r.stderr}")
    for name, text in others.items():
        with open(os.path.join(folder, name)) as f:
            check(f.read() == text, f"gather into a model folder changed {name}")
    with open(os.path.join(folder, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    want = {k[len("fsdp2/model."):]: v for k, v in values.items() if k.startswith("fsdp2/model.")}
    check(sorted(weight_map) == sorted(want), f"gather --include: names {sorted(weight_map)}")
    for name, file in sorted(weight_map.items()):
        with safe_open(os.path.join(folder, file), "pt") as f:
            check(f.metadata().get("format") == "pt", f"{file}: __metadata__ {f.metadata()}")
            check(same(torch, f.get_tensor(name), want.get(name)), f"gather --include: {name}")
    r = shardkit(["gather", "--in", saved, "--out", tmp_path("g-warn.safetensors"), "--include",
                  "model.**", "--include", "bogus.**"], "gather, an idle --include")
    check("warning: --include \"bogus.**\" matches no name in the checkpoint" in r.stderr,
          f"idle --include: {r.stderr}")
    r = shardkit(["gather", "--in", saved, "--out", tmp_path("g-strict.safetensors"), "--include",
                  "model.**", "--include", "bogus.**", "--strict"], "idle --include, --strict",
                 code=2)
    r = shardkit(["gather", "--in", saved, "--out", tmp_path("g-none.safetensors"), "--include",
                  "bogus.**"], "--include leaving nothing", code=2)
    check("--include/--exclude leave none of the" in r.stderr, f"nothing picked: {r.stderr}")


def unfinished_and_mismatched(saved, tmp_path):
    from checkpoint_testlib import check
    unfinished = tmp_path("unfinished")
    shutil.copytree(saved["fsdp2"], unfinished)
    os.remove(os.path.join(unfinished, ".metadata"))
    for args in (["inspect", unfinished], ["gather", "--in", unfinished, "--out",
                                           tmp_path("u.safetensors")]):
        r = shardkit(args, f"{args[0]} of an unfinished save", code=2)
        check(f"{unfinished}: a PyTorch DCP checkpoint folder without its metadata (.metadata): "
              "it holds __0_0.distcp and 3 more but no .metadata" in r.stderr,
              f"{args[0]} of an unfinished save: {r.stderr}")
    mixed = tmp_path("mixed")
    shutil.copytree(saved["tp"], mixed)
    shutil.copy(os.path.join(saved["fsdp2"], ".metadata"), os.path.join(mixed, ".metadata"))
    r = shardkit(["gather", "--in", mixed, "--out", tmp_path("m.safetensors")],
                 "gather with another checkpoint's .metadata", code=2)
    check(f"{mixed}: its metadata (.metadata) does not describe the files beside it" in r.stderr,
          f"another checkpoint's .metadata: {r.stderr}")


def main_with_torch():
    import torch
    from checkpoint_testlib import finish, tmp_path
    saved = {"fsdp2": tmp_path("torch-fsdp2"), "tp": tmp_path("torch-tp")}
    values = run_torch_ranks("save", saved, tmp_path("saved.pt"))
    torch_checkpoint_is_never_replaced(saved["fsdp2"], saved["tp"], tmp_path)
    training_state_survives_reshard(torch, saved, values, tmp_path)
    selection(torch, saved["fsdp2"], values, tmp_path)
    unfinished_and_mismatched(saved, tmp_path)
    finish("training checkpoint")


def main():
    if os.environ.get("TRAINING_TORCH") == "1":
        return main_with_torch()
    sys.path.insert(0, HERE)
    from checkpoint_testlib import rerun_with_clients
    return rerun_with_clients(__file__, "TRAINING_TORCH", "training checkpoint",
                              ("torch", "safetensors"))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
