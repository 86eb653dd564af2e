#!/usr/bin/env bash
# The first device call of the next session (carry [".devdeps"]). The twenty-first session ran
# the previous next_check.sh (the direct stem conv correct, and 10% faster at ResNet-50 b64:
# BRRR_CONV_DIRECT is now 1 by default), then got no second device start. Before running this, take the direct
# kernel's cp.async weight copy back in: `git cherry-pick conv-direct-cp-async` (written in that
# session, not yet run on a GPU). Then:
#   1. the direct kernel's and the NHWC tests (TESTS: a gtest filter), with the new default;
#   2. ResNet-50 bf16 `brrr bench` at b1 and b64 with BRRR_CONV_DIRECT 0 and 2, interleaved (2
#      with the old weight copy, H100: b1 307-308 us, b64 2.073-2.087 ms; 0: 310 us, 2.33 ms),
#      then the doctor on ResNet-50 bf16 b1 with BRRR_CONV_DIRECT 0 and 1 (the stem's kernels)
#      and the stem's plan line at b1 and b64;
#   3. Nsight Compute on the direct kernel at b1 and b64;
#   4. BERT-base bf16 b32 with BRRR_GEMM_TUNE 0 and 1 (`brrr bench`, 2 interleaved rounds) and
#      the doctor with 1: does the tuned FFN up-projection still launch a memset?
#   5. GPT-2 b16 `brrr run --reps 10` with BRRR_GEMM_PAD_OUT 0 and 1, in the order 0 1 0 1
#      (the previous next_check.sh ran 1 0 1 0 and every run was faster than the one before);
#   6. scripts/gpu_tools/persist_micro.sh: what a persistent kernel's weight streaming, grid
#      barrier and readiness flags cost on this GPU (deliverable 4, before writing one);
#   7. (in the background from the start, while brrr builds) scripts/gpu_tools/wgmma_micro.sh:
#      a warp-specialized TMA + wgmma GEMM against cuBLASLt on BERT b32's layer GEMMs (its tiles
#      of 128 x 192 are one wave where cuBLASLt's leave SMs idle), printed after part 1;
#   8. what is left of the call: scripts/gpu_models.sh on BERT-base and ResNet-50 bf16 against
#      torch.compile(mode="reduce-overhead"), with a BRRR_GEMM_TUNE=1 variant.
# Each part after 1 is skipped past DEADLINE (s, default 470) with a line saying so.
export OUT=${OUT:-/tmp/o}; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
late() { [ "$(el)" -ge "${DEADLINE:-470}" ] && echo "== skipped from here at $(el) s: $1" && exit 0; return 0; }
S=/tmp/brrr_suite
(python3 scripts/models/export.py --out $S --models bert_base,gpt2,resnet50 --dtypes bf16 --exporters torchscript \
  --no-verify --threads 8 >"$OUT/export.log" 2>&1) &
(LIMIT=150 bash scripts/gpu_tools/wgmma_micro.sh >"$OUT/wgmma.log" 2>&1; echo "wgmma done at $(el) s" >>"$OUT/wgmma.log") &
TARGETS="brrr_cli brrr_tests" source scripts/gpu_build.sh || exit 1
echo "== built at $(el) s"
timeout 150 $B/tests/brrr_tests --gtest_filter="${TESTS:-CudaNhwc.*:CudaConvDirect.*:CudaPool.*:CudaSession.*}" \
  >"$OUT/tests.log" 2>&1
echo "tests rc $? at $(el) s: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/tests.log" | tr '\n' ' ')"
grep -E '^\[  FAILED|Failure|Expected|Which is' "$OUT/tests.log" | head -20
wait
echo "== wgmma_micro"; grep -vE '^ptxas info|^\s*$' "$OUT/wgmma.log" | tail -60
export XDG_CACHE_HOME=/tmp/brrr_xdg_21
G=$S/gpt2_bf16_torchscript/model.onnx M=$S/bert_base_bf16_torchscript/model.onnx
R=$S/resnet50_bf16_torchscript/model.onnx
line() { tr '\n' ' ' | cut -c1-"${1:-170}"; echo; }
echo "direct kernel $(BRRR_CONV_DIRECT=2 BRRR_DEBUG=1 timeout 60 $B/brrr bench $R --backend cuda --iterations 5 2>&1 |
  grep -o 'conv on brrr.s direct kernel.*' | cut -c1-250)"
