"""`kvplan check`: read vLLM deployments from config files as they are and report what fails.

Inputs, detected per file (``detect_kind``):

* ``vllm-config``: the YAML given to ``vllm serve --config`` (keys are `vllm serve` flags with
  dashes or underscores, plus ``model``), optionally with a ``kvplan:`` mapping (``Targets``).
* ``command``: any text file with ``vllm serve ...`` lines (shell scripts, Dockerfile
  CMD/ENTRYPOINT, CI YAML ``run:`` steps), read with shlex after joining line continuations.
* ``compose``: a docker-compose file (``services.*.command``/``entrypoint``; the
  ``vllm/vllm-openai`` image's entrypoint is `vllm serve`).
* ``k8s``: Kubernetes objects holding pod specs (``containers[].command``/``args``, the
  ``nvidia.com/gpu`` resource count, ``nodeSelector`` mapped to a GPU profile by
  ``kvplan.yaml``'s ``node_selectors``).
* ``manifest``: a ``kvplan.yaml`` listing several deployments (``Manifest``).
* serving stacks' manifests (KServe, llm-d modelservice values, Dynamo, production-stack values,
  Ray Serve LLM configs): each role's `vllm serve` line as the stack builds it
  (``sources/stacks.py``; docs/stacks.md).

YAML files are read document by document (``yaml_doc_kind``), so one file may hold several
kinds; a vLLM config in a file of several documents also fails ``multiple-documents`` (vLLM
loads it with ``yaml.safe_load``), and a YAML file with no deployment at all fails
``no-deployment``. ``$VARIABLES`` are expanded only where the platform would (``expand_word``:
shell lines, Dockerfile shell form from ENV, Kubernetes ``$(NAME)``, compose from ``.env``).

Text files and YAML files (compose, k8s) may carry ``# kvplan: gpu=H100-80GB gpu_count=2``
comments; a comment applies to the deployments that follow it in the file (or, when none
precedes a deployment, to the whole file).

Every problem is a ``Diagnostic`` (check id, severity, file, line, key, message); nothing is
raised for bad input in a file. The memory arithmetic is the planner's (``kvplan.capacity.estimate.plan``);
this module only maps flags onto ``EngineArgs`` and compares the Plan with the file's targets.
Model specs and plans are cached per run (``Checker``). Pure except reading the input files and
resolving models (``kvplan.sources``).

Module map: ``diagnostics`` (check ids, Diagnostic, exit codes), ``sources/`` (shell, dockerfile,
compose, k8s, vllm_config, manifest, detect, invocation: where deployments come from),
``deployment`` (Deployment, parse_serve_args), ``rules/`` (the checks), ``report`` (Report and its
formats), ``schema`` (`kvplan schema`), ``paths`` (the repository boundary), this module (the
run: files in, Report out).

Rule sources (vLLM files of the version in kvplan/engines/vllm/v0_26): ``utils/argparse_utils.py`` (how `vllm serve` and ``--config`` read
flags), ``engine/arg_utils.py`` (the flags), ``config/cache.py`` (gpu_memory_utilization in
(0, 1]), ``config/model.py`` (max_model_len limit), ``config/parallel.py`` (tensor parallel),
``v1/core/kv_cache_utils.py`` (one max_model_len request must fit).
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

from kvplan.check.deployment import Deployment, apply_directives, reread_serve_args
from kvplan.check.diagnostics import (
    INVALID_KVPLAN_KEY,
    INVALID_VALUE,
    MULTIPLE_DOCUMENTS,
    NO_DEPLOYMENT,
    NODE_SELECTORS,
    UNKNOWN_FLAG,
    VLLM_VERSION,
    Diagnostic,
)
from kvplan.check.paths import _display_path, _real, is_stdin, link_out_of_repository
from kvplan.check.report import DeploymentResult, FileResult, Report, add_parse_error
from kvplan.check.rules.hardware import _used_utilization, gpu_count_check, gpus_needed, resolve_gpu, utilization_target
from kvplan.check.rules.host_memory import host_memory_check
from kvplan.check.rules.inputs import engine_args, model_name, validate_targets
from kvplan.check.rules.memory import host_checks_without_max_model_len, plan_checks
from kvplan.check.rules.model import load_spec, model_checks
from kvplan.check.rules.shared_gpus import shared_gpu_check
from kvplan.check.sources.compose import compose_deployments
from kvplan.check.sources.detect import detect_kind, yaml_doc_kind
from kvplan.check.sources.dockerfile import dockerfile_calls
from kvplan.check.sources.invocation import deployment_from_invocation
from kvplan.check.sources.groups import join_headless_workers
from kvplan.check.sources.k8s import k8s_deployments
from kvplan.check.sources.manifest import covered_by_manifests, manifest_deployments, node_selectors_for
from kvplan.check.sources.stacks import STACK_KINDS, stack_deployments
from kvplan.check.sources.shell import find_directives, read_dotenv, serve_calls_in_text
from kvplan.check.sources.vllm_config import deployment_from_config, describe_yaml, duplicate_top_keys, multiple_documents_problem
from kvplan.check.version import deployment_version, version_diagnostics
from kvplan.engines.vllm.serve_flags import catalogue
from kvplan.errors import KvplanError
from kvplan.io.files import MAX_FILE_BYTES, InputError, YamlDoc, decode_text, load_yaml, read_text


class Checker:
    """Runs the checks over files; caches model specs per (model, revision) and plans per
    (model, revision, GPU, engine args) for the run.

    Args:
        gpu: GPU profile for deployments that declare none (the `--gpu` flag).
        gpu_profiles: extra GPU profile YAML files.
        vllm_version: whose flags and rules to use for every deployment (``--vllm-version``);
            None: each deployment's own (kvplan.yaml ``vllm_version``, its image tag), else the
            default (engines/vllm/versions.resolve). See kvplan.check.version.
        stdin_name: the file name standard input (``-``, ``/dev/stdin``) stands for: it decides
            how the text is read (``deploy.yaml``, ``Dockerfile``, ``serve.sh``, ``kvplan.yaml``)
            and is the name findings carry; a ``--config FILE`` in it is looked for next to that
            name. None: the kind is told from the text (see _stdin_path).
        stdin: the bytes to read as standard input (None: the process's standard input).
    Raises:
        KvplanError: unknown vLLM version or unreadable GPU profile files (exit 2).
    """

    def __init__(
        self, *, gpu: str | None = None, gpu_profiles: list[str] | None = None, vllm_version: str | None = None,
        stdin_name: str | None = None, stdin: bytes | None = None,
    ):
        from kvplan.engines.vllm import versions
        from kvplan.gpus import load_profiles

        self.version_flag = vllm_version
        self.default_choice = versions.resolve(vllm_version)  # an unknown --vllm-version is refused here (exit 2)
        self.cat = catalogue(self.default_choice.version)
        self.vllm_version = self.default_choice.version
        self.profiles = load_profiles(gpu_profiles)
        self.default_gpu = gpu
        self._specs: dict = {}
        self._plans: dict = {}
        self._manifests: dict = {}
        self._gpus: dict = {}
        self.stdin_name = stdin_name
        self._stdin = stdin
        self.stats = {"spec_loads": 0, "spec_cache_hits": 0, "plans": 0, "plan_cache_hits": 0}

    # -- cached pieces of kvplan.cli.plan_from_options -------------------------------------
    def spec(self, model: str, revision: str | None, hf_overrides: dict | None = None):
        """(ModelSpec, ModelSource) for a model (with ``--hf-overrides`` applied), cached;
        raises KvplanError when not found."""
        key = (model, revision, json.dumps(hf_overrides, sort_keys=True, default=str) if hf_overrides else None,
               self.vllm_version)
        if key in self._specs:
            self.stats["spec_cache_hits"] += 1
            hit = self._specs[key]
            if isinstance(hit, KvplanError):
                raise hit
            return hit
        from kvplan.sources import load_spec

        self.stats["spec_loads"] += 1
        try:
            spec, source = load_spec(model, revision, hf_overrides=hf_overrides, vllm_version=self.vllm_version)
        except KvplanError as exc:
            self._specs[key] = exc
            raise
        self._specs[key] = (spec, source)
        return spec, source

    def plan(self, model: str, revision: str | None, spec, gpu, args):
        """The planner's Plan, cached per (model, revision, GPU, args); raises KvplanError."""
        from kvplan.capacity.estimate import plan

        key = (model, revision, spec, gpu.id, gpu.memory_bytes, args)
        if key in self._plans:
            self.stats["plan_cache_hits"] += 1
            hit = self._plans[key]
            if isinstance(hit, KvplanError):
                raise hit
            return hit
        self.stats["plans"] += 1
        try:
            if getattr(spec, "speculative_draft", None) is None and (
                    args.speculative_config or args.spec_method or args.spec_model):
                # --speculative-config's draft, read like any model (sources/draft.py)
                from kvplan.sources.draft import attach_draft

                config = next((v[1].config for v in self._specs.values() if isinstance(v, tuple) and v[0] is spec), None)
                spec = attach_draft(spec, args, config, args.vllm_version)
            result = plan(spec, gpu, args)
        except KvplanError as exc:
            self._plans[key] = exc
            raise
        self._plans[key] = result
        return result

    def gpu(self, name: str):
        """The GPU profile for a name or alias, cached; raises KvplanError (unknown GPU)."""
        from kvplan.gpus import find_gpu

        if name not in self._gpus:
            try:
                self._gpus[name] = find_gpu(name, self.profiles)
            except KvplanError as exc:
                self._gpus[name] = exc
        hit = self._gpus[name]
        if isinstance(hit, KvplanError):
            raise hit
        return hit

    # -- files ------------------------------------------------------------------------------
    def check_paths(self, paths: list[str]) -> Report:
        """Check every file; never raises for a bad file (it becomes a parse-error)."""
        t0 = time.perf_counter()
        covered = covered_by_manifests(self, paths)
        # a file that a kvplan.yaml of this run names (`config: FILE`) is checked there, with the
        # manifest's gpu and targets, and not a second time as a bare file
        files = [self.check_file(p) for p in paths if is_stdin(p) or _real(p) not in covered]
        self._nothing_checked(files, any(is_stdin(p) for p in paths))
        stats = dict(self.stats, seconds=round(time.perf_counter() - t0, 4))
        return Report(files=files, stats=stats, vllm_version=self.vllm_version)

    def _nothing_checked(self, files: list[FileResult], stdin: bool) -> None:
        """A `no-deployment` warning (a failure under --strict) on the last file when the run
        found no deployment at all and nothing else failed: a check that checked nothing is
        not a pass to rely on (a wrong glob, a file kvplan read as another kind)."""
        if not files or any(f.deployments for f in files):
            return
        if any(d.severity == "error" for f in files for d in f.diagnostics):
            return  # the run fails already, and says why
        last = files[-1]
        last.diagnostics.append(
            Diagnostic(
                check_id=NO_DEPLOYMENT,
                severity="warning",
                file=last.file,
                line=None,
                message=f"0 deployments found in the {len(files)} file(s) given: nothing was checked",
                hint="name standard input's kind with --stdin-name (deploy.yaml, serve.sh, Dockerfile)"
                if stdin
                else "check the file list; kvplan reads vLLM --config YAML, Kubernetes, compose, Dockerfiles, "
                "scripts with `vllm serve` and kvplan.yaml",
            )
        )

    def _read_stdin(self) -> str:
        """Standard input as text (read once per run), with read_text's limits and rules.

        Raises:
            InputError: closed, too large, binary or not UTF-8."""
        if self._stdin is None:
            stream = getattr(sys.stdin, "buffer", None)
            if stream is None:
                raise InputError("standard input is closed")
            try:
                self._stdin = stream.read(MAX_FILE_BYTES + 1)
            except (OSError, ValueError) as exc:
                raise InputError(f"cannot read standard input: {exc}") from None
        data = self._stdin
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"standard input is over {MAX_FILE_BYTES:,} bytes; kvplan reads at most {MAX_FILE_BYTES:,} bytes per file")
        return decode_text(data, "input")

    def _stdin_path(self, text: str) -> Path:
        """The file standard input stands for: ``--stdin-name``, else a name told from the text:
        YAML whose documents are a deployment format (Kubernetes, compose, vLLM config,
        kvplan.yaml) is read as ``stdin.yaml``; text with a Dockerfile ``FROM`` and a
        CMD/ENTRYPOINT/RUN line as a ``Dockerfile``; anything else as a script."""
        if self.stdin_name:
            return Path(self.stdin_name)
        try:
            docs = load_yaml(text)
        except InputError:
            docs = None
        if docs is not None and detect_kind(Path("stdin.yaml"), docs, self.cat) not in ("command",):
            if detect_kind(Path("stdin.yaml"), docs, self.cat) == "manifest":
                return Path("kvplan.yaml")
            return Path("stdin.yaml")
        if re.search(r"^\s*FROM\s+\S", text, re.M | re.I) and re.search(r"^\s*(CMD|ENTRYPOINT|RUN)\b", text, re.M | re.I):
            return Path("Dockerfile")
        return Path("stdin")

    def check_file(self, path_text: str) -> FileResult:
        """All deployments in one file, evaluated. ``-`` and ``/dev/stdin`` are standard input
        (see _stdin_path for how its kind is told)."""
        if is_stdin(path_text):
            shown = _display_path(self.stdin_name) if self.stdin_name else "<stdin>"
            fr = FileResult(file=shown, kind=None)
            try:
                text = self._read_stdin()
            except InputError as exc:
                return add_parse_error(fr, exc.message, exc.line)
            path = self._stdin_path(text)
        else:
            shown = _display_path(path_text)
            fr = FileResult(file=shown, kind=None)
            if not path_text.strip():  # Path("") is ".", the working directory: say what was given
                return add_parse_error(fr, "empty file name")
            path = Path(path_text)
            escape = link_out_of_repository(path)
            if escape is not None:
                return add_parse_error(fr, escape)
            try:
                text = read_text(path)
            except InputError as exc:
                return add_parse_error(fr, exc.message, exc.line)
        raw = text.split("\n")
        docs = None
        if path.suffix.lower() in (".yaml", ".yml"):
            try:
                docs = load_yaml(text)
            except InputError as exc:
                return add_parse_error(fr, exc.message, exc.line)
        kind = detect_kind(path, docs, self.cat)
        fr.kind = kind
        directives, bad = find_directives(raw)
        for line, msg in bad:
            fr.diagnostics.append(
                Diagnostic(check_id=INVALID_KVPLAN_KEY, severity="error", file=shown, line=line, key="kvplan", message=msg)
            )
        deps: list[Deployment] = []
        if kind == "manifest":
            assert docs is not None
            deps = manifest_deployments(self, docs, path, shown, raw, fr)
        elif docs is not None and kind != "command":
            deps = self._yaml_deployments(docs, path, shown, raw, fr)
        else:
            problems: list[tuple[int, str]] = []
            if kind == "dockerfile":
                calls, _ = dockerfile_calls(raw, problems)
            else:
                calls, _ = serve_calls_in_text(raw, {}, problems=problems)
            for line, msg in problems:
                add_parse_error(fr, msg, line)
            deps = [
                deployment_from_invocation(
                    inv, shown, f"{shown}:{inv.line}", kind, self.cat, base_dir=path.parent if kind == "command" else None
                )
                for inv in calls
            ]
        if kind != "manifest":
            for dep in deps:
                apply_directives(dep, directives)
        if not deps and not fr.diagnostics:
            if docs is not None and kind == "command":
                # YAML that is no deployment format and runs no `vllm serve`: given to check by
                # mistake or a deployment kvplan cannot see; either way, not a pass. It was
                # searched as text for `vllm serve`, but it is shown as what it is: YAML.
                fr.kind = "yaml"
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=NO_DEPLOYMENT,
                        severity="error",
                        file=shown,
                        line=None,
                        message=f"no vLLM deployment in this YAML file: it {describe_yaml(docs)}, and no "
                        "`vllm serve` line was found in it",
                        hint="give kvplan check vLLM --config files, Kubernetes or compose files that run vLLM, "
                        "kvplan.yaml, or scripts with `vllm serve`",
                    )
                )
            else:
                fr.diagnostics.append(
                    Diagnostic(
                        check_id=NO_DEPLOYMENT,
                        severity="info",
                        file=shown,
                        line=None,
                        message=f"no `vllm serve` command or vLLM config found (read as {kind})",
                    )
                )
        if kind == "command":  # a script's commands run on the machine that runs the script
            for dep in deps:
                dep.host = f"script {shown}"
        deps = join_headless_workers(deps)  # a multi-node deployment's --headless workers join its leader
        fr.deployments = [self.evaluate(dep) for dep in deps]
        shared_gpu_check(deps, {id(d): r.checks for d, r in zip(deps, fr.deployments)})
        order = {"error": 0, "warning": 1, "info": 2}
        for r in fr.deployments:
            r.diagnostics.sort(key=lambda d: (d.line or 0, order[d.severity]))
        return fr

    def _yaml_deployments(self, docs: list[YamlDoc], path: Path, shown: str, raw: list[str], fr: FileResult) -> list[Deployment]:
        """The deployments of a YAML file, document by document (Kubernetes objects, compose
        files, vLLM --config mappings); a vLLM config in a file of several documents is also a
        multiple-documents error, as vLLM cannot load it."""
        deps: list[Deployment] = []
        node_map = None
        dotenv = None
        n_configs = sum(yaml_doc_kind(d.data, self.cat) == "vllm-config" for d in docs)
        dups = duplicate_top_keys("\n".join(raw)) if n_configs else []
        for i, doc in enumerate(docs):
            kind = yaml_doc_kind(doc.data, self.cat)
            if kind == "k8s":
                if node_map is None:
                    node_map, map_file = node_selectors_for(self, path, fr)
                k8s = k8s_deployments([doc], shown, raw, self.cat, node_map)
                for dep in k8s:
                    self._gpu_from_gfd_label(dep)
                    if "gpu" in dep.targets and map_file is not None:
                        dep.diag(
                            NODE_SELECTORS,
                            "info",
                            f"GPU {dep.targets['gpu']} from node_selectors in {map_file}",
                            line=dep.target_lines.get("gpu"),
                            key=dep.target_keys.get("gpu"),
                        )
                deps += k8s
            elif kind == "compose":
                if dotenv is None:
                    dotenv = read_dotenv(path.parent / ".env")
                problems: list[tuple[int | None, str, str]] = []
                deps += compose_deployments(doc, shown, raw, self.cat, dotenv, problems=problems)
                for line, key, message in problems:
                    fr.diagnostics.append(
                        Diagnostic(check_id=INVALID_VALUE, severity="error", file=shown, line=line, key=key, message=message)
                    )
            elif kind in STACK_KINDS:
                if node_map is None:
                    node_map, map_file = node_selectors_for(self, path, fr)
                unread: list = []
                stack = stack_deployments(kind, doc, shown, raw, self.cat, node_map, base_dir=path.parent, problems=unread)
                for dep in stack:
                    self._gpu_from_gfd_label(dep)
                deps += stack
                for line, key, message, hint in unread:  # a part not checked: never a silent pass
                    fr.diagnostics.append(Diagnostic(check_id=NO_DEPLOYMENT, severity="warning", file=shown, line=line,
                                                     key=key, message=message, hint=hint))
            elif kind == "vllm-config":
                name = shown if len(docs) == 1 or n_configs == 1 else f"{shown} (document {i + 1})"
                deps.append(
                    deployment_from_config(doc, shown, self.cat, name=name, duplicates=dups[i] if i < len(dups) else ())
                )
        problem = multiple_documents_problem(docs, raw) if n_configs else None
        if problem is not None:
            line, message, hint = problem
            fr.diagnostics.append(
                Diagnostic(check_id=MULTIPLE_DOCUMENTS, severity="error", file=shown, line=line, message=message, hint=hint)
            )
        return deps

    def _gpu_from_gfd_label(self, dep: Deployment) -> None:
        """A pod's GPU from NVIDIA GPU feature discovery's nvidia.com/gpu.product node label
        when no node_selectors mapping gave one: the profile whose reported device name GFD
        writes as that value (kvplan.gpus.find_gfd_product), with an info line saying so; an
        unknown value keeps gpu-missing, whose hint names the label."""
        if dep.gfd_product is None or "gpu" in dep.targets:
            return
        from kvplan.gpus import GFD_PRODUCT_LABEL, find_gfd_product

        value, line, key = dep.gfd_product
        profile = find_gfd_product(value, self.profiles)
        if profile is None:
            return
        dep.set_target("gpu", profile.id, line, key)
        dep.diag(NODE_SELECTORS, "info",
                 f"GPU {profile.id} from {GFD_PRODUCT_LABEL}={value}, the label NVIDIA GPU feature discovery sets "
                 f"on nodes whose GPU reports {profile.reported_name!r}", line=line, key=key)

    # -- checks -----------------------------------------------------------------------------
    def evaluate(self, dep: Deployment) -> DeploymentResult:
        """Run every check on one deployment (see docs/ci.md for the list) with the vLLM version
        it runs (kvplan.check.version.deployment_version); never raises."""
        targets = validate_targets(self, dep)
        choice, unknown = deployment_version(self.default_choice, self.version_flag, dep, targets)
        dep.version_pinned = self.version_flag is not None or (unknown is None and choice is not self.default_choice)
        run_version, run_cat = self.vllm_version, self.cat
        # the flags were read with the run's catalogue; read them again with the release the
        # deployment runs (its image tag, kvplan.yaml) when that has other flags
        self.vllm_version, self.cat = choice.version, catalogue(choice.flag_release)
        reread_serve_args(dep, self.cat)
        try:
            return self._evaluate(dep, targets, choice, unknown)
        finally:
            self.vllm_version, self.cat = run_version, run_cat

    def _evaluate(self, dep: Deployment, targets, choice, unknown: str | None) -> DeploymentResult:
        checks: list[str] = [UNKNOWN_FLAG, INVALID_VALUE, VLLM_VERSION]
        model = model_name(self, dep, targets, checks)
        eng = engine_args(self, dep, checks)
        gpu, gpu_name = resolve_gpu(self, dep, targets, checks)
        gpu_count_check(self, dep, targets, eng, checks)
        host_memory_check(dep, checks)
        _queue_check(dep, choice.version, eng, checks)
        if _utilization_known(dep, eng):  # for shared_gpu_check, once the file's deployments are read
            util = _used_utilization(eng.args)
            dep.gpu_use = (util, gpus_needed(eng), eng.keys.get("gpu_memory_utilization"))
        utilization_target(self, dep, targets, eng, checks)
        spec = load_spec(self, dep, targets, model, eng.revision, eng)
        figures = None
        planned = False
        if spec is not None and model_checks(self, dep, spec, eng.args, eng.keys, checks):
            if gpu is not None and not eng.blockers:
                figures = plan_checks(self, 
                    dep, model, eng.revision, spec, gpu, eng.args, eng.keys, targets, checks,
                    dp=max(eng.other.get("data-parallel-size") or 1, 1),
                )
                planned = figures is not None
        if spec is not None and gpu is not None and not eng.blockers and not planned:
            # the host-memory and /dev/shm findings do not depend on max-model-len: report them
            # even when max-model-len stopped the plan (check.rules.memory)
            host_checks_without_max_model_len(self, dep, model, eng.revision, spec, gpu, eng.args, checks)
        evidence = None
        if spec is not None and gpu is not None:
            from kvplan.engines.vllm import versions

            evidence = choice.apply_to(versions.select(choice.version).evidence_for(spec, gpu, eng.args))
        version_diagnostics(dep, choice, unknown, evidence)
        order = {"error": 0, "warning": 1, "info": 2}
        dep.diagnostics.sort(key=lambda d: (d.line or 0, order[d.severity]))
        return DeploymentResult(
            name=dep.name,
            file=dep.file,
            line=dep.line,
            kind=dep.kind,
            model=model or dep.model,  # (an unexpanded $VAR model is shown as written)
            gpu=gpu.id if gpu else (str(gpu_name) if gpu_name else None),
            checks=checks,
            diagnostics=dep.diagnostics,
            figures=figures,
            vllm=choice.to_dict(),
            evidence=evidence.to_dict() if evidence is not None else None,
        )


