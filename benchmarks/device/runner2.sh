#!/bin/bash
# Re-plan used mid-session (device time ran short: DeepSeek-V3.2 hung >250 s, MiniMax took 211 s):
# stop daemon.sh and its running case (by PID), then run the named cases in this order:
# vLLM 0.33 cases first (no 0.33 start existed yet), two fast family cases in between.
set -u
D=/tmp/dev; L=/tmp/logs
log() { echo "$(date +%s) $*" >> $L/progress.txt; }
for p in $(ps -eo pid,args | awk '/[d]aemon\.sh/{print $1}') $(ps -eo pid,args | awk '/[k]vplan\.vllm_child/{print $1}'); do kill $p 2>/dev/null; done
sleep 3; log "runner2 took over (daemon stopped)"
pick() { python3 -c "import json,sys; [print(json.dumps(r)) for r in json.load(open(sys.argv[1])) if r['name']==sys.argv[2]]" $1 $2; }
runcase() {  # runcase SITE VERDIR JSONLINE
  local name=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['name'])" "$3")
  local req=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({k:v for k,v in d.items() if not k.startswith('_')}))" "$3")
  local t=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(420 if not d['engine_args'].get('enforce_eager') else 240)" "$3")
  local t0=$(date +%s); log "start $2 $name"
  ( cd /tmp && PYTHONPATH=$1:$D/snap VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0 PYTHONUNBUFFERED=1 \
      timeout -k 10 $t python3 -m kvplan.verify.child "$req" < /dev/null ) > $L/$2/$name.log 2>&1
  log "end $2 $name rc=$? wall=$(( $(date +%s) - t0 )) $(grep -m1 '^RESULT' $L/$2/$name.log)"
}
for n in $(cat $D/bin/order2.txt); do
  case $n in A:*) runcase /tmp/site26 v026 "$(pick $D/cases_A.json ${n#A:})";;
             B:*) runcase /tmp/site33 v033 "$(pick $D/cases_B.json ${n#B:})";; esac
done
log "runner2 ALL DONE"; touch $L/ALLDONE
