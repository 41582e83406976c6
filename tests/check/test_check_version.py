"""`kvplan check` checks each deployment with the vLLM version it runs: --vllm-version, else the
deployment's kvplan.yaml ``vllm_version``, else the tag of its vLLM image (Kubernetes,
compose, Dockerfile), else the default; a version kvplan has no rules for warns naming the
nearest (which is used; --strict fails); a digest or ``latest`` names no version."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from kvplan.engines.vllm import versions
from tests.check.common import check, write
from tests.helpers import run_cli, unwrapped

MODEL = "meta-llama/Llama-3.1-8B-Instruct"  # bundled
N26 = len(versions.SUPPORTED["0.26.0"].real_starts.STARTS)


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    """The default is the newest supported (no vllm installed), whatever this machine has."""
    monkeypatch.setattr(versions, "installed_vllm", lambda: None)


def k8s(image: str) -> str:
    return f"""
        # kvplan: gpu=H100-80GB
        apiVersion: apps/v1
        kind: Deployment
        metadata: {{name: chat}}
        spec:
          template:
            spec:
              containers:
                - name: vllm
                  image: {image}
                  args: ["--model", "{MODEL}", "--max-model-len", "8192"]
                  resources: {{limits: {{nvidia.com/gpu: 1}}}}
        """


def compose(image: str) -> str:
    return f"""
        # kvplan: gpu=H100-80GB
        services:
          chat:
            image: {image}
            command: ["--model", "{MODEL}", "--max-model-len", "8192"]
        """


def docker_run(image: str) -> str:
    return f"""
        #!/bin/sh
        # kvplan: gpu=H100-80GB
        docker run --gpus all -e HF_TOKEN=x -v /models:/root/.cache --ipc=host {image} \\
          --model {MODEL} --max-model-len 8192
        """


def podman_run(image: str) -> str:
    return docker_run(image).replace("docker run", "podman run")


def dockerfile(image: str) -> str:
    return f"""
        FROM {image}
        # kvplan: gpu=H100-80GB
        CMD ["--model", "{MODEL}", "--max-model-len", "8192"]
        """


def _deployments(doc: dict) -> list[dict]:
    return [d for f in doc["files"] for d in f["deployments"]]


def _version_diags(doc: dict, severity: str | None = None) -> list[dict]:
    return [d for d in doc["diagnostics"] if d["check_id"] == "vllm-version" and (severity is None or d["severity"] == severity)]


@pytest.mark.parametrize(
    ("name", "make", "line", "key"),
    [
        ("deploy.yaml", k8s, 10, "image"),
        ("docker-compose.yml", compose, 4, "services.chat.image"),
        ("Dockerfile", dockerfile, 1, "FROM"),
        ("serve.sh", docker_run, 3, "docker run image"),
        ("serve.sh", podman_run, 3, "podman run image"),
    ],
)
def test_the_image_tag_picks_the_version(tmp_path, name, make, line, key):
    path = write(tmp_path, name, make("vllm/vllm-openai:v0.26.0-cu130"))
    code, doc, _ = check(path)
    assert code == 0, doc["diagnostics"]
    (dep,) = _deployments(doc)
    assert dep["vllm"] == {"version": "0.26.0", "reason": f"image tag vllm/vllm-openai:v0.26.0-cu130 in {path}"}
    # the fixtures run on an H100 SXM, a GPU one real 0.26.0 start ran on (vllm-0.26.0-h100/gptoss20b_graphs)
    label = f"calibrated on {N26} real vLLM 0.26.0 starts"
    assert dep["evidence"]["label"] == label
    (info,) = _version_diags(doc)
    assert (info["line"], info["key"]) == (line, key)
    assert info["message"] == f"checked with vLLM 0.26.0 (image tag vllm/vllm-openai:v0.26.0-cu130 in {path}): " + label


@pytest.mark.parametrize(
    "image",
    ["docker.io/vllm/vllm-openai:v0.26.0", "ghcr.io/acme/vllm-openai:v0.26.0", "public.ecr.aws/acme/vllm-openai:v0.26.0",
     "registry.local:5000/mirror/vllm-openai:v0.26.0"],
)
def test_a_mirror_of_the_vllm_image_is_read_too(tmp_path, image):
    code, doc, _ = check(write(tmp_path, "deploy.yaml", k8s(image)))
    assert _deployments(doc)[0]["vllm"]["version"] == "0.26.0"


def test_the_two_versions_give_their_own_numbers(tmp_path):
    # one file, two services on different images: each checked with its version's rules
    path = write(tmp_path, "docker-compose.yml", f"""
        # kvplan: gpu=H100-80GB
        services:
          old:
            image: vllm/vllm-openai:v0.26.0
            command: ["--model", "{MODEL}", "--max-model-len", "8192"]
          new:
            image: vllm/vllm-openai:v0.33.0
            command: ["--model", "{MODEL}", "--max-model-len", "8192"]
        """)
    code, doc, _ = check(path)
    old, new = _deployments(doc)
    assert (old["vllm"]["version"], new["vllm"]["version"]) == ("0.26.0", "0.33.0")
    for dep in (old, new):  # the same numbers `estimate` gives for that version
        code, out, _ = run_cli("estimate", MODEL, "--gpu", "H100-80GB", "--max-model-len", "8192",
                               "--vllm-version", dep["vllm"]["version"], "--format", "json")
        assert dep["figures"]["num_gpu_blocks"] == json.loads(out)["kv_cache"]["num_gpu_blocks"]
    assert old["figures"]["num_gpu_blocks"] != new["figures"]["num_gpu_blocks"]


@pytest.mark.parametrize(("tag", "nearest"), [("v0.30.1", "0.33.0"), ("v0.35.0", "0.34.0")])
def test_a_tag_without_rules_warns_naming_the_nearest_and_strict_fails(tmp_path, tag, nearest):
    path = write(tmp_path, "deploy.yaml", k8s(f"vllm/vllm-openai:{tag}"))
    code, doc, _ = check(path)
    assert code == 0
    (dep,) = _deployments(doc)
    wanted = tag[1:]
    assert dep["vllm"] == {"version": nearest, "reason": f"image tag vllm/vllm-openai:{tag} in {path}", "requested": wanted}
    (warn,) = _version_diags(doc, "warning")
    assert warn["line"] == 10 and warn["key"] == "image"
    assert f"vLLM {wanted}" in warn["message"] and f"nearest supported version, {nearest}" in warn["message"]
    assert dep["evidence"]["checked"] is False
    code, doc, _ = check(path, "--strict")
    assert code == 1


@pytest.mark.parametrize(
    ("image", "what"),
    [
        ("vllm/vllm-openai@sha256:" + "ab" * 32, "pinned by digest"),
        ("vllm/vllm-openai:latest", "tagged 'latest'"),
        ("vllm/vllm-openai", "untagged (latest)"),
        ("vllm/vllm-openai:nightly", "tagged 'nightly'"),
    ],
)
def test_a_digest_or_latest_names_no_version_and_the_default_applies(tmp_path, image, what):
    path = write(tmp_path, "deploy.yaml", k8s(image))
    code, doc, _ = check(path)
    assert code == 0
    (dep,) = _deployments(doc)
    assert dep["vllm"] == {"version": "0.34.0", "reason": "newest supported; no vllm installed"}
    (note,) = [d["message"] for d in _version_diags(doc, "info")]  # one line, not two
    assert note.startswith(f"{image} in {path} is {what}: ") and "cannot tell which vLLM it runs" in note, note
    assert "; checked with vLLM 0.34.0 (newest supported; no vllm installed): " in note, note
    assert not _version_diags(doc, "warning")
    text = unwrapped(run_cli("check", path)[1])
    assert "vllm-version image: vllm/vllm-openai" in text and "image: image" not in text, text
    assert text.count("checked with vLLM") == 1, text


def test_a_docker_run_image_without_a_release_names_no_version(tmp_path):
    path = write(tmp_path, "serve.sh", docker_run("vllm/vllm-openai:latest"))
    code, doc, _ = check(path)
    (dep,) = _deployments(doc)
    assert dep["vllm"]["reason"] == "newest supported; no vllm installed"
    (note,) = _version_diags(doc)
    assert note["key"] == "docker run image" and note["line"] == 3
    assert note["message"].startswith(f"vllm/vllm-openai:latest in {path} is tagged 'latest': ")


def test_a_docker_run_image_tag_from_a_shell_variable(tmp_path):
    path = write(tmp_path, "serve.sh", docker_run("vllm/vllm-openai:$TAG").replace("#!/bin/sh", "#!/bin/sh\nTAG=v0.26.0"))
    (dep,) = _deployments(check(path)[1])
    assert dep["vllm"] == {"version": "0.26.0", "reason": f"image tag vllm/vllm-openai:v0.26.0 in {path}"}
    assert dep["model"] == MODEL


@pytest.mark.parametrize(
    ("image", "dotenv", "version"),
    [
        ("vllm/vllm-openai:${VLLM_TAG:-v0.26.0}", None, "0.26.0"),
        ("vllm/vllm-openai:${VLLM_TAG-v0.26.0}", None, "0.26.0"),
        ("vllm/vllm-openai:${VLLM_TAG:-v0.33.0}", "VLLM_TAG=v0.26.0\n", "0.26.0"),  # .env over the default
        ("vllm/vllm-openai:${VLLM_TAG}", "VLLM_TAG=v0.26.0\n", "0.26.0"),
        ("vllm/vllm-openai:${VLLM_TAG:-v0.26.0}", "VLLM_TAG=\n", "0.26.0"),  # `:-`: empty takes the default
    ],
)
def test_a_compose_image_tag_is_interpolated_as_compose_does(tmp_path, image, dotenv, version):
    if dotenv is not None:
        write(tmp_path, ".env", dotenv)
    path = write(tmp_path, "docker-compose.yml", compose(image))
    (dep,) = _deployments(check(path)[1])
    assert dep["vllm"] == {"version": version, "reason": f"image tag vllm/vllm-openai:v{version} in {path}"}


def test_a_compose_image_variable_without_a_value_is_unknown_with_a_note(tmp_path):
    path = write(tmp_path, "docker-compose.yml", compose("vllm/vllm-openai:${VLLM_TAG}"))
    code, doc, _ = check(path)
    (dep,) = _deployments(doc)
    assert dep["vllm"]["reason"] == "newest supported; no vllm installed"
    (note,) = _version_diags(doc)
    assert note["key"] == "services.chat.image" and "${VLLM_TAG}" in note["message"] and "unknown" in note["message"]


def test_a_tag_and_a_digest_use_the_tag(tmp_path):
    path = write(tmp_path, "deploy.yaml", k8s("vllm/vllm-openai:v0.26.0@sha256:" + "cd" * 32))
    assert _deployments(check(path)[1])[0]["vllm"]["version"] == "0.26.0"


def test_kvplan_yaml_vllm_version_per_deployment_and_top_level(tmp_path):
    path = write(tmp_path, "kvplan.yaml", f"""
        vllm_version: "0.26.0"
        deployments:
          - name: pinned
            gpu: H100-80GB
            vllm_version: "0.33.0"
            command: vllm serve {MODEL} --max-model-len 8192
          - name: inherits
            gpu: H100-80GB
            args: {{model: {MODEL}, max-model-len: 8192}}
        """)
    code, doc, _ = check(path)
    assert code == 0, doc["diagnostics"]
    pinned, inherits = _deployments(doc)
    assert pinned["vllm"] == {"version": "0.33.0", "reason": f"deployments[0].vllm_version in {path}"}
    assert inherits["vllm"] == {"version": "0.26.0", "reason": f"vllm_version in {path}"}


@pytest.mark.parametrize("top", ['vllm_version: "0.26.0"\n', ""])
def test_an_invalid_deployment_vllm_version_falls_back_to_the_top_level_one(tmp_path, top):
    path = write(tmp_path, "kvplan.yaml", top + f"""deployments:
  - name: bad
    gpu: H100-80GB
    vllm_version: 0.33
    command: vllm serve {MODEL} --max-model-len 8192
