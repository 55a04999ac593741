"""In-place edits done by helpers: functions of the same module, methods of the class and
functions of other linted modules (``from .rotary import apply_rotary``).

``backward`` often calls ``_reduce(grad_output)`` where ``_reduce`` does
``dist.all_reduce(x)`` (or ``x.mul_(...)``). Each helper gets a summary, once: which of its
parameters it modifies in place (following helpers it calls, a few levels deep). A call
passing a tensor in such a position is then an in-place edit of that tensor.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from gradsmith.linter._flow import Flow, Val
from gradsmith.linter._kernels import is_custom_op, is_kernel, launched, stored_params
from gradsmith.linter._source import SourceFile
from gradsmith.linter._walk import run

_MAX_DEPTH = 3
#: torch.distributed collectives that write into their first tensor argument.
COLLECTIVES = frozenset(
    """all_reduce broadcast reduce all_gather_into_tensor reduce_scatter_tensor
    all_to_all_single all_reduce_coalesced recv irecv _all_gather_base _reduce_scatter_base""".split()
)
#: How a write by one of the COLLECTIVES is described (directly or through a helper).
COLLECTIVE = "(in-place collective)"


def is_collective(what: str) -> bool:
    """Whether a write's description says a collective made it (and nothing else did)."""
    return what.endswith(COLLECTIVE)


