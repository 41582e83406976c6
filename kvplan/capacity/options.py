"""From user options to a Plan: EngineArgs from flag values (one-line errors naming the flag),
and model + GPU + flags -> (Plan, ModelSource). The core API behind `kvplan estimate`, verify and
check (it was kvplan.cli.plan_from_options). Imports stay inside the functions so that importing
the CLI stays cheap.
"""

from __future__ import annotations

from typing import Optional



def build_engine_args(**kw):
    """EngineArgs from CLI values; pydantic errors become one line naming the flag
    (kvplan.io.errors.engine_args_error)."""
    from pydantic import ValidationError

    from kvplan.engines.vllm.args import EngineArgs
    from kvplan.io.errors import engine_args_error

    try:
        return EngineArgs(**{k: v for k, v in kw.items() if v is not None})
    except ValidationError as exc:
        raise engine_args_error(exc) from None


# Moved to kvplan.io.errors.plain_message (issue 11); kept for kvplan.cli and verify.
from kvplan.io.errors import plain_message as _plain_message  # noqa: E402,F401


def plan_from_options(
    *,
    model: str,
    gpu: str,
    gpu_memory: Optional[str],
    gpu_profiles: Optional[list[str]],
    revision: Optional[str],
    hf_overrides: Optional[dict] = None,
    **engine_kw,
):
    """Resolve model + GPU + flags into (Plan, ModelSource). Shared by estimate/verify/check.

    Args:
        model: Hub repo id, local directory or bundled spec id; revision: its Hub revision.
        gpu: GPU profile id; gpu_memory: --gpu-memory text (bytes, e.g. "80GiB") or None;
        gpu_profiles: extra GPU profile YAML files.
        hf_overrides: the ``--hf-overrides`` mapping, applied to the config as vLLM applies it
            (kvplan.model.overrides.apply_hf_overrides, through sources.load_spec); None = none.
        engine_kw: EngineArgs fields (None = not given).
    Raises:
        KvplanError: unknown --vllm-version, a bad flag value, GPU or model (exit 2).
    """
    from kvplan.capacity.estimate import plan
    from kvplan.engines.vllm import versions
    from kvplan.gpus import check_gpu_memory_flag, find_gpu, load_profiles
    from kvplan.io.units import parse_bytes

    versions.select(engine_kw.get("vllm_version") or versions.DEFAULT_VERSION)
    args = build_engine_args(**engine_kw)
    profile = find_gpu(gpu, load_profiles(gpu_profiles))
    if gpu_memory is not None:
        profile = profile.with_memory(check_gpu_memory_flag(parse_bytes(gpu_memory, what="--gpu-memory"), gpu_memory,
                                                         vllm_version=args.vllm_version))
    spec, source = load_spec_with_overrides(model, revision, hf_overrides, vllm_version=args.vllm_version)
    from kvplan.sources.draft import attach_draft

    spec = attach_draft(spec, args, source.config, args.vllm_version)  # --speculative-config's draft, if any
    import os

    # vLLM reads VLLM_ALLOW_LONG_MAX_MODEL_LEN from its environment; kvplan runs in the one the user
    # would start vLLM from (config/model.py _get_and_verify_max_len).
    result = plan(spec, profile, args, env=dict(os.environ))
    result.warnings.extend(shadowed_override_warnings(source.config, hf_overrides))
    return result, source


def load_spec_with_overrides(model: str, revision: Optional[str], hf_overrides: Optional[dict],
                             vllm_version: Optional[str] = None):
    """sources.load_spec with ``--hf-overrides`` applied; (ModelSpec, ModelSource).

    Raises:
        KvplanError: as load_spec; when only the overridden config fails, the message starts
            with ``--hf-overrides:`` (the overrides made the config one kvplan cannot read).
    """
    from kvplan.errors import KvplanError
    from kvplan.sources import load_spec

    try:
        return load_spec(model, revision, hf_overrides, vllm_version=vllm_version)
    except KvplanError as exc:
        if not hf_overrides:
            raise
        load_spec(model, revision, vllm_version=vllm_version)  # raises as before when the model itself is the problem
        raise KvplanError(f"--hf-overrides: the overridden config is not one vLLM reads: {exc.message}", exc.hint) from None


def shadowed_override_warnings(config: dict, hf_overrides: Optional[dict]) -> list[str]:
    """One warning per flat ``--hf-overrides`` key that vLLM sets on a multimodal model's outer
    config while its language model reads the key from ``text_config`` (the override changes
    nothing there; kvplan.model.overrides.shadowed_flat_keys, vLLM transformers_utils/config.py
    get_hf_text_config). [] without overrides. Raises nothing."""
    if not hf_overrides:
        return []
    from kvplan.model.overrides import shadowed_flat_keys

    return [
        f"--hf-overrides: {name} is set on the outer config, but this model's language model reads "
        f'text_config.{name}, so vLLM applies it where it changes nothing (write {{"text_config": {{"{name}": ...}}}})'
        for name in shadowed_flat_keys(config, hf_overrides)
    ]