""")
    code, doc, _ = check(path)
    assert code == 2
    assert any(d["check_id"] == "invalid-kvplan-key" and d["key"] == "deployments[0].vllm_version" for d in doc["diagnostics"])
    (dep,) = _deployments(doc)
    (info,) = _version_diags(doc)
    if top:  # the manifest's own vllm_version, named, on its line
        assert dep["vllm"] == {"version": "0.26.0",
                               "reason": f"vllm_version in {path}, since deployments[0].vllm_version is invalid"}
        assert (info["line"], info["key"]) == (1, "vllm_version")
    else:
        assert dep["vllm"] == {"version": "0.34.0",
                               "reason": "newest supported; no vllm installed; deployments[0].vllm_version is invalid"}


def test_precedence_flag_then_kvplan_yaml_then_image_then_default(tmp_path):
    # a k8s file whose `# kvplan:` comment names a version and whose image names another
    path = write(tmp_path, "deploy.yaml", k8s("vllm/vllm-openai:v0.33.0").replace(
        "# kvplan: gpu=H100-80GB", "# kvplan: gpu=H100-80GB vllm_version=0.26.0"))
    assert _deployments(check(path)[1])[0]["vllm"]["version"] == "0.26.0"  # kvplan key over the image
    dep = _deployments(check(path, "--vllm-version", "0.33.0")[1])[0]
    assert dep["vllm"] == {"version": "0.33.0", "reason": "--vllm-version"}  # the flag over both
    plain = write(tmp_path, "plain.yaml", k8s("acme/inference:v0.26.0").replace(
        'args: ["--model"', 'command: ["vllm", "serve"]\n                  args: ["--model"'))
    # not a vLLM image: its tag says nothing about vLLM; the default applies
    assert _deployments(check(plain)[1])[0]["vllm"]["reason"] == "newest supported; no vllm installed"


def test_an_unknown_flag_version_is_exit_2(tmp_path):
    code, out, err = run_cli("check", write(tmp_path, "deploy.yaml", k8s("vllm/vllm-openai:v0.26.0")), "--vllm-version", "0.30.1")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: --vllm-version: kvplan has no rules for vLLM '0.30.1'"


def test_the_version_shows_in_human_github_and_junit(tmp_path):
    path = write(tmp_path, "deploy.yaml", k8s("vllm/vllm-openai:v0.35.0"))
    code, out, _ = run_cli("check", path)
    text = unwrapped(out)
    assert "vllm-version" in text and "checked with vLLM 0.34.0, the nearest supported to 0.35.0" in text
    code, out, _ = run_cli("check", path, "--format", "github")
    assert any(s.startswith("::warning ") and "title=kvplan vllm-version" in s and "0.35.0" in s for s in out.splitlines())
    assert any(s.startswith("::notice ") and "checked with vLLM 0.34.0" in s for s in out.splitlines())
    junit = tmp_path / "report.xml"
    code, _, _ = run_cli("check", path, "--strict", "--junit-xml", str(junit))
    assert code == 1
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    case = cases["Deployment/chat container vllm :: vllm-version"]
    assert case.find("failure") is not None and "0.35.0" in case.find("failure").get("message")


def test_a_model_the_images_vllm_no_longer_serves_is_a_finding_not_an_unreadable_model(tmp_path):
    # vLLM 0.33.0's registry lists MPTForCausalLM as supported only until v0.28.0: the deployment
    # as written does not start, so check reports engine-rejects (exit 1), not model-unresolved
    # (exit 2, "kvplan cannot read the model's config"). The same model on a 0.26.0 image passes.
    cfg = json.load(open("tests/data/model_configs/mosaicml__mpt-7b.json"))["config"]
    (tmp_path / "mpt").mkdir()
    (tmp_path / "mpt" / "config.json").write_text(json.dumps(cfg))
    for tag, code_expected in (("v0.33.0", 1), ("v0.26.0", 0)):
        path = write(tmp_path, f"{tag}/Dockerfile", f"""
            FROM vllm/vllm-openai:{tag}
            # kvplan: gpu=H200
            CMD ["vllm", "serve", "{tmp_path / 'mpt'}", "--max-model-len", "2048"]
        """)
        code, doc, _ = check(path)
        ids = {d["check_id"] for d in doc["diagnostics"] if d["severity"] == "error"}
        assert code == code_expected, (tag, doc["diagnostics"])
        assert "model-unresolved" not in ids
        if code_expected:
            assert "engine-rejects" in ids
            msg = next(d["message"] for d in doc["diagnostics"] if d["check_id"] == "engine-rejects")
            assert "vLLM 0.33.0 no longer serves MPTForCausalLM" in msg
