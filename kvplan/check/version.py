"""Which vLLM version `kvplan check` checks a deployment against, and why.

Precedence, per deployment (docs/versions.md "How the version is chosen"):

1. ``--vllm-version`` (every deployment of the run);
2. ``vllm_version`` of the deployment in ``kvplan.yaml`` (or the manifest's top-level
   ``vllm_version``, or a ``kvplan: vllm_version=...`` comment / ``kvplan:`` block key);
3. the tag of the vLLM container image it runs in: a Kubernetes container's ``image``, a
   compose service's ``image``, a Dockerfile's ``FROM``, the image of a ``docker run`` /
   ``podman run`` line of a script (``vllm/vllm-openai:v0.33.0``,
   ``...:v0.26.0-cu130``, mirrors such as ``docker.io/...``, ``ghcr.io/...``,
   ``public.ecr.aws/...`` whose name holds ``vllm``); ``latest``, other names without a release
   and digests (``@sha256:...``) say nothing about the version: an info finding, and 4 applies;
4. the default of every command (engines/vllm/versions.resolve: the installed vllm package,
   else the newest supported).

A release kvplan has fingerprinted (0.20.0 ... 0.34.x) is served as versions.choose says: with
identical sizing source, the modelled version's rules as they are (an info line says so);
otherwise a ``vllm-version`` warning naming the rules used and the functions that differ. Any
other version (v0.10.2, v0.35.0) is a warning naming the nearest supported version, which is
then used (and labelled); ``--strict`` fails on both warnings. The flags are read with the
release's own `vllm serve` flag table (serve_flags.catalogue).

The version tables come from kvplan/engines/vllm/versions.py (importing it loads no version's
rule modules, so `kvplan check --help` stays cheap).
"""

from __future__ import annotations

import re
from typing import Optional

from kvplan.engines.vllm.versions import DEFAULT_VERSION as DEFAULT_VLLM_VERSION  # noqa: F401
from kvplan.engines.vllm.versions import VersionChoice, choose, for_flag, release

# a container image: [registry/]path[:tag][@digest]
_DIGEST = re.compile(r"@[A-Za-z0-9_+.-]+:[0-9a-fA-F]{16,}$")


def check_rules(version: str):
    """The module of check-only rules for vLLM ``version`` (switches on by default ...):
    ``check_rules`` of the version's package (engines/vllm/v0_26/check_rules.py).

    ``version`` is a release (a FlagCatalogue's): one kvplan models, or one it serves with a
    modelled version's rules (versions.choose).
    """
    from kvplan.engines.vllm import versions

    if version not in versions.SUPPORTED:  # a release served by a modelled version's rules
        version = versions.choose(version, "check rules").version
    return versions.select(version).check_rules


def split_image(image: str) -> tuple[str, Optional[str], Optional[str]]:
    """(repository, tag or None, digest or None) of an image reference
    ("ghcr.io/org/vllm-openai:v0.33.0@sha256:ab..." -> ("ghcr.io/org/vllm-openai", "v0.33.0", "sha256:ab...")).
    A ":" before the last "/" is a registry port, not a tag (Docker's reference grammar)."""
    digest = None
    m = _DIGEST.search(image)
    if m:
        digest, image = m.group(0)[1:], image[: m.start()]
    head, _, last = image.rpartition("/")
    tag = None
    if ":" in last:
        last, tag = last.split(":", 1)
    return (f"{head}/{last}" if head else last), tag, digest


def is_vllm_image(image: str) -> bool:
    """An image whose last path part names vLLM (vllm/vllm-openai and its mirrors on other
    registries, a team's own ``.../vllm`` or ``.../vllm-openai-cu130``)."""
    repo = split_image(image)[0]
    return "vllm" in repo.rsplit("/", 1)[-1].lower()


