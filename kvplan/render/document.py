"""Plan -> the ``kvplan estimate --format json`` document (a stable contract; its JSON Schema is
kvplan.render.schema).

The JSON shape (bytes as ints, per GPU of the stage with the fewest blocks):
{"kvplan_version", "fully_modelled", "exact", ["approximate"], "vllm", "evidence", "model", "gpu", "engine", "memory", "kv_cache", "binding_limit",
 "recommendations", "serve_command", "warnings", "fits", "failure", "largest_max_model_len",
 "stages"}.

``fully_modelled`` is false when kvplan assumed something (no family for the architecture, sized
from the standard keys; a partial snapshot; a term or flag it does not model); ``approximate``
(only then) lists the reasons, one line each. ``exact`` is its deprecated old name (same value,
removed in the next release): it never meant "checked on hardware", which ``evidence`` says. ``vllm`` says
which vLLM version's rules were used and why ({"version", "reason", ["requested"]}: see
engines/vllm/versions.VersionChoice); ``evidence`` what they stand on ({"checked",
"real_starts", "unchecked", "label"}: engines/vllm/rules.Evidence).
"""

from __future__ import annotations

from kvplan import __version__
from kvplan.capacity.estimate import Plan
from kvplan.capacity.recommend import recommendations
from kvplan.render.parallel import parallel_section
from kvplan.render.serve import serve_command, serve_env, serve_settings


def gpus_and_layout(plan) -> tuple[int, str]:
    """(GPUs the deployment uses, the layout as the header names it) for ``plan`` (Plan): the GPU
    count is TP x PP x DP x PCP (capacity/ranks.py World.gpus, JSON gpu.count); the layout always
    names TP and PP and, where set, DP, EP (vLLM's use_ep: experts spread), DCP, PCP and nodes,
    e.g. (8, "TP=1, PP=1, DP=8, EP"). A plain TP x PP engine: (TP x PP, "TP=t, PP=p")."""
    eff = plan.effective
    tp, pp = eff["tensor_parallel_size"], eff["pipeline_parallel_size"]
    parts = [f"TP={tp}", f"PP={pp}"]
    w = plan.parallel.world if plan.parallel is not None else None
    if w is None:
        return tp * pp, ", ".join(parts)
    if w.dp > 1:
        parts.append(f"DP={w.dp}")
    if w.uses_ep:
        parts.append("EP")
    if w.dcp > 1:
        parts.append(f"DCP={w.dcp}")
    if w.pcp > 1:
        parts.append(f"PCP={w.pcp}")
    if w.nnodes > 1:
        parts.append(f"{w.nnodes} nodes")
    return w.gpus, ", ".join(parts)


def gpu_label(gpu) -> str:
    """How the header names the GPU: the profile's name, or - when --gpu-memory replaced its
    memory - the size given and the profile the other properties come from (a 23.69 GiB total
    under "NVIDIA H200 SXM 141GB" would contradict itself)."""
    if gpu.memory_source != "--gpu-memory":
        return gpu.display_name
    props = ["fp8" if gpu.fp8_supported else "no fp8", "bf16" if gpu.bf16_supported else "no bf16"]
    if gpu.compute_capability:
        props.append(f"compute capability {gpu.compute_capability}")
    return f"{gpu.memory_bytes / 2**30:.2f} GiB GPU ({gpu.id} profile's other properties: {', '.join(props)})"


def version_dict(plan: Plan) -> dict:
    """JSON "vllm": {"version", "reason", ["requested"]} (reason "given to the API" when no
    command chose it)."""
    if plan.version_choice is not None:
        return plan.version_choice.to_dict()
    return {"version": plan.effective["vllm_version"], "reason": "given to the API"}


def evidence_line(plan: Plan) -> str:
    """One line for people: "vLLM X.Y.Z (--vllm-version): calibrated on N real vLLM X.Y.Z starts"."""
    tail = f": {plan.evidence.label()}" if plan.evidence is not None else ""
    return plan.version_label + tail


