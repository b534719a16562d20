#!/usr/bin/env python3
"""Writes the hostile input corpus that //integration/tests:hostile_input_test feeds to the parsers.

  testing/corpus/generate.py --small testing/corpus   # the small files, checked in
  testing/corpus/generate.py --large OUT_DIR          # the big ones, generated at build time

Layout (the directory names the parser): spec/ (spec and plan parser, then binding), safetensors/
(safetensors::Reader), index/ (index.json parser), hf_index/ (Hugging Face indexes:
CheckpointSource), valid/ (one accepted input per parser, so that
the rejections above are known to come from the hostile part). Every file outside valid/ must be
rejected with kInvalidArgument, within a time and memory bound. Edit this script, not the files.
"""

import argparse
import hashlib
import json
import os
import struct


def compact(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# Specs and plans
CHUNK = '{"type": "chunk", "dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu"]}'


def chunk(dim='0', placements='["rank:0/cpu", "rank:1/cpu"]', extra=''):
    return '{"type": "chunk", "dim": %s, "placements": %s%s}' % (dim, placements, extra)


def enumerable(shards):
    return '{"type": "enumerable", "shards": [%s]}' % ", ".join(shards)


def shard(offsets, sizes, placement='"rank:0/cpu"'):
    return '{"offsets": %s, "sizes": %s, "placement": %s}' % (offsets, sizes, placement)


def plan(rules, head='"version": 1, '):
    return '{%s"rules": %s}' % (head, rules)


def rule(match='"w"', spec=CHUNK):
    return '{"match": %s, "spec": %s}' % (match, spec)


SPECS = {
    "empty": "",
    "whitespace": " \n\t ",
    "null": "null",
    "array": "[]",
    "empty_object": "{}",
    "string": '"chunk"',
    "truncated": CHUNK[:40],
    "truncated_in_string": '{"type": "chu',
    "trailing_garbage": CHUNK + " x",
    "two_documents": CHUNK + CHUNK,
    "comment": "/* spec */ " + CHUNK,
    "single_quotes": CHUNK.replace('"', "'"),
    "nan": chunk(dim="NaN"),
    "infinity": chunk(dim="Infinity"),
    "minus_infinity": chunk(dim="-Infinity"),
    "float_overflow": chunk(dim="1e400"),
    "integer_beyond_uint64": chunk(dim="99999999999999999999999"),
    "uint64_max": chunk(dim="18446744073709551615"),
    "int64_max_dim": chunk(dim="9223372036854775807"),
    "int64_min_dim": chunk(dim="-9223372036854775808"),
    "float_dim": chunk(dim="1.0"),
    "exponent_dim": chunk(dim="1e0"),
    "string_dim": chunk(dim='"0"'),
    "bool_dim": chunk(dim="true"),
    "null_dim": chunk(dim="null"),
    "negative_zero_float_dim": chunk(dim="-0.0"),
    "dim_out_of_range": chunk(dim="2"),
    "dim_negative_out_of_range": chunk(dim="-3"),
    "duplicate_key": chunk(extra=', "dim": 1'),
    "duplicate_type": '{"type": "chunk", "type": "enumerable", "dim": 0, "placements": ["rank:0"]}',
    "duplicate_key_in_shard": enumerable(
        ['{"offsets": [0, 0], "sizes": [8, 4], "sizes": [8, 4], "placement": "rank:0"}']),
    "unknown_key": chunk(extra=', "dims": 1'),
    "type_capitalised": CHUNK.replace('"chunk"', '"Chunk"'),
    "type_missing": '{"dim": 0, "placements": ["rank:0/cpu"]}',
    "type_number": CHUNK.replace('"chunk"', "1"),
    "version_2": chunk(extra=', "version": 2'),
    "version_string": chunk(extra=', "version": "1"'),
    "placements_empty": chunk(placements="[]"),
    "placements_string": chunk(placements='"rank:0/cpu"'),
    "placements_null": chunk(placements="null"),
    "placement_worker_name": chunk(placements='["worker0/cpu"]'),
    "placement_leading_zero": chunk(placements='["rank:01/cpu"]'),
    "placement_negative_rank": chunk(placements='["rank:-1/cpu"]'),
    "placement_rank_2pow31": chunk(placements='["rank:2147483648/cpu"]'),
    "placement_rank_huge": chunk(placements='["rank:99999999999999999999999/cpu"]'),
    "placement_cuda_huge": chunk(placements='["rank:0/cuda:99999999999999999999"]'),
    "placement_cpu_index": chunk(placements='["rank:0/cpu:0"]'),
    "placement_meta": chunk(placements='["rank:0/meta"]'),
    "placement_nul": chunk(placements='["rank:0\\u0000/cpu"]'),
    "placement_number": chunk(placements="[0, 1]"),
    "placement_rank_outside_world": chunk(placements='["rank:0/cpu", "rank:4/cpu"]'),
    "placement_cuda_on_gloo_world": chunk(placements='["rank:0/cuda:0", "rank:1/cpu:1"]'),
    "shorthand_range_beyond_kmaxrank": chunk(placements='{"ranks": "0..2147483648"}'),
    "shorthand_range_huge_in_limits": chunk(placements='{"ranks": "0..2147483647"}'),
    "shorthand_range_reversed": chunk(placements='{"ranks": "5..2"}'),
    "shorthand_range_leading_zero": chunk(placements='{"ranks": "0..03"}'),
    "shorthand_ranks_empty": chunk(placements='{"ranks": []}'),
    "shorthand_ranks_negative": chunk(placements='{"ranks": [0, -1]}'),
    "shorthand_ranks_outside_world": chunk(placements='{"ranks": [0, 1, 2, 3, 4]}'),
    "shorthand_bad_device": chunk(placements='{"ranks": "all", "device": "gpu"}'),
    "shorthand_unknown_key": chunk(placements='{"ranks": "all", "devices": "cpu"}'),
    "shorthand_missing_ranks": chunk(placements='{"device": "cpu"}'),
    "enumerable_negative_sizes": enumerable([shard("[0, 0]", "[-1, 4]")]),
    "enumerable_negative_offsets": enumerable([shard("[-8, 0]", "[8, 4]")]),
    "enumerable_overlap": enumerable([shard("[0, 0]", "[8, 4]"), shard("[4, 0]", "[4, 4]")]),
    "enumerable_gap": enumerable([shard("[0, 0]", "[4, 4]"), shard("[5, 0]", "[3, 4]")]),
    "enumerable_rank_mismatch": enumerable([shard("[0, 0]", "[8]")]),
    "enumerable_mixed_dims": enumerable([shard("[0, 0]", "[4, 4]"), shard("[4]", "[4]")]),
    "enumerable_wrong_ndim": enumerable([shard("[0, 0, 0]", "[8, 4, 1]")]),
    "enumerable_int64_max_sizes": enumerable(
        [shard("[0, 0]", "[9223372036854775807, 9223372036854775807]")]),
    "enumerable_int64_max_offsets": enumerable(
        [shard("[9223372036854775807, 9223372036854775807]", "[1, 1]")]),
    "enumerable_offset_plus_size_overflows": enumerable(
        [shard("[9223372036854775800, 0]", "[100, 4]")]),
    "enumerable_empty": enumerable([]),
    "enumerable_shard_not_object": enumerable(['"rank:0"']),
    "enumerable_only_empty_shards": enumerable([shard("[0, 0]", "[0, 4]"), shard("[8, 4]", "[0, 0]")]),
    "nesting_100": chunk(dim="[" * 100 + "]" * 100),
    "invalid_utf8_placement": chunk(placements='["rank:0/\udcff"]'),
    "overlong_utf8": chunk(placements='["rank:0/\udcc0\udcaf"]'),
    "lone_surrogate": chunk(placements='["rank:0/\\ud800"]'),
    "nul_then_garbage": CHUNK + "\0" + '{"dim": 7}',
    "raw_control_char": chunk(placements='["rank:0/\ncpu"]'),
    "nul_in_key": '{"type": "chunk", "\\u0000dim": 0, "placements": ["rank:0"]}',
    "bom_then_bad_dim": "\ufeff" + chunk(dim='"x"'),
    "plan_rules_not_array": plan('{"match": "w"}'),
    "plan_rules_null": plan("null"),
    "plan_rule_unknown_key": plan('[{"match": "w", "spec": %s, "when": 1}]' % CHUNK),
    "plan_rule_missing_spec": plan('[{"match": "w"}]'),
    "plan_match_empty": plan("[%s]" % rule(match='""')),
    "plan_match_partial_double_star": plan("[%s]" % rule(match='"a**.w"')),
    "plan_match_number": plan("[%s]" % rule(match="7")),
    "plan_src_rank_negative": plan("[]", head='"src_rank": -1, '),
    "plan_src_rank_2pow31": plan("[]", head='"src_rank": 2147483648, '),
    "plan_src_rank_outside_world": plan("[%s]" % rule(), head='"src_rank": 7, '),
    "plan_strategy_unknown": plan("[]", head='"strategy": "gossip", '),
    "plan_version_0": plan("[]", head='"version": 0, '),
    "plan_bad_spec_in_rule_1": plan("[%s, %s]" % (rule(), rule(spec=chunk(dim='"x"')))),
    "plan_duplicate_rules": '{"rules": [], "rules": []}',
    "plan_unknown_top_key": plan("[]", head='"src": 0, '),
    "plan_dim_out_of_range_for_parameter": plan("[%s]" % rule(match='"a.*.weight"',
                                                              spec=chunk(dim="5"))),
    "plan_rank_outside_world": plan("[%s]" % rule(match='"**"', spec=chunk(
        placements='["rank:9/cpu"]'))),
}

# ---------------------------------------------------------------------------------------------
# safetensors files: 8-byte little-endian header length, header, data.


def safetensors(header, data=b"", length=None):
    if isinstance(header, str):
        header = header.encode("utf-8", "surrogateescape")
    if length is None:
        length = len(header)
    return struct.pack("<Q", length) + header + data


def entry(dtype='"F32"', shape="[2]", offsets="[0, 8]"):
    return '{"dtype": %s, "shape": %s, "data_offsets": %s}' % (dtype, shape, offsets)


def st_one(value, data=b"\0" * 8, name='"w"'):
    return safetensors('{%s: %s}' % (name, value), data)


SAFETENSORS = {
    "empty": b"",
    "seven_bytes": b"\x02\0\0\0\0\0\0",
    "zero_length_header": safetensors(""),
    "length_uint64_max": safetensors("{}", length=2**64 - 1),
    "length_above_limit": safetensors("{}", length=(100 << 20) + 1),
    "length_at_limit_truncated": safetensors("{}", length=100 << 20),
    "length_beyond_file": safetensors("{}", length=64),
    "length_inside_utf8": safetensors('{"\u00e9": 1}', length=4),
    "header_array": safetensors("[]"),
    "header_null": safetensors("null"),
    "header_number": safetensors("8"),
    "header_truncated": safetensors('{"w": {"dtype": "F32", '),
    "header_trailing_nul": safetensors("{}\0\0\0\0\0\0"),
    "header_trailing_garbage": safetensors("{} }"),
    "header_nul_hides_tensor": safetensors('{}\0{"w": %s}' % entry(), b"\0" * 8),
    "header_nan": st_one(entry(shape="[NaN]")),
    "header_comment": safetensors('/**/{}'),
    "duplicate_tensor": safetensors('{"w": %s, "w": %s}' % (entry(), entry(offsets="[8, 16]")),
                                    b"\0" * 16),
    "duplicate_field": st_one('{"dtype": "F32", "dtype": "F32", "shape": [2], '
                              '"data_offsets": [0, 8]}'),
    "duplicate_metadata": safetensors('{"__metadata__": {}, "__metadata__": {}}'),
    "unknown_field": st_one('{"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}'),
    "missing_offsets": st_one('{"dtype": "F32", "shape": [2]}'),
    "missing_dtype": st_one('{"shape": [2], "data_offsets": [0, 8]}'),
    "entry_not_object": st_one('"F32"'),
    "dtype_f8_unknown": st_one(entry(dtype='"F8_E3M4"', shape="[8]")),
    "dtype_f4_odd_bits": st_one(entry(dtype='"F4"', shape="[3]", offsets="[0, 2]"), b"\0\0"),
    "dtype_u128": st_one(entry(dtype='"U128"', shape="[1]")),
    "dtype_lowercase": st_one(entry(dtype='"f32"')),
    "dtype_number": st_one(entry(dtype="7")),
    "dtype_empty": st_one(entry(dtype='""')),
    "shape_negative": st_one(entry(shape="[-2]")),
    "shape_negative_pair": st_one(entry(shape="[-1, -8]")),
    "shape_float": st_one(entry(shape="[2.0]")),
    "shape_string": st_one(entry(shape='"2"')),
    "shape_null_dim": st_one(entry(shape="[null]")),
    "shape_overflow_elements": st_one(entry(shape="[4294967296, 4294967296]")),
    "shape_overflow_bytes": st_one(entry(shape="[4611686018427387904]")),
    "shape_uint64_max": st_one(entry(shape="[18446744073709551615]")),
    "shape_beyond_uint64": st_one(entry(shape="[1e999]")),
    "shape_65_dims": st_one(entry(shape="[%s]" % ", ".join(["1"] * 65))),
    "shape_zero_with_overflow": st_one(entry(shape="[4294967296, 4294967296, 0]", offsets="[0, 0]"),
                                       data=b""),
    "offsets_reversed": st_one(entry(offsets="[8, 0]")),
    "offsets_three": st_one(entry(offsets="[0, 4, 8]")),
    "offsets_negative": st_one(entry(offsets="[-8, 0]")),
    "offsets_float": st_one(entry(offsets="[0, 8.0]")),
    "offsets_uint64_max": st_one(entry(offsets="[18446744073709551615, 18446744073709551615]")),
    "offsets_wrap_around": st_one(entry(offsets="[18446744073709551612, 4]")),
    "offsets_past_data": st_one(entry(offsets="[0, 8]"), data=b"\0" * 4),
    "offsets_size_mismatch": st_one(entry(offsets="[0, 4]"), data=b"\0" * 4),
    "offsets_lie_huge": st_one(entry(shape="[268435456]", offsets="[0, 1073741824]")),
    "offsets_gap": safetensors('{"a": %s, "b": %s}' % (entry(), entry(offsets="[12, 20]")),
                               b"\0" * 20),
    "offsets_overlap": safetensors('{"a": %s, "b": %s}' % (entry(), entry(offsets="[4, 12]")),
                                   b"\0" * 12),
    "offsets_same_range": safetensors('{"a": %s, "b": %s}' % (entry(), entry()), b"\0" * 8),
    "data_trailing_bytes": st_one(entry(), data=b"\0" * 12),
    "data_truncated": st_one(entry(shape="[1024]", offsets="[0, 4096]"), data=b"\0" * 100),
    "metadata_not_object": safetensors('{"__metadata__": "x"}'),
    "metadata_number_value": safetensors('{"__metadata__": {"k": 1}}'),
    "metadata_nested": safetensors('{"__metadata__": {"k": {"a": "b"}}}'),
    "nesting_20": safetensors('{"__metadata__": {"k": %s}}' % ("[" * 20 + "]" * 20)),
    "invalid_utf8_name": st_one(entry(), name='"w\udcff"'),
    "invalid_utf8_metadata": safetensors('{"__metadata__": {"k": "\udcc3\x28"}}'),
    "lone_surrogate_name": st_one(entry(), name='"\\udc00"'),
}

# ---------------------------------------------------------------------------------------------
# index.json: a valid two-rank index, then one defect at a time.


def fingerprint(spec):
    return "sha256:" + hashlib.sha256(compact(spec).encode()).hexdigest()


def index_base():
    spec = {"dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu"], "type": "chunk", "version": 1}
    shards = [{"offsets": [0, 0], "sizes": [2, 2], "rank": 0, "file": "rank-00000.safetensors",
               "tensor": "w"},
              {"offsets": [2, 0], "sizes": [2, 2], "rank": 1, "file": "rank-00001.safetensors",
               "tensor": "w"}]
    rep_shards = [{"offsets": [0], "sizes": [3], "rank": r, "file": "rank-%05d.safetensors" % r,
                   "tensor": "b"} for r in (0, 1)]
    return {"format": "shardkit-shards", "version": 1, "world_size": 2, "src_rank": 0,
            "strategy": "scatter", "metadata": {"format": "pt"},
            "parameters": {
                "w": {"dtype": "F32", "shape": [4, 2], "spec": spec,
                      "fingerprint": fingerprint(spec), "shards": shards},
                "b": {"dtype": "F32", "shape": [3], "spec": "replicated",
                      "fingerprint": fingerprint("replicated"), "shards": rep_shards}}}


