"""Independent parameter counts for kvplan's weight rules: each config built by transformers on
the meta device (no memory, no weights), its parameters counted by component.

Dev-only (needs torch and transformers, which kvplan never imports): run it in a separate venv,
e.g. ``/work/oracle-venv/bin/python benchmarks/oracle/meta_params.py``, and commit the JSON it
writes, tests/data/meta_param_counts.json, which tests/model/test_meta_oracle.py reads.

Configs counted: every ``*.json`` under ../shared/reference/model_configs/ (when that folder is
there), the ``config`` of every bundled model_specs/*.json, the KVPLAN_CONFIG line of every
recorded start under tests/data/vllm-0.26.0-h200/families/, and tests/data/model_configs/*.json
(real configs the family tests use). The config itself is stored with its count, so the test
needs no other file.

How a model is built: the class named by ``architectures[0]`` when transformers has it, else
AutoModelForCausalLM, via ``_from_config`` inside ``torch.device("meta")``;
``quantization_config`` is dropped (the count is of the logical, unquantized parameters). A
multimodal config without a top-level ``tie_word_embeddings`` is tied as its text config is
(vLLM builds the language model from ``text_config``; transformers 5.x would read the top-level
default True).
``named_parameters()`` lists a tied LM head once (under the embedding), as the checkpoint does.
A config transformers cannot build (an architecture it does not know, remote code) is recorded
with the error instead of a count.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "data" / "meta_param_counts.json"
REFERENCE = ROOT.parent / "shared" / "reference" / "model_configs"

VISION = ("vision", "visual", "multi_modal_projector", "mm_projector", "audio", "image_newline", "patch_embed", "merger")
EMBED = ("embed_tokens", "wte", "word_embeddings", "embed_in", "tok_embeddings", "embedding.weight", "per_layer_embed")
POSITIONS = ("embed_positions", "wpe", "position_embeddings")
LM_HEAD = ("lm_head", "embed_out", "output_layer")
MLP = ("mlp", "experts", "feed_forward", "moe", "ffn", "block_sparse_moe", "router", "gate.")
MIXER = ("self_attn", "attention", "attn", "mixer", "linear_attn", "mamba", "conv", "token_mixer")


def component(name: str) -> str:
    """The component a parameter name belongs to (first match wins, in this order)."""
    low = name.lower()
    if any(k in low for k in VISION):
        return "vision"
    if any(k in low for k in POSITIONS):
        return "positions"
    if any(k in low for k in EMBED):
        return "embeddings"
    if any(low.startswith(k) or f".{k}" in low for k in LM_HEAD):
        return "lm_head"
    last_module = low.rsplit(".", 2)[-2] if low.count(".") >= 1 else low
    if "norm" in last_module or last_module.startswith("ln") or last_module.endswith("_ln"):
        return "norms"
    if any(k in low for k in MLP):
        return "mlp"
    if any(k in low for k in MIXER):
        return "mixer"
    return "other"


def configs() -> list[tuple[str, str, dict]]:
    """(key, source description, config dict) of every config counted."""
    out = []
    if REFERENCE.is_dir():
        meta = {}
        if (REFERENCE / "METADATA.json").exists():
            meta = json.loads((REFERENCE / "METADATA.json").read_text())
        for p in sorted(REFERENCE.glob("*.json")):
            if p.name == "METADATA.json":
                continue
            out.append((f"reference/{p.name}", f"shared/reference/model_configs/{p.name} (see SOURCES.md there)",
                        json.loads(p.read_text())))
    for p in sorted((ROOT / "model_specs").glob("*.json")):
        if p.name == "METADATA.json":
            continue
        d = json.loads(p.read_text())
        if isinstance(d, dict) and isinstance(d.get("config"), dict):
            out.append((f"model_specs/{p.name}", d.get("source", "model_specs"), d["config"]))
    for p in sorted((ROOT / "tests" / "data" / "vllm-0.26.0-h200" / "families").glob("*.log")):
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith("KVPLAN_CONFIG "):
                out.append((f"families/{p.name}", f"tests/data/vllm-0.26.0-h200/families/{p.name} (KVPLAN_CONFIG)",
                            json.loads(line.split(" ", 1)[1])))
                break
    extra = ROOT / "tests" / "data" / "model_configs"
    for p in sorted(extra.glob("*.json")) if extra.is_dir() else []:
        d = json.loads(p.read_text())
        out.append((f"model_configs/{p.name}", d.get("source", ""), d["config"]))
    return out


def count(config: dict) -> dict:
    """Parameters of the model transformers builds from ``config``, by component."""
    import torch
    import transformers

    cfg_dict = {k: v for k, v in config.items() if k != "quantization_config"}
    for sub in ("text_config",):
        if isinstance(cfg_dict.get(sub), dict):
            cfg_dict[sub] = {k: v for k, v in cfg_dict[sub].items() if k != "quantization_config"}
    model_type = cfg_dict.pop("model_type")
    cfg = transformers.AutoConfig.for_model(model_type, **cfg_dict)
    text = cfg.get_text_config()
    if text is not cfg and "tie_word_embeddings" not in config:
        # vLLM builds a multimodal model's language model from text_config, whose tie flag (its
        # class default when omitted) decides the LM head; transformers 5.x reads the top-level
        # flag instead (PretrainedConfig default True), which would tie what vLLM does not
        # (Mistral3: MistralConfig's default is False, the checkpoint has its own lm_head)
        cfg.tie_word_embeddings = text.tie_word_embeddings
    arch = (config.get("architectures") or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    built_as = arch if cls is not None else "AutoModelForCausalLM"
    with torch.device("meta"):
        model = cls._from_config(cfg) if cls is not None else transformers.AutoModelForCausalLM.from_config(cfg)
    parts: dict[str, int] = {}
    for name, p in model.named_parameters():
        c = component(name)
        parts[c] = parts.get(c, 0) + p.numel()
    tied = not any(component(n) == "lm_head" for n, _ in model.named_parameters())
    total = sum(parts.values())
    # Persistent buffers are saved in the checkpoint like parameters (state_dict), and vLLM loads
    # them as parameters (DeepSeek-style e_score_correction_bias); non-persistent ones (rotary
    # inv_freq) are not. Counted apart, by name, so the test can say what it adds.
    persistent = set(model.state_dict().keys())
    buffers: dict[str, int] = {}
    for name, b in model.named_buffers():
        if name in persistent and component(name) != "vision":
            leaf = name.rsplit(".", 1)[-1]
            buffers[leaf] = buffers.get(leaf, 0) + b.numel()
    return {"built_as": built_as, "total": total, "text_total": total - parts.get("vision", 0),
            "components": dict(sorted(parts.items())), "lm_head_tied": tied,
            "checkpoint_buffers": dict(sorted(buffers.items()))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--only", help="count only keys containing this text (for a quick look)")
    args = ap.parse_args(argv)
    import torch
    import transformers

    models = {}
    for key, source, config in configs():
        if args.only and args.only not in key:
            continue
        entry = {"source": source, "architecture": (config.get("architectures") or [""])[0],
                 "model_type": config.get("model_type", ""), "config": config}
        try:
            entry.update(count(config))
        except Exception as exc:  # noqa: BLE001  (recorded, not raised: the test skips these)
            entry["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        models[key] = entry
        print(f"{key}: {entry.get('total', entry.get('error'))}", file=sys.stderr)
    data = {
        "generated_by": "benchmarks/oracle/meta_params.py",
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "date": dt.date.today().isoformat(),
        "method": "transformers class of architectures[0] (else AutoModelForCausalLM) ._from_config on "
                  "torch.device('meta'); quantization_config dropped; a multimodal config without a top-level tie_word_embeddings ties as its text_config does (vLLM builds the language model from it); named_parameters() numel by component",
        "models": models,
    }
    args.out.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
