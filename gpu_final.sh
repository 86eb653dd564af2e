# scratch (not committed): the P0 checks on the device after the merges
set -u -o pipefail
OUT=${OUT:-/tmp/o}
FILTER='Cuda*:DoctorCuda*' REPEAT=10 FILTER2='Cuda*' REPEAT2=3 bash scripts/gpu_repeat.sh 2>&1 |
  grep -E "^==|run [0-9]+:|^\[ RUN|brrr segv|Failure|^brrr::cuda::Module|cuModuleLoadData \(" | head -70
B=/tmp/brrr_build
export XDG_CACHE_HOME=/tmp/brrr_xdg
P=/opt/deps; export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$(python3 -c "import nvidia.cudnn as m; print(list(m.__path__)[0])")/lib:${LD_LIBRARY_PATH:-}
echo "== examples on CUDA, --check (cold cubin cache, then warm)"
rm -rf /tmp/brrr_xdg
for m in mlp_tiny bert_tiny squeezenet1_1 mobilenet_v3_small; do
  for pass in cold warm; do
    n0=$(ls /tmp/brrr_xdg/brrr/cuda 2>/dev/null | wc -l)
    r=$(timeout 120 $B/brrr run examples/$m/model.onnx --backend cuda --data examples/$m/test_data_set_0 --check 2>&1 | tail -1)
    echo "$m $pass: $r; cubin cache files $n0 -> $(ls /tmp/brrr_xdg/brrr/cuda 2>/dev/null | wc -l)"
  done
done
echo "== BRRR_DUMP_DIR on CUDA"; rm -rf /tmp/dump; BRRR_DUMP_DIR=/tmp/dump $B/brrr run examples/bert_tiny/model.onnx --backend cuda >/dev/null 2>&1; ls /tmp/dump | head -5
echo "== BRRR_DISABLE_GRAPHS=1 / BRRR_DISABLE_GEMM_CHAIN=1 / bad value"
BRRR_DISABLE_GRAPHS=1 $B/brrr run examples/bert_tiny/model.onnx --backend cuda --data examples/bert_tiny/test_data_set_0 --check 2>&1 | tail -1
BRRR_DISABLE_GEMM_CHAIN=1 $B/brrr run examples/mlp_tiny/model.onnx --backend cuda --data examples/mlp_tiny/test_data_set_0 --check 2>&1 | tail -1
BRRR_DISABLE_GRAPHS=yes $B/brrr run examples/mlp_tiny/model.onnx --backend cuda 2>&1 | tail -1
echo "== DoctorCuda alone, cold cache"
for i in 1 2 3; do rm -rf /tmp/brrr_xdg; timeout 120 $B/tests/brrr_tests --gtest_filter='DoctorCuda*' > /tmp/dc_$i.log 2>&1; echo "DoctorCuda alone $i: rc $? last $(grep '^\[ RUN' /tmp/dc_$i.log | tail -1)"; done
for i in 1 2; do rm -rf /tmp/brrr_xdg; CUDA_MODULE_LOADING=EAGER timeout 120 $B/tests/brrr_tests --gtest_filter='DoctorCuda*' > /tmp/dce_$i.log 2>&1; echo "DoctorCuda alone EAGER $i: rc $? last $(grep '^\[ RUN' /tmp/dce_$i.log | tail -1)"; done