def _queue_check(dep: Deployment, version: str, eng, checks: list[str]) -> None:
    """The multi-GPU engine's /dev/shm rings against the container's /dev/shm (check.rules.shm
    queue_check), with the rules of the ``version`` the deployment runs."""
    from kvplan.check.rules.shm import queue_check
    from kvplan.check.version import check_rules

    try:
        rules = check_rules(version)
    except KvplanError:
        return
    queue_check(dep, rules, version, eng.args, checks)


def _utilization_known(dep: Deployment, eng) -> bool:
    """Whether --gpu-memory-utilization is the value vLLM uses: vLLM's default when unset, the
    value read when it was set and accepted (not a $VARIABLE, not a refused value)."""
    s = dep.settings.get("gpu-memory-utilization")
    util = eng.args.gpu_memory_utilization
    if not 0 < util <= 1:
        return False
    if s is None:
        return True
    try:
        return not (s.unresolved or s.literal) and float(str(s.value)) == util
    except ValueError:
        return False


def check_files(
    paths: list[str], *, gpu: str | None = None, gpu_profiles: list[str] | None = None, vllm_version: str | None = None,
    stdin_name: str | None = None, stdin: bytes | None = None,
) -> Report:
    """Check deployment files; see Checker.

    Raises:
        KvplanError: unknown vLLM version or unreadable --gpu-profiles files (not file problems);
            standard input named twice, or ``stdin_name`` without standard input among ``paths``.
    """
    given = [p for p in paths if is_stdin(p)]
    if len(given) > 1:
        raise KvplanError(
            f"FILES: standard input is given {len(given)} times ({', '.join(given)}); it can be read once",
            hint="give - once",
        )
    if stdin_name is not None:
        if not stdin_name.strip():
            raise KvplanError("--stdin-name: empty", hint="give the file name standard input stands for, e.g. deploy.yaml")
        if not given:
            raise KvplanError("--stdin-name: no - among the files, so there is no standard input to name",
                              hint="add - to the files, or leave --stdin-name out")
    return Checker(
        gpu=gpu, gpu_profiles=gpu_profiles, vllm_version=vllm_version, stdin_name=stdin_name, stdin=stdin
    ).check_paths(paths)
