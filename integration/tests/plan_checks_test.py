#!/usr/bin/env python3
"""Plans that go wrong quietly, through the real binary on 2 ranks over Gloo: a shadowed rule is
named with the rule that took its parameters; --strict refuses idle rules on every rank (ranks
given different --strict fail together); a plan that shards nothing (no rules, or rules for other
names) is refused by shard, reshard and spec check unless --allow-replicated-only; names in errors
are whole;
`cuda` placements are recorded by shard, reshard, gather, inspect and spec check."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_testlib import (BIN, check, expect_every_rank, finish,  # noqa: E402
                                read_safetensors, run, tmp_path, write_json, write_safetensors)

ALL = {"ranks": "all"}
PROJ = "model.layers.*.self_attn.*_proj.weight"
O_PROJ = "model.layers.*.self_attn.o_proj.weight"
# A natural Llama plan: the generic projection rule first, o_proj's own (dim 1) after it.
LLAMA_PLAN = {"rules": [
    {"match": PROJ, "spec": {"type": "chunk", "dim": 0, "placements": ALL}},
    {"match": "model.embed_tokens.weight", "spec": {"type": "chunk", "dim": 1, "placements": ALL}},
    {"match": "lm_head.weight", "spec": {"type": "chunk", "dim": 0, "placements": ALL}},
    # Matches the attention projections (rules[0] took them) and the MLP's (kept): no warning.
    {"match": "model.layers.*.*.*_proj.weight", "spec": {"type": "chunk", "dim": 1,
                                                         "placements": ALL}},
    {"match": O_PROJ, "spec": {"type": "chunk", "dim": 1, "placements": ALL}}]}
SHADOWED = (f'rules[4] ("{O_PROJ}") matches 4 parameters, all taken by rules[0] ("{PROJ}")')
UNMATCHED = 'rules[2] ("lm_head.weight") matches no parameter of the checkpoint'


def llama_checkpoint():
    tensors = {"model.embed_tokens.weight": ("F32", [6, 4], bytes(range(96)))}
    for layer in range(4):
        for proj in "qkvo":
            tensors[f"model.layers.{layer}.self_attn.{proj}_proj.weight"] = (
                "F32", [4, 6], bytes((layer * 7 + i) % 256 for i in range(96)))
        for proj in ("gate", "up", "down"):
            tensors[f"model.layers.{layer}.mlp.{proj}_proj.weight"] = ("F32", [6, 2], b"\2" * 48)
        tensors[f"model.layers.{layer}.input_layernorm.weight"] = ("F32", [4], b"\1" * 16)
    write_safetensors(tmp_path("llama.safetensors"), tensors, metadata={"format": "pt"})
    return tmp_path("llama.safetensors")


def shadowed_rule(ck):
    plan = write_json("llama.json", LLAMA_PLAN)
    r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", tmp_path("llama-out"),
             "--nproc", "2"])
    check(r.returncode == 0, f"shadowed plan: exit {r.returncode}: {r.stderr}")
    check(f"[rank 0] warning: {plan}: {SHADOWED}\n" in r.stderr,
          f"shadowed plan: no warning naming rules[0]: {r.stderr}")
    check(f"[rank 0] warning: {plan}: {UNMATCHED}\n" in r.stderr,
          f"shadowed plan: the unmatched rule's warning changed: {r.stderr}")
    # rules[3] keeps some of its matches (the MLP's): no warning for it.
    check(r.stderr.count("warning:") == 2, f"shadowed plan: other warnings: {r.stderr}")
    # --strict: the same findings are exit 2 on every rank, before anything is written.
    out = tmp_path("llama-strict")
    r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", out, "--nproc", "2", "--strict"])
    expect_every_rank("--strict", r, 2, f"applying the plan to the checkpoint: ranks 0, 1: {plan}: "
                      f"--strict: {UNMATCHED}; {SHADOWED}")
    check(not os.path.exists(os.path.join(out, "index.json")), "--strict wrote index.json")
    # reshard takes --strict too, on the old directory's parameters.
    r = run(["reshard", "--in", tmp_path("llama-out"), "--plan", plan, "--out", tmp_path("llama-re"),
             "--nproc", "2", "--strict"])
    expect_every_rank("reshard --strict", r, 2, f"--strict: {UNMATCHED}; {SHADOWED}")
    # Ranks given different --strict fail together before data moves (as for --memory-mib).
    script = (f'f=""; if [ "$SHARDKIT_RANK" = 1 ]; then f=--strict; fi; exec "{BIN}" shard '
              f'--plan "{plan}" --checkpoint "{ck}" --out "{tmp_path("llama-mixed")}" $f')
    r = run(["launch", "--nproc", "2", "--", "sh", "-c", script])
    expect_every_rank("different --strict", r, 2,
                      "the ranks were given different --strict: rank 0: not set; rank 1: set")
    check(not os.path.exists(tmp_path("llama-mixed/index.json")), "different --strict: index.json")


def strict_plans(ck):
    # Without idle rules --strict changes nothing; uneven chunks (6 columns on 4 ranks) are legal.
    fixed = dict(LLAMA_PLAN, rules=[LLAMA_PLAN["rules"][4], LLAMA_PLAN["rules"][0],
                                    LLAMA_PLAN["rules"][1]])
    plan = write_json("fixed.json", fixed)
    r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", tmp_path("fixed-out"),
             "--nproc", "4", "--strict"])
    check(r.returncode == 0 and "warning" not in r.stderr, f"fixed plan: {r.returncode} {r.stderr}")
    # A plan that shards nothing — no rules, or rules that match no parameter (a plan meant for
    # other names) — is exit 2 on every rank, nothing written, unless --allow-replicated-only.
    empty = write_json("nothing.json", {"rules": []})
    other = write_json("other-names.json", {"rules": [
        {"match": "transformer.h.*.attn.c_attn.weight",
         "spec": {"type": "chunk", "dim": 0, "placements": ALL}}]})
    for plan in (empty, other):
        out = tmp_path(f"nothing-out-{os.path.basename(plan)}")
        r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", out, "--nproc", "2"])
        expect_every_rank("shards nothing", r, 2,
                          f"{plan}: the plan shards nothing: no rule matches any of the 33 "
                          "parameters of the checkpoint, so every rank would get every one whole "
                          "(--allow-replicated-only if that is what you want)")
        check(not os.path.exists(out), f"shards nothing: {out} was made")
    r = run(["shard", "--plan", empty, "--checkpoint", ck, "--out", tmp_path("nothing-strict"),
             "--nproc", "2", "--strict"])
    expect_every_rank("shards nothing --strict", r, 2,
                      f"{empty}: --strict: the plan shards nothing: no rule matches any of the 33 "
                      "parameters of the checkpoint")
    r = run(["spec", "check", other, "--checkpoint", ck, "--world", "2"])
    check(r.returncode == 2 and "the plan shards nothing" in r.stderr,
          f"spec check of a plan that shards nothing: {r.returncode} {r.stderr}")
    r = run(["spec", "check", other, "--checkpoint", ck, "--world", "2",
             "--allow-replicated-only"])
    check(r.returncode == 0, f"spec check --allow-replicated-only: {r.returncode} {r.stderr}")
    out = tmp_path("nothing-allowed")
    r = run(["shard", "--plan", other, "--checkpoint", ck, "--out", out, "--nproc", "2",
             "--allow-replicated-only"])
    check(r.returncode == 0, f"--allow-replicated-only: {r.stderr}")
    with open(os.path.join(out, "index.json")) as f:
        specs = {p["spec"] for p in json.load(f)["parameters"].values()} if r.returncode == 0 \
            else set()
    check(specs == {"replicated"}, f"--allow-replicated-only: specs {specs}")
    r = run(["reshard", "--in", out, "--plan", empty, "--out", tmp_path("nothing-re")])
    check(r.returncode == 2 and "the plan shards nothing" in r.stderr,
          f"reshard with a plan that shards nothing: {r.returncode} {r.stderr}")


def long_names():
    name = "model.language_model.layers.12.self_attn.q_proj.weight"
    hostile = "x" * 5000
    write_safetensors(tmp_path("long.safetensors"), {name: ("F32", [2, 2], b"\0" * 16),
                                                 hostile: ("F32", [2], b"\0" * 8)})
    plan = write_json("dim2.json", {"rules": [
        {"match": "model.**", "spec": {"type": "chunk", "dim": 2, "placements": ALL}}]})
    r = run(["shard", "--plan", plan, "--checkpoint", tmp_path("long.safetensors"), "--out",
             tmp_path("long-out"), "--nproc", "2"])
    expect_every_rank("long name", r, 2, f'parameter "{name}" (rule 0, "model.**"): dim 2 is out of '
                      "range")
    plan = write_json("hostile.json", {"rules": [
        {"match": "x*", "spec": {"type": "chunk", "dim": 1, "placements": ALL}}]})
    r = run(["shard", "--plan", plan, "--checkpoint", tmp_path("long.safetensors"), "--out",
             tmp_path("long-out")])
    first = r.stderr.splitlines()[0] if r.stderr else ""
    check(r.returncode == 2 and f'parameter "{"x" * 1024}"\u2026 (5000 bytes) (rule 0, "x*")' in first,
          f"a 5000-byte name is cut at 1 KiB with its length: {r.returncode} {first[:200]!r}")


def cuda_placements(ck):
    plan = write_json("cuda.json", {"rules": [
        {"match": PROJ, "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all",
                                                                           "device": "cuda"}}},
        {"match": "model.embed_tokens.weight", "spec": {"type": "chunk", "dim": 1, "placements":
                                                        ["rank:1/cuda:1", "rank:0/cuda:0"]}}]})
    out = tmp_path("cuda-out")
    r = run(["shard", "--plan", plan, "--checkpoint", ck, "--out", out, "--nproc", "2"])
    check(r.returncode == 0, f"cuda plan on gloo: exit {r.returncode}: {r.stderr}")
    if r.returncode != 0:
        return
    with open(os.path.join(out, "index.json")) as f:
        index = json.load(f)["parameters"]
    check(index["model.embed_tokens.weight"]["spec"]["placements"] ==
          ["rank:1/cuda:1", "rank:0/cuda:0"], "cuda placements not recorded as written")
    check(index["model.layers.0.self_attn.q_proj.weight"]["spec"]["placements"] ==
          ["rank:0/cuda", "rank:1/cuda"], "shorthand cuda placements not recorded")
    r = run(["inspect", out])
    check(r.returncode == 0 and "chunk(dim=1)" in r.stdout, f"inspect of a cuda plan: {r.stderr}")
    r = run(["gather", "--in", out, "--out", tmp_path("cuda.safetensors")])
    check(r.returncode == 0 and read_safetensors(tmp_path("cuda.safetensors"))[2] ==
          read_safetensors(ck)[2], f"gather of a cuda plan: {r.stderr}")
    r = run(["reshard", "--in", out, "--plan", plan, "--out", tmp_path("cuda-re"), "--nproc", "3"])
    check(r.returncode == 0, f"reshard with a cuda plan: {r.stderr}")
    r = run(["gather", "--in", tmp_path("cuda-re"), "--out", tmp_path("cuda-re.safetensors")])
    check(r.returncode == 0 and read_safetensors(tmp_path("cuda-re.safetensors"))[2] ==
          read_safetensors(ck)[2], f"gather after a cuda reshard: {r.stderr}")
    r = run(["spec", "check", plan, "--checkpoint", ck, "--world", "2"])
    check(r.returncode == 0 and "rules[1]" in r.stdout, f"spec check of a cuda plan: {r.stderr}")


def main():
    ck = llama_checkpoint()
    shadowed_rule(ck)
    strict_plans(ck)
    long_names()
    cuda_placements(ck)
    finish("plan")


if __name__ == "__main__":
    main()
