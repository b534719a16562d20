#!/usr/bin/env bash
# The layering check (tools/check_layering.py): passes on the repository's own sources, and fails
# on a tree with deliberately bad includes, naming each one; test files may include anything.
set -euo pipefail
ws="$TEST_SRCDIR/shardkit"
check="$ws/tools/check_layering.py"
fail() { echo "FAIL: $*" >&2; exit 1; }

# 1. The real tree (every package's :layering_sources).
cd "$ws"
mapfile -t files < <(find -L core specs backends integration testing -name '*.h' -o -name '*.cc' | sort)
[ "${#files[@]}" -ge 150 ] || fail "only ${#files[@]} source files in the runfiles"
for folder in core/base core/tensor core/json core/os core/store core/comm core/engine specs \
              backends/socket_mesh backends/gloo integration/cli integration/checkpoint \
              integration/report integration/formats testing; do
  [[ " ${files[*]} " == *" $folder/"* ]] || fail "no files of $folder were checked"
done
python3 "$check" "${files[@]}" || fail "the repository's own sources break the layering"

# 2. A tree with one bad include per rule, and test files that may break them.
tree="$TEST_TMPDIR/tree"
write() { mkdir -p "$(dirname "$tree/$1")"; printf '#include "%s"\n' "$2" > "$tree/$1"; }
write specs/bad_engine.h core/engine/module.h
write specs/bad_tensor.cc core/tensor/tensor.h
write specs/good.cc core/tensor/shape.h
write core/comm/bad_backend.cc backends/gloo/gloo_communicator.h
write core/tensor/bad_integration.h integration/formats/output_file/output_file.h
write core/os/bad_store.cc core/store/store.h
write core/os/good.cc core/base/status_macros.h
write core/base/bad_os.h core/os/fd.h
write core/store/good_os.cc core/os/socket.h
write core/store/bad_comm.cc core/comm/communicator.h
write backends/gloo/bad_engine.cc core/engine/shard_parameter.h
write backends/gloo/engine_test.cc core/engine/shard_parameter.h
write integration/cli/bad_backend.cc backends/gloo/gloo_communicator.h
write integration/bench/shard_bench.cc backends/gloo/gloo_communicator.h
write specs/fuzz/bad_fuzzer.cc core/engine/module.h
write specs/plan_test.cc core/engine/module.h
write core/engine/good.cc specs/plan.h
write integration/formats/shard_dir/bad_checkpoint.cc integration/checkpoint/stream/stream_shard.h
write integration/formats/hf/bad_cli.h integration/cli/flags.h
write integration/formats/safetensors/bad_comm.cc core/comm/communicator.h
write integration/formats/hf/bad_backend.cc backends/gloo/gloo_communicator.h
write integration/formats/shard_dir/good.cc core/os/files.h
write integration/formats/shard_dir/index_test.cc integration/checkpoint/shard_checkpoint.h
write integration/checkpoint/stream/bad_cli.cc integration/cli/flags.h
write integration/checkpoint/good.cc integration/formats/shard_dir/shard_dir.h
write integration/cli/good.cc integration/checkpoint/inspect.h
write integration/report/bad_cli.cc integration/cli/flags.h
write integration/report/good.cc integration/checkpoint/inspect.h
write specs/bad_integration.h integration/formats/shard_dir/shard_dir.h
write testing/bad_integration.cc integration/checkpoint/save_shards.h
write backends/gloo/bad_integration.cc integration/formats/safetensors/safetensors.h
write integration/torch/bad_cli.cc integration/cli/flags.h
write integration/torch/good_flags.cc integration/flags/flags.h
write integration/examples/bad_cli.cc integration/cli/commands.h
write integration/flags/bad_checkpoint.h integration/checkpoint/save_shards.h
write integration/formats/hf/bad_dcp.cc integration/formats/dcp/metadata.h
write integration/formats/shard_dir/bad_hf.h integration/formats/hf/hf_output.h
write integration/formats/hf/good_container.cc integration/formats/safetensors/safetensors.h
write integration/formats/dcp/good_output_file.cc integration/formats/output_file/output_file.h
write integration/formats/dcp/good_pickle.cc integration/formats/pickle/pickle_reader.h
write integration/formats/torch_zip/good_pickle.cc integration/formats/pickle/pickle_reader.h
write integration/formats/pickle/bad_dcp.h integration/formats/dcp/metadata.h
set +e
out=$(python3 "$check" --root "$tree" 2>/dev/null)
rc=$?
set -e
[ $rc -eq 1 ] || fail "exit $rc on the bad tree, expected 1"
expected='backends/gloo/bad_engine.cc:1: includes "core/engine/shard_parameter.h": backends must not include the engine, the CLI or test helpers
backends/gloo/bad_integration.cc:1: includes "integration/formats/safetensors/safetensors.h": backends must not include the engine, the CLI or test helpers
core/base/bad_os.h:1: includes "core/os/fd.h": core/base includes nothing else of shardkit
core/comm/bad_backend.cc:1: includes "backends/gloo/gloo_communicator.h": core/comm builds on core/base, core/os, core/tensor and core/store only
core/os/bad_store.cc:1: includes "core/store/store.h": core/os builds on core/base only
core/store/bad_comm.cc:1: includes "core/comm/communicator.h": core/store builds on core/base and core/os only
core/tensor/bad_integration.h:1: includes "integration/formats/output_file/output_file.h": core/tensor builds on core/base only
integration/bench/shard_bench.cc:1: includes "backends/gloo/gloo_communicator.h": programs reach backends through //backends:all only
integration/checkpoint/stream/bad_cli.cc:1: includes "integration/cli/flags.h": the checkpoint library never includes the CLI (the CLI prints what it returns)
integration/cli/bad_backend.cc:1: includes "backends/gloo/gloo_communicator.h": programs reach backends through //backends:all only
integration/examples/bad_cli.cc:1: includes "integration/cli/commands.h": the examples parse flags with integration/flags, never the CLI
integration/flags/bad_checkpoint.h:1: includes "integration/checkpoint/save_shards.h": the flag library builds on core/base only: every program may use it
integration/formats/hf/bad_backend.cc:1: includes "backends/gloo/gloo_communicator.h": programs reach backends through //backends:all only
integration/formats/hf/bad_cli.h:1: includes "integration/cli/flags.h": formats are bytes on disk: no Communicator, nothing of integration/checkpoint or cli
integration/formats/hf/bad_dcp.cc:1: includes "integration/formats/dcp/metadata.h": a format includes no other format (formats/hf -> formats/dcp)
integration/formats/pickle/bad_dcp.h:1: includes "integration/formats/dcp/metadata.h": a container includes no format (formats/pickle -> formats/dcp)
integration/formats/safetensors/bad_comm.cc:1: includes "core/comm/communicator.h": formats are bytes on disk: no Communicator, nothing of integration/checkpoint or cli
integration/formats/shard_dir/bad_checkpoint.cc:1: includes "integration/checkpoint/stream/stream_shard.h": formats are bytes on disk: no Communicator, nothing of integration/checkpoint or cli
integration/formats/shard_dir/bad_hf.h:1: includes "integration/formats/hf/hf_output.h": a format includes no other format (formats/shard_dir -> formats/hf)
integration/report/bad_cli.cc:1: includes "integration/cli/flags.h": report text serves the CLI and Python alike: it never includes the CLI
integration/torch/bad_cli.cc:1: includes "integration/cli/flags.h": the LibTorch adapter programs parse flags with integration/flags, never the CLI
specs/bad_engine.h:1: includes "core/engine/module.h": specs may include core/base, core/json and core/tensor/{shape,dtype,device}.h only
specs/bad_integration.h:1: includes "integration/formats/shard_dir/shard_dir.h": specs may include core/base, core/json and core/tensor/{shape,dtype,device}.h only
specs/bad_tensor.cc:1: includes "core/tensor/tensor.h": specs may include core/base, core/json and core/tensor/{shape,dtype,device}.h only
specs/fuzz/bad_fuzzer.cc:1: includes "core/engine/module.h": specs may include core/base, core/json and core/tensor/{shape,dtype,device}.h only
testing/bad_integration.cc:1: includes "integration/checkpoint/save_shards.h": test helpers must not include backends or the CLI'
[ "$out" = "$expected" ] || fail "unexpected report:
$out"
echo "layering_test: ${#files[@]} files clean; the bad tree gave the 26 expected violations"
