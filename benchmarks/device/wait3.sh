#!/bin/bash
# Poll call: wait up to $1 seconds (default 240) or until the daemon is done, then send back the
# logs (one tarball) and the last progress lines.
end=$(( $(date +%s) + ${1:-240} ))
while [ $(date +%s) -lt $end ] && [ ! -f /tmp/logs/ALLDONE ]; do sleep 5; done
tail -n 12 /tmp/logs/progress.txt; tar czf $OUT/logs.tgz -C /tmp logs 2>/dev/null; ls -la $OUT
