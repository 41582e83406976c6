"""Build the vLLM 0.26.0 'new families' real-start cases (issue 12) for the lent H200.

Writes .device/cases/A/<name>/config.json and .device/cases_A.json (one request per case,
in the JSON form `python -m kvplan.verify.child` takes). Run from the repo root:
    python3 benchmarks/device/cases_families.py
Config sources (real published config.json copies found with the search tools; see
tests/data/vllm-0.26.0-h200/families/README.md for the table):
  AIC  = github:ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce
         aic-core/src/aiconfigurator_core/model_configs/<org>--<name>_config.json
  AIC2 = github:ai-dynamo/aiconfigurator@19d098add98ab8ba2366c94795e9e886cdcc915c
         src/aiconfigurator/model_configs/zai-org--GLM-4.7-Flash_config.json
Inline dicts carry their own source line. A config whose layers were cut says so in CUTS.
"""
import copy, json, os, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AIC_MIRROR = "/work/.mirror/ai-dynamo+aiconfigurator/repo"
AIC = "095f58a51c4ca8e61b66ec108d86f223f8d559ce"
AIC2 = "19d098add98ab8ba2366c94795e9e886cdcc915c"


def aic(name, commit=AIC, old=False):
    path = (f"src/aiconfigurator/model_configs/{name}_config.json" if old
            else f"aic-core/src/aiconfigurator_core/model_configs/{name}_config.json")
    txt = subprocess.check_output(["git", "-C", AIC_MIRROR, "show", f"{commit}:{path}"])
    return json.loads(txt), f"github:ai-dynamo/aiconfigurator@{commit} {path}"


