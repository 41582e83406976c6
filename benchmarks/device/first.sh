#!/bin/bash
# First device call: copy the case dirs, case lists, scripts and the kvplan snapshot to /tmp/dev
# and /tmp/cases (outside the repo copy, which later calls may replace), then store part 0.
rm -rf /tmp/dev && mkdir -p /tmp/dev /tmp/cases && cp -r .device/snap .device/cases_A.json .device/cases_B.json .device/bin /tmp/dev/ \
  && cp -r .device/cases/A .device/cases/B /tmp/cases/ && echo "staged $(ls /tmp/cases/A | wc -l) A, $(ls /tmp/cases/B | wc -l) B cases"
bash /tmp/dev/bin/part.sh acc26 "$1"
nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv
