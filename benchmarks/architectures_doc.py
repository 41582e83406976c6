"""Generate docs/architectures.md: every architecture vLLM 0.26.0 serves as a generative model,
with what kvplan does with it, from the family registry (kvplan/model/families/__init__.py
FAMILIES), vLLM's names (kvplan/engines/vllm/v0_26/architectures.py), the meta-device parameter
counts (tests/data/meta_param_counts.json) and the recorded real starts (tests/data/vllm-*-h200).

    python benchmarks/architectures_doc.py          # rewrite docs/architectures.md
    python benchmarks/architectures_doc.py --check  # exit 1 if the committed file is stale

tests/test_architectures_doc.py asserts the committed file equals ``render()``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kvplan.engines.vllm.v0_26.architectures import (  # noqa: E402
    MULTIMODAL_BACKBONES,
    TEXT_GENERATION,
    TRANSFORMERS_BACKEND_TEXT,
)
from kvplan.model.families import DEFAULT_ARCHITECTURE, FAMILIES  # noqa: E402

DOC = ROOT / "docs" / "architectures.md"
DATA = ROOT / "tests" / "data"

# What stays approximate for an architecture that has a family (the rest is exact).
FAMILY_APPROXIMATE = {
    "Gemma3ForConditionalGeneration": "vision tower: ViT-shaped count from vision_config (within 0.01 % of the "
    "meta-device count for gemma-3-27b-it)",
    "Llama4ForConditionalGeneration": "vision tower: ViT-shaped count from vision_config (6 % under the "
    "meta-device count for Llama-4-Scout: 818 M vs 872 M, 0.05 % of the model)",
    "FalconH1ForCausalLM": "activation peak of the parallel attention + Mamba-2 layer: the attention branch's "
    "rule (`exact: false` until a real start checks it)",
    "Lfm2ForCausalLM": "activation of the short-conv layers: not modelled, the MLP's peak is used (`exact: false` "
    "until a real start checks it)",
    "Lfm2MoeForCausalLM": "activation of the short-conv layers: not modelled, the MoE rule's peak is used "
    "(`exact: false` until a real start checks it)",
    "Zamba2ForCausalLM": "activation peak of the shared attention blocks and Mamba-2 mixers: the generic rule "
    "(`exact: false` until a real start checks it)",
    "KimiLinearForCausalLM": "activation of the KDA layers: the Gated DeltaNet rule (`exact: false` until a real "
    "start checks it); weights by hand from vLLM's module tree (transformers has no kimi_linear)",
    "MiMoV2FlashForCausalLM": "activation peak: the full-attention layers' shape (`exact: false` until a real "
    "start checks it); vLLM 0.26.0 keeps its KV cache in the model dtype whatever --kv-cache-dtype says",
    "Gemma4ForConditionalGeneration": "vLLM 0.26.0 cannot start it (exit 2 saying so); on 0.33.0 the activation "
    "peak of the dense MLP + MoE block follows the MoE rule (`exact: false`); KV-shared layers, per-layer "
    "input embeddings and audio towers: exit 2",
    "MPTForCausalLM": "vLLM 0.33.0 no longer serves it (registry: supported until v0.28.0): exit 2 with "
    "`--vllm-version 0.33.0`",
    "MptForCausalLM": "as MPTForCausalLM",
    "InternVLChatModel": "a text backbone kvplan has no family for (InternLM2): sized as an unknown decoder, "
    "`exact: false`; Qwen2 / Qwen3 / Qwen3-MoE / Llama backbones and the InternViT tower are exact (hand count)",
}

# Why an architecture with no family is refused or what kvplan cannot read in it (vLLM 0.26.0's
# model file read for each); the rest are sized from the standard keys, ``exact: false``.
NO_FAMILY = {
    "KimiLinearForCausalLM": "KDA linear attention + MLA (`linear_attn_config`, `kv_lora_rank`): exit 2",
    "NemotronHForCausalLM": "Mamba-2 / attention / MoE pattern (`hybrid_override_pattern`): exit 2",
    "NemotronHPuzzleForCausalLM": "as NemotronHForCausalLM: exit 2",
    "DeepseekV32ForCausalLM": "sparse MLA with an indexer cache (`index_*` keys): exit 2",
    "GlmMoeDsaForCausalLM": "sparse MLA with an indexer cache: exit 2",
    "Qwen3_5ForConditionalGeneration": "Gated DeltaNet layers (`linear_*` keys): exit 2",
    "Qwen3_5MoeForConditionalGeneration": "Gated DeltaNet layers and experts: exit 2",
}


def _architecture(config: dict) -> str:
    """``architectures[0]``, or the default one of the config's model_type (as the parse does)."""
    archs = config.get("architectures") or [DEFAULT_ARCHITECTURE.get(config.get("model_type", ""), "?")]
    return archs[0]


def real_starts() -> Counter:
    """Recorded vLLM starts per architecture: tests/data/vllm-*-h200 (``.log`` files with
    KVPLAN_CONFIG and RESULT lines, ``.json`` records with a config and num_gpu_blocks; a start
    kept as both counts once) and the calibration starts under tests/data/calibration/vllm-*-h200."""
    starts: dict[tuple[Path, str], str] = {}
    folders = sorted(DATA.glob("vllm-*-h200")) + sorted((DATA / "calibration").glob("vllm-*-h200"))
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            config = None
            if path.suffix == ".log":
                text = path.read_text(encoding="utf-8", errors="replace")
                if "RESULT " not in text:
                    continue
                for line in text.splitlines():
                    if line.startswith("KVPLAN_CONFIG "):
                        config = json.loads(line.split(" ", 1)[1])
                        break
            elif path.suffix == ".json":
                try:
                    record = json.loads(path.read_text())
                except (ValueError, UnicodeDecodeError):
                    continue
                if isinstance(record, dict) and record.get("num_gpu_blocks") and isinstance(record.get("config"), dict):
                    config = record["config"]
            if isinstance(config, dict):
                starts[(path.parent, path.stem)] = _architecture(config)
    return Counter(starts.values())


def oracle_configs() -> Counter:
    """Configs per architecture in the meta-device parameter counts."""
    data = json.loads((DATA / "meta_param_counts.json").read_text())
    return Counter(_architecture(e["config"]) for e in data["models"].values() if "error" not in e)


def render() -> str:
    starts = real_starts()
    oracle = oracle_configs()
    names: dict[str, str] = {}
    for table, kind in ((TEXT_GENERATION, "text"), (TRANSFORMERS_BACKEND_TEXT, "Transformers backend"),
                        (MULTIMODAL_BACKBONES, "multimodal")):
        for arch, module in table.items():
            names.setdefault(arch, f"{module}" if kind == "text" else f"{module} ({kind})")
    for arch in FAMILIES:
        names.setdefault(arch, "—")
    rows = []
    n_family = n_refused = 0
    for arch in sorted(names, key=str.lower):
        entry = FAMILIES.get(arch)
        if entry is not None:
            n_family += 1
            module = entry[0] if isinstance(entry, tuple) else type(entry).__name__
            checked = oracle.get(arch, 0)
            exact = "layer kinds, KV bytes per layer, weights" + (
                f" (= meta-device count on {checked} config{'s' if checked != 1 else ''})" if checked else "")
            approx = FAMILY_APPROXIMATE.get(arch, "—")
            family = f"`{module}`"
        else:
            family = "—"
            exact = "—"
            note = NO_FAMILY.get(arch)
            if note and "exit 2" in note:
                n_refused += 1
            approx = note or "sized from the standard keys only: `exact: false`; exit 2 naming any other sizing key"
        rows.append(f"| {arch} | {names[arch]} | {family} | {exact} | {approx} | {starts.get(arch, 0)} |")
    total = len(names)
    head = [
        "# Architectures: what kvplan sizes exactly, approximately, or refuses",
        "",
        "Generated by `python benchmarks/architectures_doc.py` from the family registry",
        "(`kvplan/model/families/__init__.py`), vLLM 0.26.0's architecture names",
        "(`kvplan/engines/vllm/v0_26/architectures.py`: `_TEXT_GENERATION_MODELS`, the text entries of",
        "`_TRANSFORMERS_SUPPORTED_MODELS`, and the multimodal checkpoints whose text backbones kvplan covers),",
        "the meta-device parameter counts (`tests/data/meta_param_counts.json`) and the recorded real starts",
        "(`tests/data/vllm-*-h200`). Do not edit by hand; `tests/test_architectures_doc.py` checks it.",
        "",
        f"{total} architectures: {n_family} with a kvplan family, {n_refused} refused (exit 2) for keys kvplan",
        f"cannot read, {total - n_family - n_refused} sized from the standard keys only (`\"exact\": false` in every",
        "output, `check --strict` fails) unless the config has a key that changes sizing beyond them, which is",
        "exit 2 naming the key. Architectures vLLM serves only as pooling models (BERT, RoBERTa, `*Model`",
        "without a head, ...) and encoder-decoders (T5, BART) are exit 2 (`kvplan/model/generative.py`).",
        "",
        "*exact* = from the family's rules, checked by its tests; *real starts* = vLLM starts recorded with",
        "this architecture (`kvplan verify --from-log` replays them).",
        "",
        "| architecture | vLLM 0.26.0 model file | kvplan family | exact | approximate / refused | real starts |",
        "|---|---|---|---|---|---|",
    ]
    return "\n".join(head + rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="generate docs/architectures.md")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/architectures.md is not up to date")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if DOC.read_text() != text:
            print("docs/architectures.md is stale: run python benchmarks/architectures_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