def to_dict(plan: Plan, source_provenance: dict | None = None, revision: str | None = None) -> dict:
    """The --format json document (see module docstring)."""
    worst = plan.worst_stage
    b = worst.budget
    spec = plan.spec
    groups = []
    for g in worst.layout.groups:
        groups.append(
            {
                "kind": g.kind,
                "num_layers": g.num_layers,
                "padding_layers": g.padding_layers,
                "block_size": g.block_size,
                "page_size_bytes": g.page_size_bytes,
                "sliding_window": g.sliding_window,
                "attention_chunk_size": g.chunk_size,
                "blocks_per_max_len_request": g.blocks_per_request(
                    max(plan.effective["max_model_len"], 1), plan.max_in_flight_tokens
                ),
            }
        )
    recs = {
        r.flag: {"value": r.value, "reason": r.reason, "kind": r.kind} for r in recommendations(plan)
    }
    # "exact" is the deprecated name of "fully_modelled" (kept one release: render/schema.py)
    head: dict = {"kvplan_version": __version__, "fully_modelled": plan.exact, "exact": plan.exact}
    if not plan.exact:
        head["approximate"] = [a.reason for a in plan.approximations]
    head["vllm"] = version_dict(plan)
    head["evidence"] = plan.evidence.to_dict() if plan.evidence is not None else None
    return head | {
        "model": {
            "name": spec.name,
            "architecture": spec.architecture,
            "model_type": spec.model_type,
            "num_hidden_layers": spec.num_hidden_layers,
            "num_attention_heads": spec.attention.num_attention_heads,
            "num_key_value_heads": spec.attention.num_key_value_heads,
            "head_dim": spec.attention.head_dim,
            "layer_kinds": {k.value: spec.count(k) for k in dict.fromkeys(spec.layer_kinds)},
            "sliding_window": spec.sliding_window,
            "mla": spec.mla.model_dump() if spec.mla else None,
            "moe": spec.moe.model_dump(exclude=None if not spec.moe.gated else {"gated"}) if spec.moe else None,
            "checkpoint_dtype": spec.dtype,
            "quantization": spec.quantization.model_dump() if spec.quantization else None,
            "derived_max_model_len": spec.derived_max_model_len,
            "source": source_provenance or {},
        },
        "gpu": {
            "name": plan.gpu.id,
            "display_name": plan.gpu.display_name,
            "label": gpu_label(plan.gpu),
            "memory_bytes": plan.gpu.memory_bytes,
            "memory_quality": plan.gpu.memory_quality,
            "memory_source": plan.gpu.memory_source,
            # GPUs used: TP x PP x DP x PCP (capacity/ranks.py World.gpus)
            "count": plan.parallel.world.gpus if plan.parallel is not None
            else plan.effective["tensor_parallel_size"] * plan.effective["pipeline_parallel_size"],
        },
        "engine": dict(plan.effective),
        "memory": {
            "total_bytes": b.total_bytes,
            "requested_bytes": b.requested_bytes,
            "weights_bytes": b.weights_bytes,
            "activation_peak_bytes": b.activation_peak_bytes,
            "non_torch_bytes": b.non_torch_bytes,
            "cudagraph_bytes": b.cudagraph_bytes,
            "cudagraph_subtracted_bytes": b.cudagraph_applied_bytes,
            "kv_cache_bytes": b.kv_cache_bytes,
            "kv_cache_memory_override": b.kv_cache_memory_override,
            "suggested_kv_cache_memory_bytes": b.suggested_kv_cache_memory_bytes,
            "weights_breakdown": dict(worst.weights_breakdown),
            **_kv_cache_sizing(b),
        },
        "kv_cache": {
            "num_gpu_blocks": plan.num_gpu_blocks,
            "block_size": plan.block_size,
            "page_size_bytes": plan.page_size_bytes,
            "bytes_per_token": plan.bytes_per_token,
            "bytes_per_block": worst.layout.bytes_per_block,
            "gpu_kv_cache_tokens": plan.gpu_kv_cache_tokens,
            "max_concurrency": round(plan.max_concurrency, 2),
            "max_model_len": plan.effective["max_model_len"],
            "padding_layers": worst.layout.padding_layers,
            "groups": groups,
        },
        "binding_limit": plan.binding_limit,
        "fits": plan.fits,
        "outcome": plan.outcome.value,
        "failure": plan.failure,
        "largest_max_model_len": plan.largest_max_model_len,
        "recommendations": recs,
        "serve_command": serve_command(plan, revision),
        "serve_flags": [
            {"flag": st["flag"], "value": st["value"], "origin": st["origin"]} for st in serve_settings(plan, revision)
        ],
        # only when the serve line needs it (VLLM_ALLOW_LONG_MAX_MODEL_LEN); absent otherwise
        **({"serve_env": env} if (env := serve_env(plan, revision)) else {}),
        # only for a multi-GPU layout beyond one TP/PP engine (render/parallel.py); absent otherwise
        **({"parallel": par} if (par := parallel_section(plan, serve_command(plan, revision))) else {}),
        "warnings": list(plan.warnings),
        "notes": list(plan.notes),
        "stages": [
            {
                "pipeline_rank": s.pipeline_rank,
                "layers": [s.layers.start, s.layers.stop],
                "num_gpu_blocks": s.num_blocks,
                "weights_bytes": s.budget.weights_bytes,
                "activation_peak_bytes": s.budget.activation_peak_bytes,
                "kv_cache_bytes": s.budget.kv_cache_bytes,
            }
            for s in plan.stages
        ],
        # speculative decoding, LoRA, weight and KV offload: only when one is on (capacity/addons.py)
        **({"addons": plan.addons.to_dict()} if getattr(plan, "addons", None) is not None else {}),
    }


def _kv_cache_sizing(b) -> dict:
    """``memory.kv_cache_sizing`` for a version with two sizing paths (vLLM 0.34.0,
    engines/vllm/v0_34/memory.py): {"mode": "extensible" | "estimate", and on the extensible
    path its terms in bytes}; {} for versions with one sizing path (no key)."""
    if not hasattr(b, "extensible"):
        return {}
    if not b.extensible:
        return {"kv_cache_sizing": {"mode": "estimate"}}
    return {"kv_cache_sizing": {
        "mode": "extensible",
        "free_after_warmup_bytes": b.headroom_bytes,
        "transient_peak_bytes": b.sizing_peak_bytes,
        "reserve_growth_bytes": b.reserve_growth_bytes,
        "margin_bytes": b.margin_bytes,
        "warmup_persistent_bytes": b.warmup_persistent_bytes,
        "capacity_bytes": b.capacity_bytes,
    }}
