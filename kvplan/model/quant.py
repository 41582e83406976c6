"""The checkpoint's weight quantization, read from ``quantization_config`` (or ModelOpt's
``hf_quant_config.json``) into a QuantSpec. Not family knowledge: every family reads it the same way.
"""

from __future__ import annotations

from kvplan.errors import KvplanError
from kvplan.model.config import _Cfg, _show
from kvplan.model.spec import QuantSpec

# Quantization methods whose weight layout kvplan models (the version rules'
# engines/vllm/v0_26/weights.py). Any other quant_method is kept on the spec (so --quantization
# checks still see it) but its weights are sized as unquantized, and a note says so.
MODELLED_QUANT_METHODS = frozenset({"fp8", "awq", "gptq", "compressed-tensors", "mxfp4", "bitsandbytes"})



def _quantization(c: _Cfg, notes: list[str], vllm_version: str) -> QuantSpec | None:
    """The checkpoint's quantization from ``quantization_config`` (or ModelOpt's
    hf_quant_config.json, stored as ``_hf_quant_config``). ``vllm_version`` is the engine version
    a note on an unknown method names. Rule source: vLLM
    model_executor/layers/quantization/*.py get_config / from_config (key names and defaults)."""
    q = c.sub("quantization_config")
    mo = c.sub("_hf_quant_config")
    if (q is None or not q.data) and mo is not None:
        # ModelOpt checkpoints describe quantization in hf_quant_config.json (vLLM
        # transformers_utils/config.py reads it next to config.json).
        qd = mo.sub("quantization")
        algo = (qd.text("quant_algo", "") if qd is not None else "").upper()
        if algo == "FP8":
            return QuantSpec(
                method="fp8",
                bits=8,
                kv_cache_fp8=(qd.text("kv_cache_quant_algo", "") or "").upper() == "FP8",
                modules_to_not_convert=qd.str_list("exclude_modules"),
                vllm_name="modelopt",
            )
        if algo:
            method = f"modelopt_{algo.lower()}"
            notes.append(_unknown_quant_note(method, "hf_quant_config.json quant_algo", vllm_version))
            return QuantSpec(method=method, bits=4 if "FP4" in algo else 8)
    if q is None or not q.data:
        return None
    method_key = "quant_method" if q.has("quant_method") else "quant_type"
    method = (q.text(method_key, "") or "").lower()
    if not method:
        raise KvplanError(f"{c.where}: config key 'quantization_config.quant_method' is missing")
    skip = q.str_list("modules_to_not_convert", "ignored_layers", "ignore")
    if method == "fp8":
        block = q.int_list("weight_block_size", minimum=1)
        if block is not None and len(block) != 2:
            raise q.error("weight_block_size", f"must be [rows, columns], got {_show(block)}")
        return QuantSpec(
            method="fp8",
            bits=8,
            block_size=tuple(block) if block else None,
            modules_to_not_convert=skip,
        )
    if method in ("awq", "gptq"):
        bits_key = "bits" if q.has("bits") or not q.has("w_bit") else "w_bit"
        group_key = "group_size" if q.has("group_size") or not q.has("q_group_size") else "q_group_size"
        return QuantSpec(
            method=method,
            bits=q.int(bits_key, default=4),
            group_size=q.int(group_key, default=128, minimum=-1),
            desc_act=q.flag("desc_act", False),
            zero_point=q.flag("zero_point", True) if method == "awq" else not q.flag("sym", True),
            modules_to_not_convert=skip,
        )
    if method == "mxfp4":
        return QuantSpec(method="mxfp4", bits=4, group_size=32, modules_to_not_convert=skip)
    if method == "bitsandbytes":
        bits = 4 if q.flag("load_in_4bit", False) else 8
        return QuantSpec(method="bitsandbytes", bits=bits, group_size=64, modules_to_not_convert=skip)
    if method == "compressed-tensors":
        groups = q.sub("config_groups")
        bits, group_size, strategy_fp8 = 8, -1, False
        for name in (groups.data if groups is not None else {}):
            group = groups.sub(name)
            w = group.sub("weights") if group is not None else None
            if w is not None:
                bits = w.int("num_bits", default=bits)
                group_size = w.int("group_size", default=group_size, minimum=-1)
                strategy_fp8 = w.raw("type") == "float"
            break
        return QuantSpec(
            method="compressed-tensors",
            bits=bits,
            group_size=group_size,
            zero_point=not strategy_fp8,
            kv_cache_fp8=bool(q.raw("kv_cache_scheme")),
            modules_to_not_convert=skip,
        )
    notes.append(_unknown_quant_note(method, "quantization_config.quant_method", vllm_version))
    return QuantSpec(method=method, bits=q.int("bits", default=16), modules_to_not_convert=skip)


def _unknown_quant_note(method: str, key: str, vllm_version: str) -> str:
    """The note for a quantization method kvplan has no weight rule for. vLLM
    config/model.py _verify_quantization raises "Unknown quantization method" for a method not in
    its registry; a registered one kvplan does not model (hqq, gguf, modelopt_fp4, ...) starts."""
    return (
        f"{key} {method!r} is not a method kvplan models ({', '.join(sorted(MODELLED_QUANT_METHODS))}): its weights "
        f"are sized as unquantized, which over-states them if it packs weights; vLLM {vllm_version} refuses to start "
        "with a method it does not register"
    )