# OLMoE-1B-7B-0924: the fields of allenai/OLMoE-1B-7B-0924's config.json that a MoE engine's
# adapter test vendors (code index id 71007947258, 'OLMOE_1B_7B_HF_CONFIG'); partial, the rest
# are transformers OlmoeConfig defaults (rope_theta 10000, max_position_embeddings 4096 ...).
OLMOE = {"architectures": ["OlmoeForCausalLM"], "model_type": "olmoe", "hidden_act": "silu",
         "hidden_size": 2048, "intermediate_size": 1024, "num_hidden_layers": 16, "num_experts": 64,
         "num_experts_per_tok": 8, "num_attention_heads": 16, "num_key_value_heads": 16,
         "vocab_size": 50304, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
OLMOE_SRC = "code index id 71007947258 (OLMOE_1B_7B_HF_CONFIG: fields of allenai/OLMoE-1B-7B-0924 config.json); partial"

# Phi-3.5-MoE-instruct bf16: trimmed config from an MLX port's unit test (code index id
# 54525692000, 'PHI35_MOE_BF16_CONFIG', matching mlx-community/Phi-3.5-MoE-instruct); partial.
PHIMOE = {"architectures": ["PhiMoEForCausalLM"], "model_type": "phimoe", "vocab_size": 32064,
          "hidden_size": 4096, "intermediate_size": 6400, "num_hidden_layers": 32,
          "num_attention_heads": 32, "num_key_value_heads": 8, "num_local_experts": 16,
          "num_experts_per_tok": 2, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
          "torch_dtype": "bfloat16"}
PHIMOE_SRC = "code index id 54525692000 (PHI35_MOE_BF16_CONFIG, trimmed microsoft/Phi-3.5-MoE-instruct); partial"

# EXAONE-4.0-32B: TensorRT-LLM test fixture EXAONE4_SINGLE_LAYER_CONFIG (code index id 336080770)
# with the two values it marks 'for testing' restored: num_hidden_layers 64, sliding_window 4096.
EXAONE4 = {"architectures": ["Exaone4ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 1,
           "eos_token_id": 361, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
           "initializer_range": 0.02, "intermediate_size": 27392, "max_position_embeddings": 131072,
           "model_type": "exaone4", "num_attention_heads": 40, "num_hidden_layers": 64,
           "num_key_value_heads": 8, "pad_token_id": 0, "rms_norm_eps": 1e-05,
           "rope_scaling": {"factor": 16.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
           "rope_theta": 1000000, "sliding_window": 4096, "sliding_window_pattern": 4,
           "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.54.0.dev0",
           "use_cache": True, "vocab_size": 102400}
EXAONE4_SRC = ("code index id 336080770 (NVIDIA/TensorRT-LLM test EXAONE4_SINGLE_LAYER_CONFIG, "
               "LGAI-EXAONE/EXAONE-4.0-32B) with num_hidden_layers 4->64 and sliding_window 4->4096 restored "
               "(the fixture marks both as changed for testing); attn_implementation key dropped")

# Mamba-Codestral-7B (Mamba2ForCausalLM): a benchmark module's codestral_mamba_config
# (code index id 20086630943, _name_or_path /raid/pablo/codestral-hf-good/, transformers 4.44.0.dev0).
CODESTRAL = {"architectures": ["Mamba2ForCausalLM"], "bos_token_id": 0, "chunk_size": 256,
             "conv_kernel": 4, "eos_token_id": 0, "expand": 2, "head_dim": 64, "hidden_act": "silu",
             "hidden_size": 4096, "initializer_range": 0.1, "intermediate_size": 8192,
             "layer_norm_epsilon": 1e-05, "model_type": "mamba2", "n_groups": 8,
             "norm_before_gate": True, "num_heads": 128, "num_hidden_layers": 64, "pad_token_id": 0,
             "rescale_prenorm_residual": False, "residual_in_fp32": True, "rms_norm": True,
             "state_size": 128, "tie_word_embeddings": False, "time_step_floor": 0.0001,
             "time_step_init_scheme": "random", "time_step_limit": [0.0, float("inf")],
             "time_step_max": 0.1, "time_step_min": 0.001, "time_step_rank": 256,
             "time_step_scale": 1.0, "torch_dtype": "bfloat16", "transformers_version": "4.44.0.dev0",
             "use_bias": False, "use_cache": True, "use_conv_bias": True, "vocab_size": 32768}
CODESTRAL_SRC = "code index id 20086630943 (codestral_mamba_config = mistralai/Mamba-Codestral-7B-v0.1 HF conversion)"

MM0 = {"image": 0, "video": 0}
CUTS = {}


def model_config(name):
    """(config, source) of tests/data/model_configs/<name>.json (a real config with its source)."""
    with open(os.path.join(ROOT, "tests", "data", "model_configs", f"{name}.json")) as f:
        d = json.load(f)
    return d["config"], f"tests/data/model_configs/{name}.json: {d['source']}"


def cut_layers(cfg, n, note, text_key=None):
    c = copy.deepcopy(cfg)
    t = c[text_key] if text_key else c
    old = t["num_hidden_layers"]
    t["num_hidden_layers"] = n
    for k in ("layer_types", "mlp_only_layers", "hybrid_layer_pattern", "moe_layer_freq"):
        if isinstance(t.get(k), list) and len(t[k]) == old:
            t[k] = t[k][:n]
    if isinstance(t.get("hybrid_override_pattern"), str):
        t["hybrid_override_pattern"] = t["hybrid_override_pattern"][:n]
    if "num_nextn_predict_layers" in t:
        pass  # MTP layers are not built by vLLM without speculative config
    return c, f"num_hidden_layers {old} -> {n}: {note}"


def cases():
    out = []

    def add(name, cfg, src, engine_args, cut=None):
        out.append({"name": name, "config": cfg, "source": src, "cut": cut,
                    "engine_args": engine_args, "usage": "llm"})

    E = lambda mml, **kw: dict({"max_model_len": mml, "enforce_eager": True}, **kw)
    add("olmoe-1b-7b_eager", OLMOE, OLMOE_SRC, E(4096))
    g, s = aic("zai-org--GLM-4.7-Flash", AIC2, old=True)
    add("glm4.7-flash_eager", g, s, E(32768))
    q, s = aic("Qwen--Qwen3.5-35B-A3B")
    add("qwen3.5-35b-a3b_eager", q, s, E(32768, limit_mm_per_prompt=MM0))
    n, s = aic("nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    add("nemotron3-nano-30b-a3b_eager", n, s, E(32768))
    v, s = aic("Qwen--Qwen3-VL-8B-Instruct")
    add("qwen3-vl-8b_eager", v, s, E(32768, limit_mm_per_prompt=MM0))
    g4, s = aic("google--gemma-4-26B-A4B")
    add("gemma4-26b-a4b_eager", g4, s, E(32768, limit_mm_per_prompt=MM0))
    m, s = aic("MiniMaxAI--MiniMax-M2.5")
    mc, cut = cut_layers(m, 8, "62 layers of 256 experts are ~230 GB in fp8; 8 keep it on one H200")
    add("minimax-m2.5-8L_eager", mc, s, E(32768), cut)
    d, s = aic("deepseek-ai--DeepSeek-V3.2")
    dc, cut = cut_layers(d, 5, "671B does not fit; 3 dense (first_k_dense_replace) + 2 MoE layers")
    add("dsv32-5L_eager", dc, s, E(32768), cut)
    add("mamba-codestral-7b_eager", CODESTRAL, CODESTRAL_SRC, E(32768))
    add("exaone4-32b_eager", EXAONE4, EXAONE4_SRC, E(32768))
    q2, s = aic("Qwen--Qwen3.5-27B")
    add("qwen3.5-27b_eager", q2, s, E(32768, limit_mm_per_prompt=MM0))
    add("phi3.5-moe_eager", PHIMOE, PHIMOE_SRC, E(4096))
    nh, s = aic("nvidia--Nemotron-H-56B-Base-8K")
    nhc, cut = cut_layers(nh, 59, "first 59 of 118 layers (hybrid_override_pattern cut to match) so start-up stays short")
    add("nemotron-h-56b-59L_eager", nhc, s, E(8192), cut)
    mb, s = model_config("state-spaces__mamba-2.8b-hf")
    add("mamba-2.8b_eager", mb, s, E(4096))
    fm, s = model_config("tiiuae__falcon-mamba-7b")
    add("falcon-mamba-7b_eager", fm, s, E(4096))
    fh, s = model_config("tiiuae__Falcon-H1-7B-Instruct")
    add("falcon-h1-7b_eager", fh, s, E(32768))
    lf, s = model_config("LiquidAI__LFM2-1.2B")
    add("lfm2-1.2b_eager", lf, s, E(32768))
    add("olmoe-1b-7b_graphs", OLMOE, OLMOE_SRC, {"max_model_len": 4096})
    add("qwen3.5-35b-a3b_graphs", q, aic("Qwen--Qwen3.5-35B-A3B")[1], {"max_model_len": 32768, "limit_mm_per_prompt": MM0})
    # famd (issue 12): GLM-4.5, GLM-5 / GLM-5.2, Hunyuan; configs as tests/data/model_configs/ keeps them
    # (source recorded in each file)
    air, s = model_config("zai-org__GLM-4.5-Air")
    airc, cut = cut_layers(air, 16, "46 layers are ~213 GB in bf16; 1 dense + 15 MoE layers keep it on one H200")
    add("glm4.5-air-16L_eager", airc, s, E(32768), cut)
    g5, s = model_config("zai-org__GLM-5")
    g5c, cut = cut_layers(g5, 5, "744B does not fit; 3 dense (first_k_dense_replace) + 2 MoE layers")
    add("glm5-5L_eager", g5c, s, E(32768), cut)
    g52, s = model_config("zai-org__GLM-5.2")
    g52c, cut = cut_layers(g52, 8, "744B does not fit; 3 dense + 5 MoE layers, indexers on layers 0, 1, 2, 6")
    add("glm5.2-8L_eager", g52c, s, E(32768), cut)
    hy, s = model_config("tencent__Hunyuan-A13B-Instruct")
    hyc, cut = cut_layers(hy, 16, "80B is ~160 GB in bf16; 16 of 32 MoE layers fit one H200")
    add("hunyuan-a13b-16L_eager", hyc, s, E(2048), cut)
    hd, s = model_config("tencent__Hunyuan-7B-Instruct")
    add("hunyuan-7b_eager", hd, s, E(32768))
    m3, s = model_config("mistralai__Mistral-Small-3.2-24B-Instruct-2506")
    add("mistral-small-3.2-24b_eager", m3, s, E(32768, limit_mm_per_prompt={"image": 0}))
    ling, s = model_config("inclusionAI__Ling-lite-1.5")
    add("ling-lite-1.5_eager", ling, s, E(32768))
    # session 4 (issue 12): the smaller new families whose real configs tests/data/model_configs keeps
    for cfg_name, case, mml in (("baidu__ERNIE-4.5-21B-A3B-PT", "ernie4.5-21b-a3b_eager", 32768),
                                ("ByteDance-Seed__Seed-OSS-36B-Instruct", "seed-oss-36b_eager", 32768),
                                ("bigcode__starcoder2-3b", "starcoder2-3b_eager", 4096),
                                ("allenai__OLMo-2-1124-7B-Instruct", "olmo2-7b_eager", 4096),
                                ("HuggingFaceTB__SmolLM3-3B-Base", "smollm3-3b_eager", 32768),
                                ("CohereForAI__aya-23-8B", "aya-23-8b_eager", 8192),
                                ("ibm-granite__granite-3.0-1b-a400m-instruct", "granitemoe-1b-a400m_eager", 2048),
                                ("ibm-granite__granite-3.3-8b-instruct", "granite-3.3-8b_eager", 32768),
                                ("tiiuae__falcon-7b", "falcon-7b_eager", 2048)):
        c, s = model_config(cfg_name)
        add(case, c, s, E(mml))
    # famf (issue 12): the old-key / multimodal families. GLM-4-9B-chat's config loads through vLLM's
    # own ChatGLMConfig; MPT-7B needs vLLM 0.26.0 (0.33.0 removed MPT); InternVL3-1B is remote code:
    # vLLM needs trust_remote_code and the checkpoint's configuration_internvl_chat.py and
    # configuration_intern_vit.py next to config.json (copy them into the case folder first, the
    # device cannot fetch them), text-only (image and video 0) so no processor files are read.
    glm4, s = model_config("THUDM__glm-4-9b-chat")
    add("glm4-9b-chat_eager", glm4, s, E(32768))
    mpt, s = model_config("mosaicml__mpt-7b")
    add("mpt-7b_eager", mpt, s, E(2048))
    ivl, s = model_config("OpenGVLab__InternVL3-1B")
    add("internvl3-1b_eager", ivl, s, E(32768, limit_mm_per_prompt={"image": 0, "video": 0}, trust_remote_code=True))
    # fame (issue 12): the hybrid / per-layer families
    mimo, s = model_config("XiaomiMiMo__MiMo-V2-Flash")
    mimoc, cut = cut_layers(mimo, 8, "309B does not fit; layers 0-7: full attention on 0 and 5, dense MLP on 0, "
                                     "7 MoE layers (hybrid_layer_pattern and moe_layer_freq cut to match)")
    add("mimo-v2-flash-8L_eager", mimoc, s, E(32768), cut)
    lm, s = model_config("LiquidAI__LFM2-8B-A1B")
    add("lfm2-8b-a1b_eager", lm, s, E(32768))
    zb, s = model_config("Zyphra__Zamba2-7B")
    add("zamba2-7b_eager", zb, s, E(4096))
    # famk (issue 12): Kimi-Linear, KDA linear attention + MLA + MoE. Its 1-based kda_layers /
    # full_attn_layers lists are cut with the layers; vLLM's own KimiLinearConfig reads the config
    # (no remote code). The bundled fields are partial (no dtype: vLLM's auto gives bfloat16).
    kl, s = model_config("moonshotai__Kimi-Linear-48B-A3B-Instruct")
    klc, cut = cut_layers(kl, 8, "48B is ~98 GB in bf16; layers 1-8 (1-based): KDA 1-3 and 5-7, MLA 4 and 8, "
                                 "dense MLP on 1, MoE on 2-8 (linear_attn_config lists cut to match)")
    lac = klc["linear_attn_config"]
    for k in ("kda_layers", "full_attn_layers"):
        lac[k] = [x for x in lac[k] if x <= 8]
    add("kimi-linear-48b-a3b-8L_eager", klc, s, E(32768), cut)
    return out


def model_config(name):
    """(config, source) of a real config kept under tests/data/model_configs/."""
    d = json.load(open(os.path.join(ROOT, "tests", "data", "model_configs", f"{name}.json")))
    return d["config"], f"tests/data/model_configs/{name}.json: {d['source']}"


def main():
    base = os.path.join(ROOT, ".device", "cases", "A")
    os.makedirs(base, exist_ok=True)
    reqs = []
    for c in cases():
        d = os.path.join(base, c["name"])
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c["config"], f, indent=1)
        reqs.append({"name": c["name"], "model": f"/tmp/cases/A/{c['name']}", "engine_args": c["engine_args"],
                     "usage": c["usage"], "dummy_weights": True, "expect_vllm": "0.26.0",
                     "_source": c["source"], "_cut": c["cut"]})
    with open(os.path.join(ROOT, ".device", "cases_A.json"), "w") as f:
        json.dump(reqs, f, indent=1)
    print(len(reqs), "cases")


if __name__ == "__main__":
    main()