class Helpers:
    """Summaries of the helpers visible from one Function class.

    Args:
        source: The module the Function is defined in.
        cls: The Function's class (its own methods are helpers too).
        resolve: Qualifier of dotted names to torch names (see ``Facts.resolver``).
        mutations: ``mutations(stmt, flow, helpers)`` from the in-place rules.
    """

    def __init__(self, source: SourceFile, cls: ast.ClassDef | None, resolve, mutations,
                 kernels: Callable[[ast.expr], ast.FunctionDef | None] | None = None,
                 sym_of: dict | None = None, passed: Callable | None = None) -> None:
        self.source = source
        self.functions = source.functions
        self.kernels = kernels
        self.methods = {s.name: s for s in (cls.body if cls is not None else ())
                        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.cls_name = cls.name if cls is not None else None
        self.resolve = resolve
        self.mutations = mutations
        self.sym_of = sym_of  # all linted modules: helpers imported from them are followed
        self.passed = passed  # `ctx.fn(...)`: the function the call sites hand forward
        self._summary: dict[int, dict[int, bool]] = {}
        self._optional: dict[int, set[int]] = {}  # parameters written only by option
        self._collective: dict[int, set[int]] = {}  # parameters written only by collectives
        self._busy: set[int] = set()
        self._foreign: dict[int, Helpers] = {}

    def target(self, call: ast.Call) -> tuple[ast.FunctionDef, int] | None:
        """The helper ``call`` runs and how many leading parameters are bound (self/cls)."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return self.functions[func.id], 0
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in ("self", "cls", self.cls_name) and func.attr in self.methods:
            node = self.methods[func.attr]
            if func.attr in ("forward", "backward", "setup_context", "jvp", "vjp"):
                return None
            decorators = {getattr(d, "id", None) for d in node.decorator_list}
            bound = 0 if "staticmethod" in decorators else 1
            return node, bound
        if self.sym_of is not None and self.kernels is not None \
                and isinstance(func, (ast.Name, ast.Attribute)):
            node = self.kernels(func)  # a function of another linted module
            if isinstance(node, ast.FunctionDef) and not is_kernel(node):
                return node, 0
        if self.passed is not None and isinstance(func, (ast.Name, ast.Attribute)):
            found = self.passed(call)  # (def, its module's symbols)
            if found is not None and not is_kernel(found[0]):
                learn = getattr(self.kernels, "learn", None)
                if learn is not None:
                    learn(found[0], found[1])  # its calls resolve in its own module
                return found[0], 0
        return None

    def _home(self, node: ast.FunctionDef) -> Helpers:
        """The summaries of ``node``'s own module (its calls resolve there, not here)."""
        owner = getattr(self.kernels, "owner", lambda _node: None)(node)
        if owner is None or owner.source is self.source:
            return self
        home = self._foreign.get(id(owner))
        if home is None:
            from gradsmith.linter._facts import torchish
            from gradsmith.linter._kernels import finder

            home = self._foreign[id(owner)] = Helpers(
                owner.source, None, torchish(owner), self.mutations,
                finder(owner, self.sym_of), self.sym_of)
        return home

    def edits(self, call: ast.Call, depth: int = 0) -> list[tuple[ast.expr, str, bool]]:
        """(argument, description, proven tensor) for each argument ``call`` edits in place."""
        head = launched(call)
        if head is not None:
            return self._launch(call, head)
        found = self.target(call)
        if found is None or depth > _MAX_DEPTH:
            return []
        node, bound = found
        home = self._home(node)
        summary = home.summary(node, depth)
        optional = home._optional.get(id(node), set())
        collective = home._collective.get(id(node), set())
        option = _option_value(node, call, bound) if optional else True
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        # a keyword names the parameter it fills (`group(g, idx, out=buf)`); a Python
        # helper's `out=x if inplace else None` is the caller's option, read by the rule
        custom = declared_mutations(node) is not None
        by_name = {k.arg: k.value for k in call.keywords
                   if k.arg and (custom or not isinstance(k.value, ast.IfExp))}
        out = []
        for index, proven in summary.items():
            pos = index - bound
            if 0 <= pos < len(call.args) and not any(
                    isinstance(a, ast.Starred) for a in call.args[:pos + 1]):
                arg = call.args[pos]
            elif pos >= len(call.args) and index < len(params) and params[index] in by_name:
                arg = by_name[params[index]]  # `group(g, idx, out=buf)`
            else:
                continue
            if index not in optional:
                how = COLLECTIVE if index in collective else "(in place)"
                out.append((arg, f"`{node.name}()` {how}", proven))
            elif option is not False:  # written only when the helper's option is on
                out.append((arg, f"`{node.name}()` (`inplace` option)", proven))
        return out

    def _launch(self, call: ast.Call, head: ast.expr) -> list[tuple[ast.expr, str, bool]]:
        """Arguments a Triton launch ``kernel[grid](...)`` stores through (kernel read here)."""
        kernel = self.kernels(head) if self.kernels is not None else None
        if kernel is None and isinstance(head, ast.Name):
            kernel = self.functions.get(head.id)
        if kernel is None or not is_kernel(kernel):
            return []
        params = [a.arg for a in (*kernel.args.posonlyargs, *kernel.args.args)]
        by_name = {k.arg: k.value for k in call.keywords if k.arg}

        defaults = dict(zip(params[len(params) - len(kernel.args.defaults):], kernel.args.defaults))

        def arg_of(index: int) -> ast.expr | None:
            if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
                return None
            if index < len(call.args):
                return call.args[index]
            return by_name.get(params[index], defaults.get(params[index]))

        out = []
        for index, guards in stored_params(kernel).items():
            arg = arg_of(index)
            if arg is None:
                continue
            verdicts = [_flags_verdict(flags, params, arg_of) for flags in guards]
            if True in verdicts:
                out.append((arg, f"kernel `{kernel.name}`", True))
            elif None in verdicts:  # written only when a launch option is on
                flag = sorted(next(f for f, v in zip(guards, verdicts) if v is None))[0]
                if "==" in flag:  # `operation==1`, or `operation!=1` for its else
                    option = flag[1:].replace("==", "!=") if flag.startswith("!") else flag
                else:
                    option = f"{flag[1:]}=False" if flag.startswith("!") else f"{flag}="
                out.append((arg, f"`{option}` of kernel `{kernel.name}`", True))
        return out

    def summary(self, node: ast.FunctionDef, depth: int = 0) -> dict[int, bool]:
        """Parameter index -> whether it is proven a tensor, for parameters edited in place."""
        key = id(node)
        if key in self._summary:
            return self._summary[key]
        if key in self._busy:
            return {}
        self._busy.add(key)
        params = [a.arg for a in (*node.args.posonlyargs, *node.args.args)]
        declared = declared_mutations(node)
        if declared is not None:  # a custom op: its schema says what it writes
            self._busy.discard(key)
            result = self._summary[key] = {params.index(p): True for p in declared
                                           if p in params}
            self._optional[key] = self._collective[key] = set()
            return result
        flow = Flow(None, self.resolve)
        flow.env = {p: Val(frozenset({f"input:{p}"}), None) for p in params}
        result: dict[int, bool] = {}
        always: set[int] = set()  # written whatever the helper's in-place option says
        other: set[int] = set()  # written by something other than a collective
        scoped, chosen = option_scope(node)

        def nested(call: ast.Call):
            return self.edits(call, depth + 1)

        def visit(stmt, flow: Flow) -> None:
            for where, target, what, proven in self.mutations(stmt, flow, nested):
                val = flow.eval(target)
                optional = id(where) in scoped or id(stmt) in scoped or "option" in what or (
                    isinstance(target, ast.Name) and target.id in chosen)
                for origin in val.origins:
                    if origin.startswith("input:") and origin[6:] in params:
                        index = params.index(origin[6:])
                        result[index] = result.get(index, False) or proven or bool(val.tensor)
                        if not optional:
                            always.add(index)
                        if not is_collective(what):
                            other.add(index)

        run(flow, node.body, visit)
        self._busy.discard(key)
        self._summary[key] = result
        self._optional[key] = set(result) - always
        self._collective[key] = set(result) - other
        return result


_OPTION_WORD = re.compile(r"in_?place", re.I)


def declared_mutations(node: ast.FunctionDef) -> list[str] | None:
    """The parameters a custom op declares it writes (``mutates_args=("out",)`` of
    ``@torch.library.custom_op`` or a project's wrapper of it), None for other functions or
    when the declaration is not a literal (``"unknown"`` included)."""
    if not is_custom_op(node):
        return None
    for dec in node.decorator_list:
        if not isinstance(dec, ast.Call):
            continue
        value = next((k.value for k in dec.keywords if k.arg == "mutates_args"), None)
        if isinstance(value, (ast.Tuple, ast.List, ast.Set)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts):
            return [e.value for e in value.elts]
    return None


def option_scope(func: ast.AST) -> tuple[set[int], set[str]]:
    """What runs only by a helper's in-place option: nodes under ``if <...inplace...>:`` (either
    branch) or in a branch of ``... if inplace else ...``, and names bound there or to
    ``x if inplace else y`` (``out = x if inplace else torch.empty_like(x)``, also inside
    another conditional: ``(x if inplace else torch.empty_like(x)) if want else None``)."""
    nodes: set[int] = set()
    names: set[str] = set()
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.IfExp)) and _OPTION_WORD.search(ast.unparse(node.test)):
            branches = (node.body, node.orelse) if isinstance(node, ast.If) else (
                [node.body], [node.orelse])
            for branch in branches:
                for sub in branch:
                    for inner in ast.walk(sub):
                        nodes.add(id(inner))
                        if isinstance(inner, ast.Name) and isinstance(inner.ctx, ast.Store):
                            names.add(inner.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.IfExp) and any(
                isinstance(sub, ast.IfExp) and _OPTION_WORD.search(ast.unparse(sub.test))
                for sub in ast.walk(node.value)):  # also nested: `(x if inplace else
            names.update(t.id for t in node.targets  # empty_like(x)) if want else None`
                         if isinstance(t, ast.Name))
    return nodes, names


