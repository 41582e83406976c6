#!/bin/bash
# The one device runner (benchmarks/device/README.md). On the GPU machine, started once with
#   setsid bash .device/batch/runner.sh > /dev/null 2>&1 < /dev/null &
# from the project root of the device's copy of the tree (the batch is laid out by build.py). It copies
# the batch, the kvplan code and bench.sh to /tmp/dev and goes on from there, looping: every vLLM version whose parts are
# complete (/tmp/acc-<V>/COMPLETE) is installed into /tmp/site-<V>; the first case of queue.txt not yet
# run whose version is installed is started, in its own process group (killed whole afterwards):
#   kind start: `python -m kvplan.verify.child REQUEST` (vLLM in this process, dummy weights)
#   kind bench: `bench.sh MODEL_DIR NAME [bench flags] [serve flags]` (`kvplan verify --bench`: one OpenAI
#               server start, the whole grid; SIGINT at the case's timeout keeps the points finished)
# queue.txt is re-read before every case, so a later call can re-plan what is left (edit
# /tmp/dev/batch/queue.txt; a name already in /tmp/logs/done.txt is not run again).
# Logs: /tmp/logs/<case>.log; bench records: /tmp/logs/bench/<case>.tar.gz (record, server log, progress);
# progress lines (epoch seconds): /tmp/logs/progress.txt.
# It stops when every case has run (or when /tmp/dev/STOP exists).
# Every path is under $KVPLAN_DEVICE_TMP (default /tmp; the test runs it in a temporary folder); the batch is
# the folder this script sits in (build.py's --remote must be $KVPLAN_DEVICE_TMP/dev/batch).
set -u
T=${KVPLAN_DEVICE_TMP:-/tmp}; D=$T/dev; B=$D/batch; L=$T/logs; S=$(cd "$(dirname "$0")" && pwd)
mkdir -p $D $L/bench
if [ "$S" != "$B" ]; then  # first start: copy the batch and the code out of the working tree (a later call may
  # replace the tree's copy; bash reads a script as it runs), then run from the copy
  rm -rf $B $D/snap && cp -r "$S" $B && mkdir -p $D/snap/benchmarks/device && cp -r kvplan $D/snap/ && \
    cp $B/bench.sh $D/snap/benchmarks/device/ && exec bash $B/runner.sh  # bench.sh finds kvplan two folders up
  echo "runner: cannot copy the batch to $B" >&2; exit 1
fi
: >> $L/done.txt
log() { echo "$(date +%s) $*" >> $L/progress.txt; }
install() {  # install VERSION
  local v=$1 w=$T/w-$1 t0=$(date +%s)
  rm -rf $w && mkdir -p $w && cat $T/acc-$v/part_* | tar xf - -C $w && rm -rf $T/acc-$v/part_*
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $T/site-$v \
    $(ls $w/*.whl | grep -v '/vllm-') 2>&1 | grep -v WARNING
  python3 -m zipfile -e $w/vllm-*.whl $T/site-$v
  rm -rf $w
  # packages that add themselves through a .pth file (nvidia-cutlass-dsl's `cutlass` in 0.34.0) need the
  # folder processed as a site dir, which a PYTHONPATH entry is not
  printf 'import site\nsite.addsitedir("%s")\n' $T/site-$v > $T/site-$v/sitecustomize.py
  if PYTHONPATH=$T/site-$v VLLM_USE_FLASHINFER_SAMPLER=0 python3 -c "import torch, vllm; from vllm import LLM; print('vllm', vllm.__version__, 'torch', torch.__version__, 'import ok')"; then
    touch $T/site-$v.READY; log "install $v ok in $(( $(date +%s) - t0 )) s"
  else touch $T/site-$v.DEAD; log "install $v FAILED"; fi
}
field() { python3 -c "import json,sys; r=json.load(open('$B/requests.json'))[sys.argv[1]]; v=eval('r'+sys.argv[2]); print(v if isinstance(v,(str,int,float)) else json.dumps(v))" "$1" "$2"; }
lines() { python3 -c "import json,sys; [print(a) for a in json.load(open('$B/requests.json'))[sys.argv[1]][sys.argv[2]]]" "$1" "$2"; }
runcase() {  # runcase NAME
  local n=$1 v=$(field $1 "['vllm']") t=$(field $1 "['timeout']") k=$(field $1 "['kind']") t0=$(date +%s) cmd
  if [ "$k" = bench ]; then
    mapfile -t args < <(lines $n args)
    cmd=(env OUT=$L/bench GRID=$(field $n "['grid']") BENCH_TIMEOUT=$t bash $D/snap/benchmarks/device/bench.sh $B/$n $n "${args[@]}")
    t=$(( t + 60 ))  # bench.sh sends SIGINT at the case's timeout; this is the backstop
  else  # the engine in this process (no engine-core child), as every start record so far was made
    cmd=(env VLLM_ENABLE_V1_MULTIPROCESSING=0 python3 -m kvplan.verify.child "$(field $n "['request']")")
  fi
  log "start $n"
  ( cd $T && export PYTHONPATH=$T/site-$v:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 PYTHONUNBUFFERED=1 && \
    eval "$(python3 -c "import json,shlex; r=json.load(open('$B/requests.json'))['$n']; [print('export %s=%s' % (k, shlex.quote(str(x)))) for k,x in r['env'].items()]")" && \
    exec setsid timeout -k 10 $t "${cmd[@]}" < /dev/null ) > $L/$n.log 2>&1 &
  local pid=$!; wait $pid; local rc=$?  # exec: the subshell becomes the new group's leader, so $pid is its id
  kill -9 -- -$pid 2>/dev/null  # whatever the case left behind (a server, compile workers): its own group only
  echo $n >> $L/done.txt
  log "end $n rc=$rc wall=$(( $(date +%s) - t0 )) $(grep -m1 '^RESULT' $L/$n.log) $(ls $L/bench/$n.tar.gz 2>/dev/null)"
}
log "runner start"; nvidia-smi > $L/nvidia-smi.txt 2>&1
while [ ! -f $D/STOP ]; do
  for v in $(ls -d $T/acc-* 2>/dev/null | sed "s#$T/acc-##"); do
    if [ -f $T/acc-$v/COMPLETE ] && [ ! -f $T/site-$v.READY ] && [ ! -f $T/site-$v.DEAD ]; then install $v > $L/install-$v.log 2>&1; fi
  done
  next=""; pending=0
  while read -r n; do
    [ -z "$n" ] && continue; grep -qx "$n" $L/done.txt && continue
    v=$(field $n "['vllm']"); [ -f $T/site-$v.DEAD ] && { echo $n >> $L/done.txt; log "skip $n (vllm $v dead)"; continue; }
    pending=1; [ -f $T/site-$v.READY ] && { next=$n; break; }
  done < $B/queue.txt
  [ -n "$next" ] && { runcase $next; continue; }
  [ $pending = 0 ] && { log "queue empty"; break; }
  sleep 2
done
log "runner end"
