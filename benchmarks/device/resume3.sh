#!/bin/bash
# Re-plan while the daemon waits: stop daemon3.sh (its loop and its 0.33 installer, never a
# running case: call it only while it waits), forget the case it had picked but not run (arg 1),
# take the new order and scripts from the carried .device, start it again without reinstalling 0.26.
pkill -f daemon3.sh; sleep 1
[ -n "${1:-}" ] && grep -v -x -F "$1" /tmp/logs/done.txt > /tmp/logs/done.new && mv /tmp/logs/done.new /tmp/logs/done.txt
cp .device/bin/*.sh .device/bin/order3.txt /tmp/dev/bin/
echo "$(date +%s) resume3 (forgot ${1:-nothing})" >> /tmp/logs/progress.txt
RESUME=1 setsid nohup bash /tmp/dev/bin/daemon3.sh > /tmp/daemon.out 2>&1 < /dev/null &
sleep 1; echo resumed; tail -3 /tmp/logs/done.txt
