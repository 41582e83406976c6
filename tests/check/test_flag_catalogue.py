"""The vLLM 0.26.0 `vllm serve` flag catalogue and how tokens are read.

Expected values are taken from reading vLLM 0.26.0's engine/arg_utils.py,
entrypoints/openai/cli_args.py and utils/argparse_utils.py (cited per test)."""

from __future__ import annotations

import pytest

from kvplan.engines.vllm.serve_flags import catalogue, parse_human_int, parse_max_model_len
from kvplan.errors import KvplanError


@pytest.fixture(scope="module")
def cat():
    return catalogue("0.26.0")


@pytest.mark.parametrize(
    "flag, arity",
    [
        ("max-model-len", "value"),  # model_group.add_argument("--max-model-len", ...)
        ("tensor-parallel-size", "value"),
        ("enforce-eager", "negatable"),  # ModelConfig.enforce_eager: bool -> BooleanOptionalAction
        ("enable-prefix-caching", "negatable"),
        ("disable-log-stats", "bool"),  # parser.add_argument(..., action="store_true")
        ("headless", "bool"),  # make_arg_parser
        ("served-model-name", "list"),  # str | list[str] -> nargs="+"
        ("speculative-config", "json"),
        ("hf-token", "optional"),  # bool | str | None -> nargs="?"
        ("port", "value"),  # FrontendArgs.port
        ("kv-cache-memory-bytes", "value"),
    ],
)
def test_catalogue_arities(cat, flag, arity):
    assert cat.arity[flag] == arity


def test_short_aliases(cat):
    assert cat.short["-tp"] == "tensor-parallel-size"
    assert cat.short["-pp"] == "pipeline-parallel-size"
    assert cat.short["-q"] == "quantization"
    assert cat.short["-dp"] == "data-parallel-size"


def test_flags_not_in_0_26(cat):
    for gone in ("swap-space", "num-scheduler-steps", "use-v2-block-manager", "kv-cache-memory"):
        assert gone not in cat.arity


@pytest.mark.parametrize(
    "token, flag, status, explicit, negated",
    [
        ("--max-model-len", "max-model-len", "ok", None, False),
        ("--max_model_len=32k", "max-model-len", "ok", "32k", False),  # underscores -> dashes
        ("--tensor-parallel-size=4", "tensor-parallel-size", "ok", "4", False),
        ("-tp", "tensor-parallel-size", "ok", None, False),
        ("-tp=2", "tensor-parallel-size", "ok", "2", False),
        ("--no-enable-prefix-caching", "enable-prefix-caching", "ok", None, True),
        ("-O3", "optimization-level", "ok", "3", False),  # FlexibleArgumentParser -O handling
        ("--kv-cache-memory", "kv-cache-memory-bytes", "abbreviation", None, False),  # allow_abbrev
        ("--kv-cache-memory=8G", "kv-cache-memory-bytes", "abbreviation", "8G", False),
        ("--swap-space", "swap-space", "removed", None, False),
    ],
)
def test_resolve(cat, token, flag, status, explicit, negated):
    m = cat.resolve(token)
    assert (m.flag, m.status, m.explicit, m.negated) == (flag, status, explicit, negated)


def test_resolve_dotted_json_key(cat):
    m = cat.resolve("--compilation-config.cudagraph_mode")
    assert (m.flag, m.dotted, m.status) == ("compilation-config", "cudagraph_mode", "ok")


def test_ambiguous_prefix_lists_the_candidates(cat):
    m = cat.resolve("--max-num")
    assert m.status == "ambiguous"
    assert {"--max-num-seqs", "--max-num-batched-tokens"} <= set(m.suggestions)


def test_unknown_flag_did_you_mean(cat):
    m = cat.resolve("--gpu-memory-utilisation")
    assert m.status == "unknown" and m.suggestions[0] == "--gpu-memory-utilization"
    assert cat.resolve("--tensor-paralel-size").suggestions[0] == "--tensor-parallel-size"


def test_removed_flag_that_is_also_a_prefix(cat):
    # `--device` was removed, but argparse would read it as an abbreviation of --device-ids.
    m = cat.resolve("--device")
    assert m.status == "removed" and m.suggestions == ("--device-ids",)


@pytest.mark.parametrize(
    "text, value",
    [
        ("32k", 32_000),  # lower-case: decimal (human_readable_int)
        ("32K", 32_768),  # upper-case: binary
        ("25.6k", 25_600),
        ("80G", 80 * 2**30),
        ("80g", 80_000_000_000),
        ("8192", 8192),
    ],
)
def test_parse_human_int(text, value):
    assert parse_human_int(text) == value


def test_parse_human_int_rejects_decimal_binary_and_words():
    with pytest.raises(ValueError, match="decimals"):
        parse_human_int("1.5K")
    with pytest.raises(ValueError):
        parse_human_int("lots")


def test_parse_max_model_len_auto():
    assert parse_max_model_len("auto") == -1
    assert parse_max_model_len("-1") == -1
    assert parse_max_model_len("128k") == 128_000


def test_unknown_version():
    with pytest.raises(KvplanError, match="--vllm-version"):
        catalogue("latest")
    # a release kvplan has not read gets the nearest read release's table, marked not exact
    old = catalogue("0.9.0")
    assert old.version == "0.9.0" and old.based_on.startswith("0.20.") and not old.exact