def index_with(change):
    index = index_base()
    change(index)
    return json.dumps(index)


def w(index):
    return index["parameters"]["w"]


def set_spec(index, spec):
    w(index)["spec"] = spec
    w(index)["fingerprint"] = fingerprint(spec)


def all_ranks_world(world):
    def change(index):
        index["world_size"] = world
        set_spec(index, {"dim": 0, "placements": {"ranks": "all"}, "type": "chunk", "version": 1})
    return change


def rename(index, name):
    index["parameters"][name] = index["parameters"].pop("w")


INDEX = {
    "empty": "",
    "array": "[]",
    "truncated": json.dumps(index_base())[:150],
    "format_wrong": index_with(lambda i: i.update(format="safetensors")),
    "version_2": index_with(lambda i: i.update(version=2)),
    "version_float": index_with(lambda i: i.update(version=1.0)),
    "world_size_zero": index_with(lambda i: i.update(world_size=0)),
    "world_size_negative": index_with(lambda i: i.update(world_size=-1)),
    "world_size_2pow31_plus_1": index_with(lambda i: i.update(world_size=2**31 + 1)),
    "world_size_1e9_replicated": index_with(lambda i: i.update(world_size=10**9)),
    "nul_then_garbage": json.dumps(index_base()) + "\0 garbage",
    "world_size_string": index_with(lambda i: i.update(world_size="2")),
    # A shorthand spec is never the bound form; expanding it for a hostile world size would
    # allocate one placement per rank.
    "shorthand_spec_world_2pow31": index_with(all_ranks_world(2**31)),
    "shorthand_spec_world_1e9": index_with(all_ranks_world(10**9)),
    "shorthand_spec_world_2": index_with(all_ranks_world(2)),
    "src_rank_outside": index_with(lambda i: i.update(src_rank=2)),
    "strategy_unknown": index_with(lambda i: i.update(strategy="gossip")),
    "metadata_number": index_with(lambda i: i["metadata"].update(k=1)),
    "metadata_array": index_with(lambda i: i.update(metadata=[])),
    "parameters_array": index_with(lambda i: i.update(parameters=[])),
    "parameter_hash_name": index_with(lambda i: rename(i, "w#1")),
    "parameter_unknown_key": index_with(lambda i: w(i).update(grad=True)),
    "dtype_u128": index_with(lambda i: w(i).update(dtype="U128")),
    "shape_negative": index_with(lambda i: w(i).update(shape=[-4, 2])),
    "shape_overflow": index_with(lambda i: w(i).update(shape=[2**32, 2**32])),
    "shape_mismatch": index_with(lambda i: w(i).update(shape=[5, 2])),
    "spec_not_canonical": index_with(lambda i: set_spec(
        i, {"dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu"], "type": "chunk"})),
    "spec_negative_dim": index_with(lambda i: set_spec(
        i, {"dim": -2, "placements": ["rank:0/cpu", "rank:1/cpu"], "type": "chunk", "version": 1})),
    "spec_rank_outside_world": index_with(lambda i: set_spec(
        i, {"dim": 0, "placements": ["rank:0/cpu", "rank:5/cpu"], "type": "chunk", "version": 1})),
    "spec_garbage": index_with(lambda i: w(i).update(spec={"type": "gossip"})),
    "fingerprint_wrong": index_with(lambda i: w(i).update(fingerprint="sha256:" + "0" * 64)),
    "fingerprint_missing": index_with(lambda i: w(i).pop("fingerprint")),
    "shards_missing_one": index_with(lambda i: w(i)["shards"].pop()),
    "shards_extra": index_with(lambda i: w(i)["shards"].append(dict(w(i)["shards"][0]))),
    "shard_offsets_wrong": index_with(lambda i: w(i)["shards"][1].update(offsets=[1, 0])),
    "shard_sizes_negative": index_with(lambda i: w(i)["shards"][1].update(sizes=[-2, 2])),
    "shard_rank_outside": index_with(lambda i: w(i)["shards"][1].update(rank=9)),
    "shard_rank_huge": index_with(lambda i: w(i)["shards"][1].update(rank=2**40)),
    "shard_file_traversal": index_with(
        lambda i: w(i)["shards"][1].update(file="../../etc/passwd")),
    "shard_file_absolute": index_with(lambda i: w(i)["shards"][1].update(file="/etc/passwd")),
    "shard_tensor_wrong": index_with(lambda i: w(i)["shards"][1].update(tensor="v")),
    "shard_unknown_key": index_with(lambda i: w(i)["shards"][1].update(bytes=0)),
    "replicated_missing_rank": index_with(lambda i: i["parameters"]["b"]["shards"].pop()),
    "duplicate_parameter": json.dumps(index_base())[:-2] + ', "w": {}}}',
    "metadata_nesting_80": json.dumps(index_base())[:-2] + "}, " + '"metadata2": ' +
    "[" * 80 + "]" * 80 + "}",
    "invalid_utf8_name": json.dumps(index_base()).replace('"w":', '"w\udcff":'),
}

