#!/bin/bash
# Mid-run update from the carried .device: a new kvplan snapshot, case lists and order (the
# running case keeps its code; the next case uses the new one). usage: bash upd3.sh [snap]
if [ "${1:-}" = snap ]; then rm -rf /tmp/dev/snap.new && cp -r .device/snap /tmp/dev/snap.new && rm -rf /tmp/dev/snap && mv /tmp/dev/snap.new /tmp/dev/snap && echo "snap $(cat /tmp/dev/snap/KVPLAN_COMMIT)"; fi
cp .device/cases_A.json .device/cases_B.json .device/cases_C.json /tmp/dev/ && cp -r .device/cases/C/. /tmp/cases/C/ 2>/dev/null
cp .device/bin/order3.txt /tmp/dev/bin/order3.txt && echo "order: $(grep -c . /tmp/dev/bin/order3.txt) lines"
