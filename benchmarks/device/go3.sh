#!/bin/bash
# Call that delivers the last vLLM 0.26 part: store it, then start daemon3.sh in its own session
# so it outlives this call.
bash /tmp/dev/bin/part.sh acc26 "$1"
setsid nohup bash /tmp/dev/bin/daemon3.sh > /tmp/daemon.out 2>&1 < /dev/null &
sleep 1; echo "daemon3 started"; exit 0
