"""Stand-in for kvplan.vllm_child in tests (selected with KVPLAN_VERIFY_CHILD=this file).

It never imports torch or vLLM. It prints the real child's KVPLAN_CASE and KVPLAN_CONFIG lines,
then replays canned log lines and exits, as the real child would:
  FAKE_LINES_DIR   directory with <case name>.lines (lines to print) and optionally
                   <case name>.exit (exit status, default 0) and <case name>.sleep (seconds to
                   sleep after printing, before exiting)
  FAKE_REQUEST_OUT if set, the request JSON is appended here (one line per start)
  FAKE_PIDFILE     if set, start a grandchild (sleeps) and write "<own pid> <grandchild pid>"
"""

import json
import os
import subprocess
import sys
import time

request = json.loads(sys.argv[1])
name = request.get("name") or "case"
out = os.environ.get("FAKE_REQUEST_OUT")
if out:
    with open(out, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(request) + "\n")
pidfile = os.environ.get("FAKE_PIDFILE")
if pidfile:
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(pidfile + ".tmp", "w", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {grandchild.pid}")
    os.replace(pidfile + ".tmp", pidfile)
# the real child's first two protocol lines
print("KVPLAN_CASE " + json.dumps({k: request.get(k) for k in ("name", "model", "engine_args", "usage")}), flush=True)
config_path = os.path.join(request.get("model") or "", "config.json")
if os.path.isfile(config_path):
    with open(config_path, encoding="utf-8") as fh:
        print("KVPLAN_CONFIG " + json.dumps(json.load(fh)), flush=True)
base = os.path.join(os.environ["FAKE_LINES_DIR"], name)
with open(base + ".lines", encoding="utf-8") as fh:
    for line in fh.read().splitlines():
        print(line, flush=True)
if os.path.exists(base + ".sleep"):
    with open(base + ".sleep", encoding="utf-8") as fh:
        time.sleep(float(fh.read().strip()))
code = 0
if os.path.exists(base + ".exit"):
    with open(base + ".exit", encoding="utf-8") as fh:
        code = int(fh.read().strip())
sys.exit(code)
