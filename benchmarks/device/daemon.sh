#!/bin/bash
# On the GPU machine, started once (setsid) by the call that delivers the last vLLM 0.26 part:
# installs 0.26.0 into /tmp/site26, runs the issue-12 family cases (cases_A.json), meanwhile a
# background job waits for all 53 vLLM 0.33.0 parts (/tmp/acc33/COMPLETE), installs them into
# /tmp/site33 (adding the cuda-extra wheels from /tmp/accx if torch 2.14 does not import), then
# the issue-13 cases (cases_B.json) run, then any family cases left over. Each case is its own
# `python -m kvplan.verify.child` process (kvplan snapshot in /tmp/dev/snap) under `timeout`; its
# stdout+stderr go to /tmp/logs/<ver>/<case>.log; progress lines to /tmp/logs/progress.txt.
# Differs from ../shared/device/device-install.sh only in taking the site/acc dirs as arguments
# and timing each step (two vLLM versions live side by side on one machine).
set -u
D=/tmp/dev; L=/tmp/logs; mkdir -p $L/v026 $L/v033
log() { echo "$(date +%s) $*" >> $L/progress.txt; }
install() {  # install ACC SITE TAG
  local acc=$1 site=$2 tag=$3 w=/tmp/w_$3 t0=$(date +%s)
  rm -rf $w && mkdir -p $w && cat $acc/part_* | tar xf - -C $w
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $site \
    $(ls $w/*.whl | grep -v '/vllm-') 2>&1 | grep -v WARNING
  [ -n "$(ls $w/vllm-*.whl 2>/dev/null)" ] && python3 -m zipfile -e $w/vllm-*.whl $site
  rm -rf $w
  log "install $tag done in $(( $(date +%s) - t0 )) s"
}
check() {  # check SITE
  PYTHONPATH=$1 VLLM_USE_FLASHINFER_SAMPLER=0 python3 -c "import torch, vllm; from vllm import LLM; import vllm.v1.engine.core; print('vllm', vllm.__version__, 'torch', torch.__version__, torch.version.cuda, 'import ok')"
}
runcase() {  # runcase SITE VERDIR JSONLINE TIMEOUT
  local name=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['name'])" "$3")
  local req=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({k:v for k,v in d.items() if not k.startswith('_')}))" "$3")
  local t0=$(date +%s)
  log "start $2 $name"
  ( cd /tmp && PYTHONPATH=$1:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1 \
      timeout -k 10 $4 python3 -m kvplan.verify.child "$req" < /dev/null ) > $L/$2/$name.log 2>&1
  local rc=$?
  log "end $2 $name rc=$rc wall=$(( $(date +%s) - t0 )) $(grep -m1 '^RESULT' $L/$2/$name.log)"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader >> $L/progress.txt 2>&1
}
lines() { python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1]))]" $1; }
tmo() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(420 if not d['engine_args'].get('enforce_eager') else 300)" "$1"; }

log "daemon start"
nvidia-smi > $L/nvidia-smi.txt 2>&1; python3 -m pip list 2>/dev/null | grep -iE "^(torch|nvidia|cuda|triton|transformers) " > $L/pip-image.txt
install /tmp/acc26 /tmp/site26 v026 > $L/install26.log 2>&1
check /tmp/site26 >> $L/install26.log 2>&1; log "check26 rc=$?"
# 0.33 installer in the background (CPU only; the GPU cases do not share anything with it)
(
  while [ ! -f /tmp/acc33/COMPLETE ]; do sleep 2; done
  log "acc33 complete: $(ls /tmp/acc33/part_* | wc -l) parts"
  install /tmp/acc33 /tmp/site33 v033 > $L/install33.log 2>&1
  if check /tmp/site33 >> $L/install33.log 2>&1; then log "check33 ok (no cuda-extra)"; touch /tmp/site33.READY
  else
    log "check33 FAILED; waiting for cuda-extra parts"; touch /tmp/site33.NEEDX
    while [ ! -f /tmp/accx/COMPLETE ]; do sleep 2; done
    install /tmp/accx /tmp/site33 v033x >> $L/install33.log 2>&1
    if check /tmp/site33 >> $L/install33.log 2>&1; then log "check33 ok with cuda-extra"; touch /tmp/site33.READY
    else log "check33 FAILED with cuda-extra"; touch /tmp/site33.DEAD; fi
  fi
) &
i=0; : > $L/leftA.txt
while IFS= read -r c; do
  i=$((i+1))
  if [ $i -gt 12 ] && [ -f /tmp/site33.READY ]; then echo "$c" >> $L/leftA.txt; continue; fi
  runcase /tmp/site26 v026 "$c" $(tmo "$c")
done < <(lines $D/cases_A.json)
log "A phase done"
while [ ! -f /tmp/site33.READY ] && [ ! -f /tmp/site33.DEAD ]; do sleep 2; done
if [ -f /tmp/site33.READY ]; then
  while IFS= read -r c; do runcase /tmp/site33 v033 "$c" $(tmo "$c"); done < <(lines $D/cases_B.json)
  log "B phase done"
fi
while IFS= read -r c; do [ -n "$c" ] && runcase /tmp/site26 v026 "$c" $(tmo "$c"); done < $L/leftA.txt
log "ALL DONE"; touch $L/ALLDONE
