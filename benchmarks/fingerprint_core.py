"""The pieces of benchmarks/vllm_fingerprints.py that do not touch the network: normalise a
function's source with ``ast`` and hash it, find a qualified name in a module, read a file out
of a wheel without unpacking it, and extract a release's `vllm serve` flags.

Nothing here imports vLLM: the source is parsed, never executed.
"""

from __future__ import annotations

import ast
import hashlib
import io
import zipfile
from pathlib import Path
from typing import Callable, Iterable, Optional

# --- normalised source and its hash ------------------------------------------------------------


def _strip_docstring(body: list) -> list:
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body


def _canon(node) -> object:
    """A nested tuple for an AST node that depends only on the code: no line numbers, no
    comments (ast drops them), no docstrings, and fields that are None or empty left out (so
    the result does not depend on which Python's ast added an empty field, e.g. type_params)."""
    if isinstance(node, ast.AST):
        items = []
        for name in node._fields:
            value = getattr(node, name, None)
            if name == "body" and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
                value = _strip_docstring(list(value))
            if name == "kind" and isinstance(node, ast.Constant):
                continue  # u"" vs "": the same string
            if value is None or value == []:
                continue
            items.append((name, _canon(value)))
        return (type(node).__name__, tuple(items))
    if isinstance(node, list):
        return tuple(_canon(x) for x in node)
    if isinstance(node, (str, int, float, complex, bool, bytes)) or node is Ellipsis:
        return (type(node).__name__, repr(node))
    return repr(node)


def fingerprint_nodes(nodes: Iterable[ast.AST]) -> str:
    """The first 16 hex digits of sha256 over the normalised nodes (in order)."""
    text = repr(tuple(_canon(n) for n in nodes))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _assigned_names(node: ast.AST) -> tuple[str, ...]:
    if isinstance(node, ast.Assign):
        return tuple(t.id for t in node.targets if isinstance(t, ast.Name))
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return (node.target.id,)
    if isinstance(node, getattr(ast, "TypeAlias", ())):
        return (node.name.id,)
    return ()


def _matches(node: ast.AST, name: str) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    return name in _assigned_names(node)


def _children(body: list, name: str) -> list:
    """The statements of ``body`` that define ``name``, looking through module-level if/try
    blocks (``if TYPE_CHECKING:``, version switches), in source order."""
    out = []
    for node in body:
        if _matches(node, name):
            out.append(node)
        elif isinstance(node, (ast.If, ast.Try)):
            for part in ("body", "orelse", "finalbody"):
                out += _children(getattr(node, part, []) or [], name)
            for handler in getattr(node, "handlers", []) or []:
                out += _children(handler.body, name)
    return out


def locate(tree: ast.Module, qualname: str) -> list:
    """The definitions of ``qualname`` ("Worker.determine_available_memory", "CacheDType",
    "CacheConfig.block_size") in ``tree``: functions, classes and assignments, a dotted name
    looking inside classes. Empty when it is not there."""
    nodes = [tree]
    for part in qualname.split("."):
        found = []
        for node in nodes:
            found += _children(getattr(node, "body", []), part)
        nodes = [n for n in found]
        if not nodes:
            return []
    return nodes


def fingerprint_source(text: Optional[str], qualname: str) -> Optional[str]:
    """The fingerprint of ``qualname`` in module source ``text`` (None when the file or the
    name is absent). Comments, docstrings, blank lines and formatting do not count."""
    if text is None:
        return None
    nodes = locate(ast.parse(text), qualname)
    return fingerprint_nodes(nodes) if nodes else None


# --- reading a release's files ----------------------------------------------------------------


