#!/bin/bash
# On the GPU machine, started once (setsid) by the call that delivers the last vLLM 0.26 part
# (go3.sh). Installs 0.26.0 into /tmp/site26; a background job waits for the 53 vLLM 0.33.0 parts
# (/tmp/acc33/COMPLETE) and installs them into /tmp/site33. Then works through
# /tmp/dev/bin/order3.txt, re-read before every case so a later call can re-plan what is left:
#   A:name  0.26.0 memory start of .device/cases_A.json's case  (python -m kvplan.verify.child)
#   B:name  0.33.0 memory start of cases_B.json's case          (waits for /tmp/site33.READY)
#   C:name  0.26.0 benchmark run of cases_C.json's case         (python -m kvplan verify --bench)
# Each case's stdout+stderr go to /tmp/logs/<v026|v033>/<name>.log (bench: bench/<name>.out), records to
# /tmp/logs/bench/<name>.json; progress lines (epoch seconds) to /tmp/logs/progress.txt.
# The kvplan code used is /tmp/dev/snap, replaceable between cases (upd3.sh).
set -u
D=/tmp/dev; L=/tmp/logs; mkdir -p $L/v026 $L/v033 $L/bench; : >> $L/done.txt
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
pick() { python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1])) if r['name']==sys.argv[2]]" $1 $2; }
field() { python3 -c "import json,sys; d=json.loads(sys.argv[1]); v=d$2; print(v if not isinstance(v,(list,dict)) else json.dumps(v))" "$1"; }
runcase() {  # runcase SITE VERDIR JSONLINE
  local name=$(field "$3" "['name']")
  local req=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({k:v for k,v in d.items() if not k.startswith('_')}))" "$3")
  local t=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(420 if not d['engine_args'].get('enforce_eager') else 240)" "$3")
  local t0=$(date +%s); log "start $2 $name"
  ( cd /tmp && PYTHONPATH=$1:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1 \
      timeout -k 10 $t python3 -m kvplan.verify.child "$req" < /dev/null ) > $L/$2/$name.log 2>&1
  log "end $2 $name rc=$? wall=$(( $(date +%s) - t0 )) $(grep -m1 '^RESULT' $L/$2/$name.log)"
}
runbench() {  # runbench JSONLINE: {"name", "argv": [...kvplan args...], "env": {...}, "timeout": s}
  local name=$(field "$1" "['name']") t=$(field "$1" ".get('timeout', 540)")
  local t0=$(date +%s); log "start bench $name"
  ( cd /tmp && export PYTHONPATH=/tmp/site26:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 && \
    eval "$(python3 -c "import json,sys,shlex; d=json.loads(sys.argv[1]); [print('export %s=%s' % (k, shlex.quote(str(v)))) for k,v in d.get('env',{}).items()]" "$1")" && \
    timeout -s INT -k 30 $t python3 -m kvplan $(python3 -c "import json,sys,shlex; print(' '.join(shlex.quote(a) for a in json.loads(sys.argv[1])['argv']))" "$1") < /dev/null ) > $L/bench/$name.out 2>&1
  local rc=$?
  pkill -f vllm.entrypoints 2>/dev/null; sleep 2; pkill -9 -f vllm.entrypoints 2>/dev/null
  log "end bench $name rc=$rc wall=$(( $(date +%s) - t0 )) $(ls -s $L/bench/$name.json 2>/dev/null)"
}

log "daemon3 start"
nvidia-smi > $L/nvidia-smi.txt 2>&1
if [ -z "${RESUME:-}" ]; then  # RESUME=1 (resume3.sh): 0.26 is installed already
  install /tmp/acc26 /tmp/site26 v026 > $L/install26.log 2>&1
  check /tmp/site26 >> $L/install26.log 2>&1; log "check26 rc=$?"
fi
(
  while [ ! -f /tmp/acc33/COMPLETE ]; do sleep 2; done
  log "acc33 complete: $(ls /tmp/acc33/part_* | wc -l) parts"
  install /tmp/acc33 /tmp/site33 v033 > $L/install33.log 2>&1
  if check /tmp/site33 >> $L/install33.log 2>&1; then log "check33 ok"; touch /tmp/site33.READY
  else log "check33 FAILED"; touch /tmp/site33.DEAD; fi
) &
while true; do
  next=$(grep -v -x -F -f $L/done.txt $D/bin/order3.txt 2>/dev/null | grep -v '^#' | grep -v '^$' | head -1)
  [ -z "$next" ] && break
  echo "$next" >> $L/done.txt
  case $next in
    A:*) runcase /tmp/site26 v026 "$(pick $D/cases_A.json ${next#A:})";;
    B:*) while [ ! -f /tmp/site33.READY ] && [ ! -f /tmp/site33.DEAD ]; do sleep 2; done
         [ -f /tmp/site33.READY ] && runcase /tmp/site33 v033 "$(pick $D/cases_B.json ${next#B:})";;
    C:*) runbench "$(pick $D/cases_C.json ${next#C:})";;
    STOP) break;;
  esac
done
log "daemon3 ALL DONE"; touch $L/ALLDONE