def image_version(image: str, where: str) -> tuple[Optional[VersionChoice], Optional[str]]:
    """The version an image tag names: (choice, None), or (None, why it names none) for a
    digest, ``latest``/no tag, a tag without a release (``nightly``) or an unexpanded $VARIABLE.
    ``where`` names the file, for the reason ("image tag vllm/vllm-openai:v0.33.0 in deploy.yaml")."""
    if "$" in image:
        return None, f"{image} in {where} is not expanded (a $VARIABLE): its vLLM version is unknown"
    repo, tag, digest = split_image(image)
    if tag is None or release(tag) is None:
        what = "pinned by digest" if digest and tag is None else (f"tagged {tag!r}" if tag else "untagged (latest)")
        return None, (f"{image} in {where} is {what}: the tag names no vLLM release, so kvplan cannot tell "
                      "which vLLM it runs")
    return choose(tag, f"image tag {repo}:{tag} in {where}"), None


def deployment_version(default: VersionChoice, flag: Optional[str], dep, targets) -> tuple[VersionChoice, Optional[str]]:
    """The version one deployment is checked with, and an info line when its image names no
    version (None otherwise): ``flag`` (--vllm-version) > ``targets.vllm_version``
    (kvplan.yaml / kvplan keys) > ``dep.image``'s tag (a vLLM image only) > ``default``."""
    if flag is not None:
        return for_flag(flag), None  # validated by the run (versions.resolve)
    wanted = getattr(targets, "vllm_version", None)
    if wanted:
        key = dep.target_keys.get("vllm_version", "vllm_version")
        return choose(wanted, f"{key} in {dep.version_file or dep.file}"), None
    invalid = dep.target_keys.get("vllm_version") if "vllm_version" in dep.targets else None
    if invalid is not None and dep.manifest_version is not None:
        # its own vllm_version is invalid (an error of its own): the manifest's top-level one applies
        return choose(dep.manifest_version[0], f"vllm_version in {dep.version_file or dep.file}, "
                      f"since {invalid} is invalid"), None
    if dep.image and is_vllm_image(dep.image):
        choice, unknown = image_version(dep.image, dep.file)
        if choice is not None:
            return choice, None
        return default, unknown + f"; checked with {default.label()}"
    if invalid is not None:
        return VersionChoice(default.version, f"{default.reason}; {invalid} is invalid"), None
    return default, None


def version_diagnostics(dep, choice: VersionChoice, unknown: Optional[str], evidence) -> None:
    """The ``vllm-version`` findings of one deployment: a warning when the version it names has
    no kvplan rules (the nearest is used; ``--strict`` fails), and one info line with the version
    used, why (on the image's line, saying why its tag names no version, when it names none), and
    the evidence
    (``evidence``: rules.Evidence, or None when no estimate was made)."""
    from kvplan.check.diagnostics import VLLM_VERSION

    line, key = _where(dep, choice)
    if choice.substituted:
        dep.diag(VLLM_VERSION, "warning", choice.warning(), line=line, key=key,
                 hint=f"check with --vllm-version {choice.version} to accept it, or pin a version kvplan has rules for")
    tail = f": {evidence.label()}" if evidence is not None else ""
    if unknown is not None:  # one line: why the image names no version, the version used instead
        dep.diag(VLLM_VERSION, "info", unknown + tail, line=dep.image_line, key=dep.image_key,
                 hint="tag the image with its vLLM release (vllm/vllm-openai:v0.33.0) or set vllm_version in kvplan.yaml")
        return
    dep.diag(VLLM_VERSION, "info", f"checked with {choice.label()}{tail}", line=line, key=key)


def _where(dep, choice: VersionChoice) -> tuple:
    """The line and key the version was read from (the deployment's own line for a flag or the default)."""
    if choice.reason.startswith("image tag"):
        return dep.image_line, dep.image_key
    if dep.manifest_version is not None and choice.reason.startswith("vllm_version in "):
        from kvplan.check.deployment import FileLine

        line = dep.manifest_version[1]
        return (FileLine(line, dep.version_file) if line is not None and dep.version_file and dep.version_file != dep.file
                else line), "vllm_version"
    if "vllm_version" in dep.target_keys and choice.reason != "--vllm-version" and "vllm_version" in choice.reason:
        line = dep.target_lines.get("vllm_version")
        if line is not None and dep.version_file and dep.version_file != dep.file:
            from kvplan.check.deployment import FileLine

            line = FileLine(line, dep.version_file)
        return line, dep.target_keys.get("vllm_version")
    return None, None
