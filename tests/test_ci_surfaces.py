"""The CI surfaces (issue 22 item 3): the composite action (action.yml), the workflow docs/ci.md
gives for it, and the pre-commit hooks. Each `run:` step of the action is run here as GitHub runs
it (``bash --noprofile --norc -eo pipefail``, inputs in the step's ``env``) against a temporary
repository; the install step with a stand-in Python (installing for real needs the network)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
KVPLAN = Path(sys.executable).with_name("kvplan")  # the test environment's console script
DATA = ROOT / "tests" / "data" / "check"

PASS = (DATA / "pass" / "chat-llama8b.yaml").read_text(encoding="utf-8")
FAIL = (DATA / "fail" / "llama70b-long-context.yaml").read_text(encoding="utf-8")
# a config that passes but for one warning (a `kvplan:` block in a file vLLM loads)
WARN = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\nkvplan:\n  gpu: H100\n"


def _step(step_id_or_name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if step_id_or_name in (s.get("id"), s.get("name")))


def _expand(value: str, inputs: dict, action_path: Path) -> str:
    """A step env value with its ${{ inputs.X }} / ${{ github.action_path }} filled as GitHub would."""
    def one(m: re.Match) -> str:
        expr = m.group(1).strip()
        if expr == "github.action_path":
            return str(action_path)
        name = expr.removeprefix("inputs.")
        return str(inputs.get(name, ACTION["inputs"][name].get("default", "")))

    return re.sub(r"\$\{\{(.*?)\}\}", one, value)


def _run_step(step: dict, inputs: dict, cwd: Path, runner_temp: Path, extra_env: dict | None = None):
    out_file = runner_temp / "github_output"
    env = {"PATH": os.environ["PATH"], "HOME": str(runner_temp), "RUNNER_TEMP": str(runner_temp),
           "GITHUB_OUTPUT": str(out_file), "HF_HUB_OFFLINE": "1"}
    env |= {k: _expand(str(v), inputs, ROOT) for k, v in (step.get("env") or {}).items()}
    env |= extra_env or {}
    script = runner_temp / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    outputs = dict(line.split("=", 1) for line in out_file.read_text().splitlines()) if out_file.exists() else {}
    return proc, outputs


@pytest.fixture
def repo(tmp_path):
    """A repository with three deployment files, and a RUNNER_TEMP where the install step's
    virtual environment would be (its kvplan: this test environment's)."""
    work = tmp_path / "repo"
    (work / "deploy").mkdir(parents=True)
    (work / ".git").mkdir()
    (work / "deploy" / "chat.yaml").write_text(PASS, encoding="utf-8")
    (work / "deploy" / "long.yaml").write_text(FAIL, encoding="utf-8")
    (work / "warn.yaml").write_text(WARN, encoding="utf-8")
    runner = tmp_path / "runner"
    (runner / "kvplan-venv" / "bin").mkdir(parents=True)
    (runner / "kvplan-venv" / "bin" / "kvplan").symlink_to(KVPLAN)
    return work, runner


def test_the_action_is_composite_and_reads_inputs_only_through_env():
    assert ACTION["runs"]["using"] == "composite"
    assert {"paths", "strict", "format", "output-file", "gpu", "vllm-version", "junit-xml", "offline"} <= set(ACTION["inputs"])
    assert ACTION["inputs"]["paths"]["required"] is True
    for step in ACTION["runs"]["steps"]:
        assert step["shell"] == "bash"
        # an input pasted into the script would run as shell code (`paths: x; curl ...`)
        assert "${{" not in step["run"], step["name"]
        for value in (step.get("env") or {}).values():
            for name in re.findall(r"inputs\.([\w-]+)", str(value)):
                assert name in ACTION["inputs"], name


def test_the_install_step_installs_the_action_checkout(tmp_path):
    # a stand-in interpreter: `-m venv DIR` makes DIR/bin/{python,kvplan}; `-m pip ...` is logged
    log = tmp_path / "calls.log"
    fake = tmp_path / "fake-python"
    fake.write_text(
        "#!/bin/bash\n"
        f"echo \"$*\" >> {log}\n"
        "if [ \"$1 $2\" = '-m venv' ]; then mkdir -p \"$3/bin\"; cp \"$0\" \"$3/bin/python\";\n"
        "  printf '#!/bin/sh\\necho kvplan 0.1.0\\n' > \"$3/bin/kvplan\"; chmod +x \"$3/bin/kvplan\"; fi\n",
        encoding="utf-8",
    )
    fake.chmod(0o755)
    runner = tmp_path / "runner"
    runner.mkdir()
    proc, _ = _run_step(_step("Install kvplan"), {"python": str(fake)}, tmp_path, runner)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == f"-m venv {runner}/kvplan-venv"
    assert calls[1].startswith("-m pip install") and calls[1].endswith(str(ROOT))
    assert proc.stdout.strip() == "kvplan 0.1.0"


def test_a_failing_deployment_fails_the_step_with_annotations(repo):
    work, runner = repo
    proc, outputs = _run_step(_step("check"), {"paths": "deploy/*.yaml", "gpu": "H100"}, work, runner)
    assert proc.returncode == 1 and outputs["exit-code"] == "1"
    assert "::error file=deploy/long.yaml,line=3,title=kvplan max-model-len-fits::" in proc.stdout
    assert "file=deploy/chat.yaml" not in proc.stdout.replace("::notice file=deploy/chat.yaml", "")


def test_passing_files_pass_and_the_summary_is_written(repo):
    work, runner = repo
    summary = runner / "summary.md"
    proc, outputs = _run_step(_step("check"), {"paths": "deploy/chat.yaml\n", "gpu": "H100"}, work, runner,
                              {"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 0 and outputs["exit-code"] == "0", proc.stdout + proc.stderr
    assert summary.read_text(encoding="utf-8").startswith("## kvplan check passed (exit 0)")


def test_strict_fails_on_a_warning(repo):
    work, runner = repo
    proc, outputs = _run_step(_step("check"), {"paths": "warn.yaml"}, work, runner)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc, outputs = _run_step(_step("check"), {"paths": "warn.yaml", "strict": "true"}, work, runner)
    assert proc.returncode == 1 and outputs["exit-code"] == "1"


def test_sarif_to_a_file(repo):
    work, runner = repo
    proc, outputs = _run_step(_step("check"), {"paths": "deploy/long.yaml", "format": "sarif",
                                               "output-file": "kvplan.sarif", "junit-xml": "j.xml"}, work, runner)
    assert proc.returncode == 1 and outputs["exit-code"] == "1"
    log = json.loads((work / "kvplan.sarif").read_text(encoding="utf-8"))
    assert log["version"] == "2.1.0" and log["runs"][0]["invocations"][0]["exitCode"] == 1
    assert (work / "j.xml").read_text(encoding="utf-8").startswith("<?xml")


def test_a_glob_that_matches_nothing_is_exit_2(repo):
    work, runner = repo
    proc, outputs = _run_step(_step("check"), {"paths": "k8s/*.yaml deploy/chat.yaml"}, work, runner)
    assert proc.returncode == 2 and outputs["exit-code"] == "2"
    assert "::error title=kvplan check::paths: 'k8s/*.yaml' matches no file" in proc.stdout


def test_an_input_is_never_run_as_shell_code(repo):
    work, runner = repo
    proc, _ = _run_step(_step("check"), {"paths": "deploy/chat.yaml", "gpu": "H100; touch pwned"}, work, runner)
    assert not (work / "pwned").exists()
    assert proc.returncode == 2  # one unknown GPU profile named "H100; touch pwned"


def _docs_workflow() -> dict:
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "runs-on" in b)
    return yaml.safe_load(block)


def test_the_docs_workflow_uses_the_action_with_its_inputs():
    steps = _docs_workflow()["jobs"]["kvplan-check"]["steps"]
    uses = [s for s in steps if str(s.get("uses", "")).split("@")[0].endswith("/kvplan")]
    assert uses, "docs/ci.md's workflow does not use the action"
    for step in uses:
        assert set(step["with"]) <= set(ACTION["inputs"]), set(step["with"]) - set(ACTION["inputs"])
        assert "paths" in step["with"]
    assert any(s["with"].get("format") == "sarif" for s in uses)
    assert any(str(s.get("uses", "")).startswith("github/codeql-action/upload-sarif") for s in steps)


def test_the_pre_commit_hooks_run_kvplan_check_and_name_no_stale_version():
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert not re.search(r"\b\d+\.\d+\.\d+\b", text), "a hook text names a vLLM/kvplan version that goes stale"
    assert {h["id"] for h in HOOKS} == {"kvplan-check", "kvplan-check-strict"}
    for hook in HOOKS:
        assert hook["language"] == "python" and hook["entry"].split()[:2] == ["kvplan", "check"]


@pytest.mark.parametrize(("hook_id", "expected"), [("kvplan-check", 0), ("kvplan-check-strict", 1)])
def test_each_hook_entry_runs_as_pre_commit_runs_it(repo, hook_id, expected):
    # pre-commit runs `entry args... files...` in the repository
    work, _ = repo
    hook = next(h for h in HOOKS if h["id"] == hook_id)
    cmd = [str(KVPLAN), *hook["entry"].split()[1:], "--gpu", "H100", "warn.yaml"]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == expected, proc.stdout + proc.stderr


def test_the_action_installs_with_pip_from_its_checkout_not_an_index():
    run = _step("Install kvplan")["run"]
    assert '"$KVPLAN_SOURCE"' in run and _step("Install kvplan")["env"]["KVPLAN_SOURCE"] == "${{ github.action_path }}"
    assert shutil.which("bash")


def test_empty_paths_is_exit_2(repo):
    work, runner = repo
    proc, outputs = _run_step(_step("check"), {"paths": "  \n"}, work, runner)
    assert proc.returncode == 2 and outputs["exit-code"] == "2"
    assert "::error title=kvplan check::paths: no file to check" in proc.stdout
