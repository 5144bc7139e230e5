#!/usr/bin/env bash
# One-shot device run (H200): kernels checked and timed, then the 8B-shaped Llama through the
# Engine. Writes OUTDIR/results.json and OUTDIR/run.log; under 8 minutes by the per-step
# timeouts below. Never run yet: no GPU was lent when it was written.
#
#   python benchmarks/gpu/download_wheels.py          # here, once: fills .whl/ (ignored)
#   device run, carry [".whl"]:  bash benchmarks/gpu/run_device.sh "$OUT"
#   bash benchmarks/gpu/run_device.sh OUTDIR --tiny    # CPU dry run of the same flow: no
#       wheels (this environment has the packages), no kernel step, engine_8b --tiny on CPU
#
# Steps (each bounded; a step that fails or times out is recorded and the next one runs):
#   1. install the carried wheels into /tmp/site (no index, no deps), check their needs;
#   2. benchmarks/kernels_gpu.py: every Triton kernel vs its reference, timed (bf16), 90 s;
#   3. benchmarks/gpu/engine_8b.py: random weights generated on the GPU, then the random,
#      RAG and decode sections at page 16 and the waste figures at page 1, 330 s.
set -u -o pipefail
OUT=${1:?usage: run_device.sh OUTDIR [--tiny]}
TINY=${2:-}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
LOG="$OUT/run.log"
: >"$LOG"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
log() { echo "[run_device $(date +%T)] $*" | tee -a "$LOG"; }

if [ "$TINY" = --tiny ]; then
  export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
  ENGINE_ARGS=(--tiny --device cpu --model-dir "$OUT/model")
  KERNELS_RC=skipped
  log "tiny CPU dry run: wheels and kernels skipped"
else
export PYTHONPATH="$ROOT/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
ENGINE_ARGS=(--model-dir /tmp/llama8b-random --num-prompts 300)
log "install wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site "$ROOT"/.whl/*.whl >>"$LOG" 2>&1 || { log "wheel install failed"; exit 1; }
python3 - "$ROOT/.whl" >>"$LOG" 2>&1 <<'EOF'
# Each carried wheel's requirements, as seen by the device's interpreter (report only).
import importlib.metadata as md, pathlib, sys
from packaging.requirements import Requirement
for whl in sorted(pathlib.Path(sys.argv[1]).glob("*.whl")):
    dist = md.distribution(whl.name.split("-")[0])
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            have = md.version(req.name)
        except md.PackageNotFoundError:
            print(f"UNMET {dist.name}: {line} (absent)"); continue
        if not req.specifier.contains(have, prereleases=True):
            print(f"UNMET {dist.name}: {line} (have {have})")
print("requirements checked")
EOF
python3 -c "import torch, triton, transformers; print('torch', torch.__version__, 'cuda',
torch.version.cuda, 'triton', triton.__version__, 'transformers', transformers.__version__,
torch.cuda.get_device_name())" 2>&1 | tee -a "$LOG"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv >>"$LOG" 2>&1

log "kernels"
timeout 90 python3 "$ROOT/benchmarks/kernels_gpu.py" --dtypes bf16 >"$OUT/kernels.txt" \
  2>>"$LOG"
KERNELS_RC=$?
cat "$OUT/kernels.txt" >>"$LOG"
log "kernels rc=$KERNELS_RC"

fi

log "engine_8b"
timeout 330 python3 "$ROOT/benchmarks/gpu/engine_8b.py" --out "$OUT" "${ENGINE_ARGS[@]}" \
  >>"$LOG" 2>&1
ENGINE_RC=$?
log "engine_8b rc=$ENGINE_RC"

python3 - "$OUT" "$KERNELS_RC" "$ENGINE_RC" <<'EOF' 2>&1 | tee -a "$LOG"
# One JSON: the exit codes, the kernel table as printed, the engine sections.
import json, pathlib, sys
out, engine_rc = pathlib.Path(sys.argv[1]), int(sys.argv[3])
kernels_rc = None if sys.argv[2] == "skipped" else int(sys.argv[2])
kernels = out / "kernels.txt"
engine = out / "engine_8b.json"
result = {"kernels_rc": kernels_rc, "engine_rc": engine_rc,
          "timed_out": [n for n, rc in (("kernels", kernels_rc), ("engine", engine_rc))
                        if rc in (124, 137)],
          "kernels_table": kernels.read_text() if kernels.is_file() else None,
          "engine": json.loads(engine.read_text()) if engine.is_file() else None}
(out / "results.json").write_text(json.dumps(result, indent=2))
for name, sec in ((result["engine"] or {}).get("sections") or {}).items():
    r = sec.get("result") if sec["ok"] else sec["error"]
    if isinstance(r, dict):
        r = {k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}
    print(name, json.dumps(r)[:300])
print("wrote", out / "results.json")
EOF
rm -rf "$OUT/kernels.txt" "$OUT/engine_8b.json" "$OUT/model"  # results.json holds them
[[ "$KERNELS_RC" =~ ^(0|skipped)$ ]] && [ "$ENGINE_RC" = 0 ]
