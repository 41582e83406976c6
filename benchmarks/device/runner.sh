#!/bin/bash
# The one device runner (benchmarks/device/README.md). On the GPU machine, started once with
#   setsid bash .device/batch/runner.sh > /dev/null 2>&1 < /dev/null &
# from the project root of the device's copy of the tree. It copies the batch and the kvplan code to
# /tmp/dev, then loops: every vLLM version whose parts are complete (/tmp/acc-<V>/COMPLETE) is
# installed into /tmp/site-<V>; the first case of queue.txt not yet run whose version is installed
# is started with `python -m kvplan.verify.child` (vLLM in this process, dummy weights). queue.txt is
# re-read before every case, so a later call can re-plan what is left (edit /tmp/dev/batch/queue.txt).
# Logs: /tmp/logs/<case>.log; progress lines (epoch seconds): /tmp/logs/progress.txt.
# It stops when every case has run (or when /tmp/dev/STOP exists).
set -u
D=/tmp/dev; B=$D/batch; L=/tmp/logs
mkdir -p $D $L; rm -rf $D/snap $B; cp -r .device/batch $B; mkdir -p $D/snap; cp -r kvplan $D/snap/
: >> $L/done.txt
log() { echo "$(date +%s) $*" >> $L/progress.txt; }
install() {  # install VERSION
  local v=$1 w=/tmp/w-$1 t0=$(date +%s)
  rm -rf $w && mkdir -p $w && cat /tmp/acc-$v/part_* | tar xf - -C $w && rm -rf /tmp/acc-$v/part_*
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site-$v \
    $(ls $w/*.whl | grep -v '/vllm-') 2>&1 | grep -v WARNING
  python3 -m zipfile -e $w/vllm-*.whl /tmp/site-$v
  rm -rf $w
  # packages that add themselves through a .pth file (nvidia-cutlass-dsl's `cutlass` in 0.34.0) need the
  # folder processed as a site dir, which a PYTHONPATH entry is not
  printf 'import site\nsite.addsitedir("/tmp/site-%s")\n' $v > /tmp/site-$v/sitecustomize.py
  if PYTHONPATH=/tmp/site-$v VLLM_USE_FLASHINFER_SAMPLER=0 python3 -c "import torch, vllm; from vllm import LLM; print('vllm', vllm.__version__, 'torch', torch.__version__, 'import ok')"; then
    touch /tmp/site-$v.READY; log "install $v ok in $(( $(date +%s) - t0 )) s"
  else touch /tmp/site-$v.DEAD; log "install $v FAILED"; fi
}
field() { python3 -c "import json,sys; r=json.load(open('$B/requests.json'))[sys.argv[1]]; v=eval('r'+sys.argv[2]); print(v if isinstance(v,(str,int,float)) else json.dumps(v))" "$1" "$2"; }
runcase() {  # runcase NAME
  local n=$1 v=$(field $1 "['vllm']") t=$(field $1 "['timeout']") t0=$(date +%s)
  log "start $n"
  ( cd /tmp && export PYTHONPATH=/tmp/site-$v:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1 && \
    eval "$(python3 -c "import json,shlex; r=json.load(open('$B/requests.json'))['$n']; [print('export %s=%s' % (k, shlex.quote(str(x)))) for k,x in r['env'].items()]")" && \
    timeout -k 10 $t python3 -m kvplan.verify.child "$(field $n "['request']")" < /dev/null ) > $L/$n.log 2>&1
  local rc=$?
  echo $n >> $L/done.txt
  log "end $n rc=$rc wall=$(( $(date +%s) - t0 )) $(grep -m1 '^RESULT' $L/$n.log)"
}
log "runner start"; nvidia-smi > $L/nvidia-smi.txt 2>&1
while [ ! -f $D/STOP ]; do
  for v in $(ls -d /tmp/acc-* 2>/dev/null | sed 's#/tmp/acc-##'); do
    if [ -f /tmp/acc-$v/COMPLETE ] && [ ! -f /tmp/site-$v.READY ] && [ ! -f /tmp/site-$v.DEAD ]; then install $v > $L/install-$v.log 2>&1; fi
  done
  next=""; pending=0
  while read -r n; do
    [ -z "$n" ] && continue; grep -qx "$n" $L/done.txt && continue
    v=$(field $n "['vllm']"); [ -f /tmp/site-$v.DEAD ] && { echo $n >> $L/done.txt; log "skip $n (vllm $v dead)"; continue; }
    pending=1; [ -f /tmp/site-$v.READY ] && { next=$n; break; }
  done < $B/queue.txt
  [ -n "$next" ] && { runcase $next; continue; }
  [ $pending = 0 ] && { log "queue empty"; break; }
  sleep 2
done
log "runner end"