class WheelFiles:
    """The .py files of a vLLM wheel, read from the zip one at a time (nothing is unpacked)."""

    def __init__(self, wheel: Path):
        self._zip = zipfile.ZipFile(wheel)
        self._names = {n for n in self._zip.namelist() if n.startswith("vllm/") and n.endswith(".py")}

    def read(self, path: str) -> Optional[str]:
        """vllm/<path>'s text, or None when the wheel has no such file."""
        name = "vllm/" + path
        if name not in self._names:
            return None
        return io.TextIOWrapper(self._zip.open(name), encoding="utf-8").read()

    def paths(self, prefix: str) -> list[str]:
        """The .py paths (under vllm/) that start with ``prefix``."""
        return sorted(n[5:] for n in self._names if n[5:].startswith(prefix))

    def close(self) -> None:
        self._zip.close()


class TreeFiles:
    """The same reader over an unpacked source tree (/work/vllm-src/<v>/vllm)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def read(self, path: str) -> Optional[str]:
        p = self.root / path
        return p.read_text(encoding="utf-8") if p.is_file() else None

    def paths(self, prefix: str) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*.py")
                      if str(p.relative_to(self.root)).startswith(prefix))

    def close(self) -> None:
        pass


def fingerprints(files, sources: Iterable[tuple[str, str]]) -> dict[str, Optional[str]]:
    """"file::qualname" -> fingerprint (None: absent) for every (file, qualname) of ``sources``."""
    texts: dict[str, Optional[str]] = {}
    trees: dict[str, Optional[ast.Module]] = {}
    out: dict[str, Optional[str]] = {}
    for path, qual in sources:
        if path not in texts:
            texts[path] = files.read(path)
            trees[path] = ast.parse(texts[path]) if texts[path] is not None else None
        tree = trees[path]
        nodes = locate(tree, qual) if tree is not None else []
        out[f"{path}::{qual}"] = fingerprint_nodes(nodes) if nodes else None
    return out


# --- `vllm serve` flags ---------------------------------------------------------------------------
#
# vLLM builds its parser in engine/arg_utils.py EngineArgs.add_cli_args (add_argument calls,
# most with **get_kwargs(SomeConfig)["field"]) and AsyncEngineArgs.add_cli_args, plus
# entrypoints/openai/cli_args.py make_arg_parser (explicit add_argument calls and every field
# of FrontendArgs / BaseFrontendArgs). The arity of a config-field flag follows
# arg_utils.py _compute_kwargs: a dataclass -> one JSON value; bool | str | None -> optional
# value; bool -> --x/--no-x; tuple/list/set -> one or more values; anything else one value.

_BUILTIN_SCALARS = {"int", "float", "str", "dict", "Any", "bytes"}


class _TypeIndex:
    """Every class, dataclass and module-level type alias of the release, by name."""

    def __init__(self, files):
        self.aliases: dict[str, ast.AST] = {}
        self.dataclasses: set[str] = set()
        self.classes: dict[str, ast.ClassDef] = {}
        for path in files.paths(""):
            if not (path.startswith(("config/", "engine/", "entrypoints/", "attention/", "v1/attention",
                                     "compilation/", "model_executor/layers/quantization/__init__",
                                     "transformers_utils/", "utils/", "logprobs", "sampling_params",
                                     "platforms/interface", "lora/", "multimodal/", "distributed/",
                                     "pooling_params", "v1/", "plugins/", "reasoning/", "tool_parsers/",
                                     "profiler/", "ir/", "kernels/", "model_executor/layers/fused_moe/config",
                                     "tokenizers/", "renderers/"))):
                continue
            text = files.read(path)
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)
                    decos = [ast.unparse(d) for d in node.decorator_list]
                    if any(("dataclass" in d or d in ("config",) or d.startswith("config(")) for d in decos):
                        self.dataclasses.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    value = node.value
                    for name in _assigned_names(node):
                        if value is not None and isinstance(value, (ast.Subscript, ast.BinOp, ast.Name, ast.Attribute)):
                            self.aliases.setdefault(name, value)
                elif isinstance(node, getattr(ast, "TypeAlias", ())):
                    self.aliases.setdefault(node.name.id, node.value)

    def hints(self, ann: ast.AST, depth: int = 0) -> set[str]:
        """The kinds of type an annotation allows: {"bool", "str", "None", "list", "Literal",
        "dataclass", "int", ...} (unions and Annotated flattened, aliases followed)."""
        if depth > 8 or ann is None:
            return {"?"}
        if isinstance(ann, ast.Constant):
            if ann.value is None:
                return {"None"}
            if isinstance(ann.value, str):  # a string annotation
                try:
                    return self.hints(ast.parse(ann.value, mode="eval").body, depth + 1)
                except SyntaxError:
                    return {"?"}
            return {"?"}
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            return self.hints(ann.left, depth + 1) | self.hints(ann.right, depth + 1)
        if isinstance(ann, ast.Subscript):
            head = ast.unparse(ann.value).split(".")[-1]
            inner = ann.slice
            if head in ("Optional",):
                return self.hints(inner, depth + 1) | {"None"}
            if head == "Union":
                elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
                out: set[str] = set()
                for e in elts:
                    out |= self.hints(e, depth + 1)
                return out
            if head == "Annotated":
                first = inner.elts[0] if isinstance(inner, ast.Tuple) else inner
                return self.hints(first, depth + 1)
            if head == "Literal":
                return {"Literal"}
            if head in ("list", "List", "Sequence", "tuple", "Tuple", "set", "Set"):
                return {"list"}
            if head in ("dict", "Dict", "Mapping"):
                return {"dict"}
            if head in ("Callable", "type", "Type"):
                return {"other"}
            return self.hints(ann.value, depth + 1)
        name = ast.unparse(ann).split(".")[-1]
        if name in ("bool",):
            return {"bool"}
        if name in ("None", "NoneType"):
            return {"None"}
        if name in _BUILTIN_SCALARS:
            return {name}
        if name in ("list", "List", "tuple", "set"):
            return {"list"}
        if name in self.dataclasses:
            return {"dataclass"}
        if name in self.aliases and name not in self.classes:
            return self.hints(self.aliases[name], depth + 1)
        return {"other"}

    def arity(self, ann: ast.AST) -> str:
        """The `vllm serve` arity of a config field annotated ``ann`` (arg_utils.py _compute_kwargs)."""
        h = self.hints(ann)
        if "dataclass" in h:
            return "json"
        if h == {"bool", "str", "None"}:
            return "optional"
        if "bool" in h:
            return "negatable"
        if "Literal" in h:
            return "value"
        if "list" in h:
            return "list"
        return "value"

    def fields(self, cls_name: str, depth: int = 0) -> dict[str, ast.AST]:
        """field name -> annotation of a dataclass, its bases' fields first."""
        cls = self.classes.get(cls_name)
        if cls is None or depth > 6:
            return {}
        out: dict[str, ast.AST] = {}
        for base in cls.bases:
            out.update(self.fields(ast.unparse(base).split(".")[-1], depth + 1))
        for node in cls.body:
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                if ast.unparse(node.annotation).startswith("ClassVar"):
                    continue
                out[node.target.id] = node.annotation
        return out