for b in 1 64; do
  for v in 0 2 0 2; do
    echo -n "resnet50 bf16 b$b BRRR_CONV_DIRECT=$v: "
    BRRR_CONV_DIRECT=$v timeout 90 $B/brrr bench $R --backend cuda --iterations 200 \
      --shape pixel_values:${b}x3x224x224 2>&1 | grep -E '^latency' | line
  done
done
late "the ResNet-50 doctor"
for v in 0 1; do
  echo "== resnet50 b1 doctor BRRR_CONV_DIRECT=$v"
  BRRR_CONV_DIRECT=$v timeout 60 $B/brrr doctor $R --backend cuda --reps 20 --top 60 >"$OUT/doctor_r50_$v.txt" 2>&1
  grep -E '^wall|^idle' "$OUT/doctor_r50_$v.txt" | cut -c1-300
  grep -E 'k[0-3]_' "$OUT/doctor_r50_$v.txt" | head -6 | cut -c1-200
done
for b in 1 64; do
  echo -n "stem plan b$b: "
  BRRR_DEBUG=1 timeout 60 $B/brrr bench $R --backend cuda --iterations 5 --shape pixel_values:${b}x3x224x224 2>&1 |
    grep -E 'k0_conv' | grep -v library | head -1 | cut -c1-400
done
late "Nsight Compute on the direct kernel"
for b in 1 64; do
  echo "== ncu, the direct kernel at b$b"
  BRRR_CONV_DIRECT=2 timeout 90 ncu --target-processes all --kernel-name regex:conv_direct --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
    $B/brrr run $R --backend cuda --shape pixel_values:${b}x3x224x224 --reps 1 >"$OUT/ncu_direct_b$b.txt" 2>&1
  grep -E 'Duration|Elapsed Cycles|SM Busy|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|Registers Per|Grid Size|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Stall|Block Limit' \
    "$OUT/ncu_direct_b$b.txt" | head -24
done
late "BERT b32 tuning"
for r in 1 2; do
  for t in 0 1; do
    echo -n "round $r bert b32 BRRR_GEMM_TUNE=$t: "
    BRRR_GEMM_TUNE=$t timeout 90 $B/brrr bench $M --backend cuda --iterations 200 --shape input_ids:32x128 2>&1 |
      grep -E '^latency' | line
  done
done
BRRR_GEMM_TUNE=1 timeout 120 $B/brrr doctor $M --backend cuda --shape input_ids:32x128 --top 12 >"$OUT/doctor_b32_tune.txt" 2>&1
grep -E '^wall|^idle' "$OUT/doctor_b32_tune.txt" | cut -c1-700
BRRR_GEMM_TUNE=1 BRRR_DEBUG=1 timeout 60 $B/brrr bench $M --backend cuda --iterations 5 --shape input_ids:32x128 2>&1 |
  grep -E 'k[0-9]+_matmul' | head -4 | cut -c1-330
late "run() A/B"
for c in 0 1 0 1; do
  echo "run() gpt2 b16 BRRR_GEMM_PAD_OUT=$c: $(BRRR_GEMM_PAD_OUT=$c timeout 60 $B/brrr run $G --backend cuda \
    --shape input_ids:16x128 --reps 10 2>&1 | grep -E '^time' | cut -c1-160)"
done
late "the persistent kernel's building blocks"
LIMIT=90 bash scripts/gpu_tools/persist_micro.sh 2>&1 | tail -40
late "the suite against torch.compile"
LEFT=$(( ${DEADLINE:-470} + 60 - $(el) ))
MODELS=bert_base,resnet50 DTYPES=bf16 EXPORTERS=torchscript TORCH_MODES=reduce-overhead ROUNDS=2 \
  VARIANTS="tune:BRRR_GEMM_TUNE=1" BUDGET_S=$LEFT SUITE=$S bash scripts/gpu_models.sh 2>&1 | tail -30
echo "== end at $(el) s"
