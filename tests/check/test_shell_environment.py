"""Bugs from a new user's trial of `kvplan check` on shell scripts and Kubernetes `sh -c`:
an assignment ended by a shell operator, and CUDA_VISIBLE_DEVICES against the workers vLLM starts.

Expected values are the shell's and vLLM's real behaviour, worked out in the comments.
"""

from __future__ import annotations

import pytest

from tests.check.common import _diags, _json, write

M8 = "meta-llama/Meta-Llama-3-8B"


# -- `NAME=value;` keeps no operator ---------------------------------------------------------

@pytest.mark.parametrize("sep", ["; ", " && ", " || ", " & ", "\n"])
def test_assignment_ends_at_the_shell_operator(tmp_path, sep):
    # sh: `MODEL=x; vllm serve $MODEL` runs `vllm serve x` (`;`, `&&`, `||`, `&` and a newline
    # end the assignment command; none of them is part of the value)
    path = write(tmp_path, "s.sh", f"#!/bin/sh\nMODEL={M8}{sep}vllm serve $MODEL --max-model-len 8192\n")
    code, doc = _json(path, "--gpu", "H100")
    assert _diags(doc, "model-unresolved") == []
    (dep,) = [d for f in doc["files"] for d in f["deployments"]]
    assert dep["model"] == M8
    assert code == 0


def test_several_assignments_on_one_line(tmp_path):
    # `A=1 B=2; X=y` is two commands, each only assignments: all three are set
    path = write(tmp_path, "s.sh", f"#!/bin/sh\nLEN=8192 M={M8}; TP=1\nvllm serve $M --max-model-len $LEN -tp $TP\n")
    code, doc = _json(path, "--gpu", "H100")
    (dep,) = [d for f in doc["files"] for d in f["deployments"]]
    assert dep["model"] == M8 and dep["figures"]["max_model_len"] == 8192
    assert code == 0


def test_prefix_assignment_is_not_a_shell_variable(tmp_path):
    # `MODEL=x true` sets MODEL for `true` only; the next line's $MODEL is unset (sh)
    path = write(tmp_path, "s.sh", f"#!/bin/sh\nMODEL={M8} true\nvllm serve $MODEL\n")
    code, doc = _json(path, "--gpu", "H100")
    (d,) = _diags(doc, "model-unresolved")
    assert "$MODEL" in d["message"] or "MODEL" in d["message"]