def _kw(call: ast.Call, name: str) -> Optional[ast.AST]:
    for k in call.keywords:
        if k.arg == name:
            return k.value
    return None


def _explicit_arity(call: ast.Call) -> Optional[str]:
    """The arity an add_argument call's own keywords give (None: they do not say)."""
    action = _kw(call, "action")
    nargs = _kw(call, "nargs")
    if action is not None:
        a = ast.unparse(action)
        if "store_true" in a or "store_false" in a or "store_const" in a:
            return "bool"
        if "BooleanOptionalAction" in a:
            return "negatable"
        if "append" in a:
            return "value"
    if nargs is not None:
        n = ast.unparse(nargs).strip("'\"")
        if n in ("+", "*"):
            return "list"
        if n == "?":
            return "optional"
        return "value"
    if action is not None:
        return "value"
    return None


def _kwargs_source(call: ast.Call, env: dict[str, str]) -> tuple[Optional[str], Optional[str]]:
    """(config class, field) of a ``**model_kwargs["field"]`` argument, via ``env`` (the
    function's ``model_kwargs = get_kwargs(ModelConfig)`` assignments)."""
    for k in call.keywords:
        value = k.value
        if k.arg is None and isinstance(value, ast.Dict):  # **{**kwargs["field"], "default": None}
            value = next((v for key, v in zip(value.keys, value.values) if key is None), value)
        if k.arg is None and isinstance(value, ast.Subscript):
            base = value.value
            key = value.slice
            if isinstance(base, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return env.get(base.id), key.value
    return None, None


def _get_kwargs_env(func: ast.AST) -> dict[str, str]:
    """var -> config class for ``var = get_kwargs(Cls)`` in a function."""
    env = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            callee = ast.unparse(node.value.func).split(".")[-1]
            if callee == "get_kwargs" and node.value.args:
                cls = ast.unparse(node.value.args[0]).split(".")[-1]
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        env[t.id] = cls
    return env


def _kwarg_overrides(func: ast.AST) -> dict[str, str]:
    """field -> arity set by ``kwargs["field"]["action"|"nargs"] = ...`` / ``del ...["nargs"]``
    statements (cli_args.py _customize_cli_kwargs, arg_utils.py special cases)."""
    out: dict[str, str] = {}

    def target(t) -> tuple[Optional[str], Optional[str]]:
        if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Subscript):
            inner, outer = t.value.slice, t.slice
            if isinstance(inner, ast.Constant) and isinstance(outer, ast.Constant):
                return inner.value, outer.value
        return None, None

    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                field, what = target(t)
                if field is None:
                    continue
                v = ast.unparse(node.value)
                if what == "action":  # a custom Action class keeps the field's nargs
                    if "store_true" in v or "store_false" in v:
                        out[field] = "bool"
                    elif "BooleanOptional" in v:
                        out[field] = "negatable"
                    elif "append" in v:
                        out[field] = "value"
                elif what == "nargs":
                    n = v.strip("'\"")
                    out[field] = "list" if n in ("+", "*") else "optional" if n == "?" else "value"
        elif isinstance(node, ast.Delete):
            for t in node.targets:
                field, what = target(t)
                if field is not None and what == "nargs":
                    out.setdefault(field, "value")
    return out


