"""The `vllm serve` flags a sizing command does not declare as its own options, read against the
chosen vLLM version's flag catalogue (engines/vllm/serve_flags.py), so a serve line pasted into
`kvplan estimate` is taken whole.

Each such flag is one of:

* an EngineArgs field the command has no option for (``--no-enable-chunked-prefill``,
  ``--load-format``): sized, as the option would be;
* a flag that changes nothing vLLM sizes (the version's flag_catalogue.NO_SIZING_EFFECT:
  ``--port``, ``--host``, ``--served-model-name`` ...): listed once as ignored and kept in the
  serve line as given;
* any other flag of the catalogue: it may change memory and kvplan does not model it, so the
  estimate is approximate (a ModelSpec-style Approximation: every output format says it) and the
  flag is kept in the serve line as given;
* not a flag of that vLLM version at all, removed, ambiguous or a stray word: exit 2, naming it
  (with close names).

typer's ``ignore_unknown_options`` hands these tokens over in ``ctx.args``; a MODEL written after
such a flag lands there too (click fills MODEL with the first free token), which ``read`` sorts
out with the catalogue's arities.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.errors import KvplanError

# typer command settings that hand unknown options to the command (ctx.args) instead of failing
CONTEXT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}
IGNORED_WORDS = "ignored (no effect on memory or sizing)"
# why a catalogue flag kvplan does not model may change memory, where more is known than "may"
_WHY = {
    "config": "kvplan does not read a --config file here; `kvplan check FILE` does",
    "optimization-level": "the compilation level changes the CUDA-graph memory vLLM reserves",
}


@dataclass(frozen=True)
class ServeExtras:
    """What the undeclared `vllm serve` flags of one call mean (see the module docstring).

    Attributes:
        model: the MODEL argument when click had taken a flag's token for it (else None).
        engine: EngineArgs field -> value for the flags that are EngineArgs fields.
        ignored: the tokens of each flag with no effect on sizing, as typed.
        unmodelled: (tokens as typed, why it may change memory) per flag kvplan does not model.
    """

    model: str | None = None
    engine: dict | None = None
    ignored: tuple[tuple[str, ...], ...] = ()
    unmodelled: tuple[tuple[tuple[str, ...], str], ...] = ()

    @property
    def serve_tokens(self) -> tuple[tuple[str, ...], ...]:
        """The tokens the written serve line keeps as the user gave them (ignored, then unmodelled)."""
        return self.ignored + tuple(toks for toks, _ in self.unmodelled)


def _takes(arity: str, explicit: str | None, rest: list[str]) -> int:
    """How many of the tokens ``rest`` after a flag of ``arity`` are its values (argparse: a token
    starting with "-" is never a value, unless it is a negative number)."""
    if explicit is not None or arity in ("bool", "negatable"):
        return 0

    def value(tok: str) -> bool:
        return not tok.startswith("-") or tok[1:2].isdigit()

    if arity == "list":
        n = 0
        while n < len(rest) and value(rest[n]):
            n += 1
        return n
    return 1 if rest and value(rest[0]) else 0


def _error(token: str, version: str, suggestions: list[str], why: str = "", command: str = "estimate") -> KvplanError:
    hint = ("did you mean " + ", ".join(suggestions) + "?") if suggestions else "see `vllm serve --help` of that version"
    return KvplanError(f"{token}: neither an option of `kvplan {command}` nor a `vllm serve` flag of vLLM {version}{why}",
                       hint=hint)


def _stray(word: str) -> KvplanError:
    """A word after MODEL that no flag takes: click's own words for it (docs/errors.md
    workload-unquoted), with the quoting hint when --workload was given (the shell split it)."""
    import sys

    workload = any(a == "--workload" or a.startswith("--workload=") for a in sys.argv[1:])
    return KvplanError(f"Got unexpected extra argument(s) ({word})",
                       hint="--workload takes one argument: quote it, e.g. --workload 'prompt=100,50 output=10'"
                       if workload else None)


def _why(flag: str) -> str:
    """Why ``flag`` (a catalogue flag kvplan does not model) may change memory: `kvplan check`'s
    reason where it has one (check/engine_flags.py), else ours, else "it may"."""
    from kvplan.check.engine_flags import _NOT_MODELLED

    return _NOT_MODELLED.get(flag) or _WHY.get(flag, "it may change vLLM's memory")


def of_context(ctx) -> tuple[tuple[str, ...], frozenset[str]]:
    """(the tokens typer left in ``ctx.args``, the command's own option strings) of a command
    registered with CONTEXT_SETTINGS, for ``read``."""
    declared = frozenset(o for p in ctx.command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-"))
    return tuple(ctx.args), declared


def read(tokens: list[str], model: str, version: str, declared: set[str], command: str = "estimate") -> ServeExtras:
    """Sort the tokens typer did not parse (``tokens``; ``model`` what it took for MODEL) into a
    ServeExtras, against vLLM ``version``'s flag catalogue. ``declared``: the command's own
    option strings ("--gpu", "-tp" ...), for suggestions and to refuse another spelling of them.

    Raises:
        KvplanError: exit 2 for a token that is no flag of ``version`` (with close names among its
            flags and the command's options), a removed or ambiguous flag, a flag without its
            value, another spelling of one of the command's options, or a stray word.
    """
    if not tokens and not model.startswith("-"):
        return ServeExtras()
    from kvplan.engines.vllm.args import ENGINE_ARGS
    from kvplan.engines.vllm.serve_flags import catalogue
    from kvplan.engines.vllm.v0_26.flag_catalogue import NO_SIZING_EFFECT

    cat = catalogue(version)
    field_of = {f: a for a in ENGINE_ARGS for f in a.flags}
    words = [model, *tokens] if model.startswith("-") else list(tokens)
    found_model = None if model.startswith("-") else model
    engine: dict = {}
    ignored: list[tuple[str, ...]] = []
    unmodelled: list[tuple[tuple[str, ...], str]] = []
    i = 0
    while i < len(words):
        tok = words[i]
        if not tok.startswith("-") or tok[1:2].isdigit():
            if found_model is None:
                found_model, i = tok, i + 1
                continue
            raise _stray(tok)
        m = cat.resolve(tok)
        if m.status == "unknown":
            import difflib

            own = difflib.get_close_matches(tok.split("=", 1)[0], sorted(declared), n=3, cutoff=0.6)
            raise _error(tok, version, list(dict.fromkeys([*own, *m.suggestions]))[:3], command=command)
        if m.status == "removed":
            raise _error(tok, version, list(m.suggestions)[:3], f" ({m.note})", command=command)
        if m.status == "ambiguous":
            raise KvplanError(f"{tok}: ambiguous `vllm serve` flag of vLLM {version}", hint="one of " + ", ".join(m.suggestions))
        canonical = "--" + ("no-" if m.negated else "") + m.flag
        long = "--" + m.flag
        if m.status == "abbreviation" or long in declared or canonical in declared or m.flag == "model":
            hint = "give the model as MODEL" if m.flag == "model" else f"write {canonical}"
            raise KvplanError(f"{tok}: write the flag as {canonical}" if m.flag != "model" else f"{tok}: not taken here",
                              hint=hint)
        n = _takes(m.arity, m.explicit, words[i + 1:])
        if n == 0 and m.explicit is None and m.arity not in ("bool", "negatable", "optional"):
            raise KvplanError(f"{tok}: expected a value")
        flag_tokens = tuple(words[i:i + 1 + n])
        values = list(flag_tokens[1:]) or ([m.explicit] if m.explicit is not None else [])
        i += 1 + n
        arg = field_of.get(long)
        if arg is not None:
            engine[arg.name] = (not m.negated) if m.arity in ("bool", "negatable") else (
                values[0] if len(values) == 1 else " ".join(values))
        elif m.flag in NO_SIZING_EFFECT:
            ignored.append(flag_tokens)
        else:
            unmodelled.append((flag_tokens, f"kvplan does not model {long} ({_why(m.flag)}); the figures assume it is unset"))
    if found_model is None:
        raise KvplanError("MODEL: missing (a Hub repo id, a local directory with config.json, or a bundled spec id)")
    return ServeExtras(found_model if model.startswith("-") else None, engine, tuple(ignored), tuple(unmodelled))


def ignored_line(extras: ServeExtras) -> str | None:
    """The one line listing the ignored flags ("ignored (no effect on memory or sizing): --port
    8000, --host 0.0.0.0"), None when there are none."""
    if not extras.ignored:
        return None
    import shlex

    return f"{IGNORED_WORDS}: " + ", ".join(shlex.join(t) for t in extras.ignored)


def apply(plan, extras: ServeExtras):
    """``plan`` (capacity.estimate.Plan) with the flags of ``extras`` it did not size: each
    unmodelled flag an Approximation (exact false in every output), the ignored ones one warning
    line, both kept for the serve line (Plan.serve_extras)."""
    if not extras.ignored and not extras.unmodelled:
        return plan
    from kvplan.model.spec import Approximation, ApproximationKind

    approximations = plan.approximations + tuple(
        Approximation(kind=ApproximationKind.UNMODELLED_FLAG, reason=why) for _, why in extras.unmodelled)
    line = ignored_line(extras)
    if line:
        plan.warnings.append(line)
    return replace(plan, approximations=approximations, serve_extras=extras.serve_tokens)