def test_k8s_sh_c_assignment_ends_at_the_operator(tmp_path):
    path = write(tmp_path, "pod.yaml", f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: p}}
        spec:
          containers:
          - name: c
            image: vllm/vllm-openai:v0.26.0
            command: ["sh", "-c", "MODEL={M8}; vllm serve $MODEL --max-model-len 8192"]
        """)
    code, doc = _json(path, "--gpu", "H100")
    assert _diags(doc, "model-unresolved") == []
    (dep,) = [d for f in doc["files"] for d in f["deployments"]]
    assert dep["model"] == M8
    assert code == 0


# -- CUDA_VISIBLE_DEVICES: the GPUs vLLM can use -------------------------------------------------
# Meta-Llama-3-70B with -tp 2: vLLM starts 2 workers, one GPU each (config/parallel.py
# world_size); CUDA shows the process only the GPUs CUDA_VISIBLE_DEVICES lists, so with one entry
# the second worker has no GPU and vLLM cannot start.

M70 = "meta-llama/Meta-Llama-3-70B"


def _gpu_count(doc):
    return [d for d in doc["diagnostics"] if d["check_id"] == "gpu-count"]


def test_cuda_visible_devices_prefix_limits_the_gpus(tmp_path):
    path = write(tmp_path, "cvd.sh", f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=0 vllm serve {M70} -tp 2\n")
    code, doc = _json(path, "--gpu", "H100")
    (d,) = _gpu_count(doc)
    assert d["severity"] == "error" and d["line"] == 2 and d["key"] == "CUDA_VISIBLE_DEVICES"
    assert "1 GPU(s) visible" in d["message"] and "needs 2" in d["message"]
    assert code == 1


def test_cuda_visible_devices_two_entries_is_enough(tmp_path):
    path = write(tmp_path, "cvd.sh", f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=0,1 vllm serve {M70} -tp 2\n")
    code, doc = _json(path, "--gpu", "H100")
    assert [d for d in _gpu_count(doc) if d["severity"] == "error"] == []
    assert code == 0


def test_cuda_visible_devices_empty_hides_every_gpu(tmp_path):
    # CUDA_VISIBLE_DEVICES="" : no GPU at all, even for -tp 1
    path = write(tmp_path, "cvd.sh", f'#!/bin/sh\nCUDA_VISIBLE_DEVICES="" vllm serve {M8}\n')
    code, doc = _json(path, "--gpu", "H100")
    (d,) = _gpu_count(doc)
    assert d["severity"] == "error" and "0 GPU(s) visible" in d["message"]
    assert code == 1


def test_cuda_visible_devices_exported_earlier(tmp_path):
    path = write(tmp_path, "cvd.sh", f"#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=3\necho hi\nvllm serve {M70} -tp 2\n")
    code, doc = _json(path, "--gpu", "H100")
    (d,) = _gpu_count(doc)
    assert d["severity"] == "error" and d["line"] == 2
    assert code == 1


def test_cuda_visible_devices_not_exported_is_not_seen(tmp_path):
    # a plain shell variable is not in vLLM's environment (sh: only exported names are)
    path = write(tmp_path, "cvd.sh", f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=3\nvllm serve {M70} -tp 2\n")
    code, doc = _json(path, "--gpu", "H100")
    assert _gpu_count(doc) == []


def test_cuda_visible_devices_unresolved_is_said(tmp_path):
    path = write(tmp_path, "cvd.sh", f"#!/bin/sh\nCUDA_VISIBLE_DEVICES=$GPUS vllm serve {M70} -tp 2\n")
    code, doc = _json(path, "--gpu", "H100")
    (d,) = _gpu_count(doc)
    assert d["severity"] == "warning" and "$GPUS" in d["message"] and "cannot tell" in d["message"]
    assert code == 0


def test_cuda_visible_devices_dockerfile_env(tmp_path):
    path = write(tmp_path, "Dockerfile", f"""
        FROM vllm/vllm-openai:v0.26.0
        ENV CUDA_VISIBLE_DEVICES=0
        CMD ["{M70}", "-tp", "2"]
        """)
    code, doc = _json(path, "--gpu", "H100")
    (d,) = [x for x in _gpu_count(doc) if x["severity"] == "error"]
    assert "1 GPU(s) visible" in d["message"]
    assert code == 1


def test_cuda_visible_devices_compose_environment(tmp_path):
    path = write(tmp_path, "compose.yaml", f"""
        services:
          vllm:
            image: vllm/vllm-openai:v0.26.0
            environment:
              CUDA_VISIBLE_DEVICES: "0"
            command: ["{M70}", "-tp", "2"]
        """)
    code, doc = _json(path, "--gpu", "H100")
    (d,) = [x for x in _gpu_count(doc) if x["severity"] == "error"]
    assert "1 GPU(s) visible" in d["message"]
    assert code == 1


@pytest.mark.parametrize("shell", [False, True])
def test_cuda_visible_devices_k8s_env(tmp_path, shell):
    cmd = (
        f'command: ["sh", "-c", "vllm serve {M70} -tp 2"]' if shell
        else f'args: ["{M70}", "-tp", "2"]'
    )
    path = write(tmp_path, "pod.yaml", f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: p}}
        spec:
          containers:
          - name: c
            image: vllm/vllm-openai:v0.26.0
            env:
            - name: CUDA_VISIBLE_DEVICES
              value: "0"
            {cmd}
        """)
    code, doc = _json(path, "--gpu", "H100")
    (d,) = [x for x in _gpu_count(doc) if x["severity"] == "error"]
    assert "1 GPU(s) visible" in d["message"]
    assert code == 1