def _option_value(helper: ast.FunctionDef, call: ast.Call, bound: int) -> bool | None:
    """The helper's in-place option at ``call``: False/True when a constant (passed or the
    default), None when it cannot be told (a variable, or no parameter by that name)."""
    args = helper.args
    params = [a.arg for a in (*args.posonlyargs, *args.args)]
    defaults = dict(zip(params[len(params) - len(args.defaults):], args.defaults))
    defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None})
    names = [p for p in (*params, *(a.arg for a in args.kwonlyargs)) if _OPTION_WORD.search(p)]
    if len(names) != 1:
        return None
    name = names[0]
    value = next((k.value for k in call.keywords if k.arg == name), None)
    if value is None and name in params and 0 <= params.index(name) - bound < len(call.args):
        value = call.args[params.index(name) - bound]
        if any(isinstance(a, ast.Starred) for a in call.args[: params.index(name) - bound + 1]):
            return None
    if value is None:
        value = defaults.get(name)
    if isinstance(value, ast.Constant):
        return bool(value.value)
    return None


def _flags_verdict(flags, params: list[str], arg_of) -> bool | None:
    """Whether a store guarded by ``flags`` happens: True (no flag, or every flag passed as a
    constant that selects it: true for ``FLAG``, false for ``!FLAG``), False (some flag passed
    as a constant that rules it out), None (cannot tell)."""
    verdict: bool | None = True
    for flag in flags:
        name, wanted = (flag[1:], False) if flag.startswith("!") else (flag, True)
        name, _, literal = name.partition("==")  # `operation==0`: selected by value
        value = arg_of(params.index(name)) if name in params else None
        if isinstance(value, ast.Constant):
            on = value.value == ast.literal_eval(literal) if literal else bool(value.value)
            if on is not wanted:
                return False
        else:
            verdict = None
    return verdict


HelperEdits = Callable[[ast.Call], list[tuple[ast.expr, str, bool]]]
__all__ = ["COLLECTIVE", "COLLECTIVES", "HelperEdits", "Helpers", "is_collective"]