# ---------------------------------------------------------------------------------------------
# Hugging Face indexes (CheckpointSource::Open), next to valid/model.safetensors' name.


def hf_index(weight_map='{"w": "model.safetensors"}', extra=''):
    return '{"metadata": {"total_size": 8}%s, "weight_map": %s}' % (extra, weight_map)


HF_INDEX = {
    "not_json": '{"weight_map": ',
    "array": '[{"weight_map": {}}]',
    "no_weight_map": '{"metadata": {"total_size": 8}}',
    "weight_map_array": hf_index('[["w", "model.safetensors"]]'),
    "weight_map_string": hf_index('"model.safetensors"'),
    "file_number": hf_index('{"w": 3}'),
    "file_null": hf_index('{"w": null}'),
    "file_empty": hf_index('{"w": ""}'),
    "file_absolute": hf_index('{"w": "/etc/passwd"}'),
    "file_parent": hf_index('{"w": "../valid/model.safetensors"}'),
    "file_parent_inside": hf_index('{"w": "a/../../valid/model.safetensors"}'),
    "duplicate_tensor": hf_index('{"w": "model.safetensors", "w": "model.safetensors"}'),
    "duplicate_weight_map": '{"weight_map": {}, "weight_map": {}}',
    "file_is_directory": hf_index('{"w": "."}'),
    "file_is_index": hf_index('{"w": "array.safetensors.index.json"}'),
}

