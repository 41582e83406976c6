#!/bin/bash
# First device call: copy case dirs, case lists, scripts and the kvplan snapshot to /tmp/dev and
# /tmp/cases (outside the repo copy, which later calls replace), then store 0.26 part 0.
rm -rf /tmp/dev && mkdir -p /tmp/dev /tmp/cases && cp -r .device/snap .device/cases_A.json .device/cases_B.json .device/cases_C.json .device/bin /tmp/dev/ \
  && cp -r .device/cases/A .device/cases/B .device/cases/C /tmp/cases/ && echo "staged $(ls /tmp/cases/A | wc -l) A, $(ls /tmp/cases/B | wc -l) B, $(ls /tmp/cases/C | wc -l) C cases"
bash /tmp/dev/bin/part.sh acc26 "$1"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
