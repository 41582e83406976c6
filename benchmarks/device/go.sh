#!/bin/bash
# Call that delivers the last vLLM 0.26 part: store it, then start daemon.sh in its own session
# so it outlives this call (it runs until the machine goes back).
bash /tmp/dev/bin/part.sh acc26 "$1"
setsid nohup bash /tmp/dev/bin/daemon.sh > /tmp/daemon.out 2>&1 < /dev/null &
sleep 1; echo "daemon started"; exit 0