VALID = {
    "spec.json": CHUNK,
    "plan.json": plan("[%s]" % rule(match='"a.*.weight"')),
    "index.json": json.dumps(index_base()),
    "model.safetensors": st_one(entry()),
    "model.safetensors.index.json": hf_index(),
}

# ---------------------------------------------------------------------------------------------
# Large inputs: generated at build time (genrule in testing/corpus/BUILD.bazel).


def large_files():
    big = {}
    many = ", ".join('"rank:%d/cpu"' % r for r in range(10**6))
    big["spec/placements_1e6.json"] = chunk(placements="[%s]" % many)
    overlapping = [shard("[%d, 0]" % (i % 8), "[1, 4]") for i in range(10**5)]
    big["spec/enumerable_1e5_overlapping.json"] = enumerable(overlapping)
    big["spec/nesting_1e5.json"] = chunk(dim="[" * 10**5 + "]" * 10**5)
    big["spec/number_1e6_digits.json"] = chunk(dim="9" * 10**6)
    big["spec/string_8mib.json"] = chunk(placements='["rank:0/%s"]' % ("c" * (8 << 20)))
    rules = [rule(match='"p%d.*"' % i) for i in range(10**5)] + [rule(spec=chunk(dim='"x"'))]
    big["spec/plan_rules_1e5.json"] = plan("[%s]" % ", ".join(rules))
    many_tensors = ", ".join('"t%d": %s' % (i, entry(shape="[0]", offsets="[0, 0]"))
                             for i in range(2 * 10**5))
    big["safetensors/tensors_2e5_lying_last.safetensors"] = safetensors(
        '{%s, "z": %s}' % (many_tensors, entry(offsets="[0, 8]")))
    big["safetensors/nesting_1e6.safetensors"] = safetensors(
        '{"__metadata__": {"k": %s}}' % ("[" * 10**6 + "]" * 10**6))
    big["safetensors/shape_1e6_dims.safetensors"] = st_one(
        entry(shape="[%s]" % ", ".join(["1"] * 10**6)))
    params = {}
    for i in range(3 * 10**4):
        p = dict(index_base()["parameters"]["b"])
        p["shards"] = [dict(s, tensor="p%d" % i) for s in p["shards"]]
        params["p%d" % i] = p
    index = index_base()
    index["parameters"] = params
    index["parameters"]["z"] = dict(params["p0"], dtype="U128")
    big["index/parameters_3e4.json"] = json.dumps(index)
    return big


def write(path, content):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if isinstance(content, str):
        content = content.encode("utf-8", "surrogateescape")
    with open(path, "wb") as f:
        f.write(content)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--small", metavar="DIR", help="write the checked-in files under DIR")
    group.add_argument("--large", metavar="DIR", help="write the generated files under DIR")
    args = parser.parse_args()
    if args.small:
        for kind, files, ext in (("spec", SPECS, "json"), ("safetensors", SAFETENSORS,
                                                          "safetensors"), ("index", INDEX, "json"),
                                ("hf_index", HF_INDEX, "safetensors.index.json")):
            for name, content in files.items():
                write(os.path.join(args.small, kind, "%s.%s" % (name, ext)), content)
        for name, content in VALID.items():
            write(os.path.join(args.small, "valid", name), content)
    else:
        for name, content in large_files().items():
            write(os.path.join(args.large, name), content)


if __name__ == "__main__":
    main()