def _option_strings(call: ast.Call) -> list[str]:
    out = []
    for a in call.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-"):
            out.append(a.value)
    return out


def _functions(tree: ast.Module, names: set[str]) -> list[tuple[str, ast.AST]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            out.append((node.name, node))
    return out


def _add_calls(func: ast.AST, types: _TypeIndex, arities: dict, shorts: dict, overrides: dict) -> None:
    env = _get_kwargs_env(func)
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        opts = _option_strings(node)
        longs = [o[2:] for o in opts if o.startswith("--")]
        if not longs:
            continue
        kind = _explicit_arity(node)
        cls, field = _kwargs_source(node, env)
        if kind is None and field is not None:
            if field in overrides:
                kind = overrides[field]
            elif cls is not None:
                ann = types.fields(cls).get(field)
                kind = types.arity(ann) if ann is not None else "value"
        if kind is None:
            kind = "value"
        for long in longs:
            arities[long] = kind
        for o in opts:
            if not o.startswith("--"):
                shorts[o] = longs[0]


def _cli_args_path(files) -> str:
    """The module `vllm serve` takes make_arg_parser from (entrypoints/cli/serve.py's import:
    entrypoints/openai/cli_args.py up to 0.2x, entrypoints/common/cli_args.py later)."""
    text = files.read("entrypoints/cli/serve.py")
    if text:
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module and any(a.name == "make_arg_parser" for a in node.names):
                return node.module.removeprefix("vllm.").replace(".", "/") + ".py"
    return "entrypoints/openai/cli_args.py"


def serve_flags(files) -> tuple[dict[str, str], dict[str, str]]:
    """(long flag without dashes -> arity, short alias -> long flag) of a release's `vllm serve`.

    Reads engine/arg_utils.py (EngineArgs.add_cli_args, AsyncEngineArgs.add_cli_args) and
    entrypoints/openai/cli_args.py (make_arg_parser's own add_argument calls, the fields of
    FrontendArgs and its bases, which its add_cli_args loop turns into flags).
    """
    types = _TypeIndex(files)
    arities: dict[str, str] = {}
    shorts: dict[str, str] = {}
    arg_utils = ast.parse(files.read("engine/arg_utils.py"))
    cli_text = files.read(_cli_args_path(files))
    cli = ast.parse(cli_text) if cli_text else ast.Module(body=[], type_ignores=[])
    serve_text = files.read("entrypoints/cli/serve.py")
    serve = ast.parse(serve_text) if serve_text else ast.Module(body=[], type_ignores=[])
    overrides: dict[str, str] = {}
    for _, f in _functions(arg_utils, {"add_cli_args"}) + _functions(cli, {"_customize_cli_kwargs", "add_cli_args",
                                                                            "make_arg_parser"}):
        overrides.update(_kwarg_overrides(f))
    for _, f in _functions(arg_utils, {"add_cli_args"}):
        _add_calls(f, types, arities, shorts, overrides)
    # frontend: every field of FrontendArgs (and bases) is a flag (cli_args.py add_cli_args loop)
    front_overrides = {}
    for _, f in _functions(cli, {"_customize_cli_kwargs", "add_cli_args"}):
        front_overrides.update(_kwarg_overrides(f))
    if "FrontendArgs" in types.classes:
        for field, ann in types.fields("FrontendArgs").items():
            long = field.replace("_", "-")
            arities.setdefault(long, front_overrides.get(field) or types.arity(ann))
    # frontend "flags" extras: kwargs["field"]["flags"] = ["-x"]
    for _, f in _functions(cli, {"_customize_cli_kwargs", "add_cli_args"}):
        for node in ast.walk(f):
            if isinstance(node, ast.Assign) and isinstance(node.value, (ast.List, ast.Tuple)):
                for t in node.targets:
                    if (isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "flags"
                            and isinstance(t.value, ast.Subscript) and isinstance(t.value.slice, ast.Constant)):
                        for e in node.value.elts:
                            if isinstance(e, ast.Constant) and str(e.value).startswith("-") and not str(e.value).startswith("--"):
                                shorts[e.value] = t.value.slice.value.replace("_", "-")
    for _, f in _functions(cli, {"make_arg_parser"}) + _functions(serve, {"subparser_init"}):
        _add_calls(f, types, arities, shorts, overrides)
    arities.pop("help", None)
    shorts.pop("-h", None)
    return arities, shorts


def flag_lines(arities: dict[str, str]) -> dict[str, str]:
    """arity -> space-separated sorted flag names (the compact stored form)."""
    out: dict[str, list[str]] = {}
    for name, kind in arities.items():
        out.setdefault(kind, []).append(name)
    return {k: " ".join(sorted(v)) for k, v in sorted(out.items())}


Reader = Callable[[str], Optional[str]]


def literal_values(files, path: str, name: str) -> Optional[list[str]]:
    """The string values of a module-level ``name = Literal[...]`` in vllm/<path> (CacheDType in
    config/cache.py, ModelDType in config/model.py), or None when it is not one."""
    text = files.read(path)
    if text is None:
        return None
    nodes = locate(ast.parse(text), name)
    for node in nodes:
        value = getattr(node, "value", None)
        if isinstance(value, ast.Subscript) and ast.unparse(value.value).endswith("Literal"):
            elts = value.slice.elts if isinstance(value.slice, ast.Tuple) else [value.slice]
            return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return None
