#!/bin/bash
# One device call per staged part: copy the carried part into /tmp/ACC and send back the logs so
# far (so nothing is lost if the machine goes back). usage: bash part.sh ACC PARTPATH [N_EXPECTED]
# With N_EXPECTED, writes ACC/COMPLETE once that many parts are there.
mkdir -p /tmp/$1 && cp "$2" /tmp/$1/ && echo "$(ls /tmp/$1/part_* | wc -l) parts in /tmp/$1"
[ -n "${3:-}" ] && [ "$(ls /tmp/$1/part_* | wc -l)" -ge "$3" ] && touch /tmp/$1/COMPLETE && echo COMPLETE
[ -d /tmp/logs ] && tail -n 4 /tmp/logs/progress.txt && tar czf $OUT/logs.tgz -C /tmp logs 2>/dev/null
exit 0
