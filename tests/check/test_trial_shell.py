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
