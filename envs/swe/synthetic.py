"""Synthetic one-line bugs and scripted demonstrations: the warm-start recipe of `--task swe`.

`make_bug(rng)` writes a tiny module (1-3 functions from `FAMILIES`, often with a docstring,
ruff-style layout) plus its pytest file, injects a one-line bug into one function and writes
the issue the way swe-mini does:

    mul(2, 3) returns 5; it should return 6.

Bug kinds (`mutations`): operator and comparison swaps, integer constants +-1, a dropped or
added `+ 1`/`- 1`, and/or and min/max-style word swaps, a parameter used in place of another,
swapped call arguments, a changed one-character string, a dropped `not`, dropped parentheses.
A mutant is kept only if it changes behaviour: the correct and the buggy module are executed
in-process on sampled inputs (harness-generated code only, never model output) and the issue
quotes the first input where they differ. No synthetic function shares its name with a
swe-mini function (those instances are for RL and evaluation, not warm-start).

`demonstrations(rng, n)` plays each bug through the real scaffold (`SweEnv`) on an in-memory
workspace with a scripted agent: view the module, replace the buggy line, submit; so the
transcripts hold exactly the observations the env produces. Noise, for RL headroom: with
probability `wrong_fix_rate` (default 0.2) the scripted fix is a plausible WRONG one (another
mutation of the buggy line that still fails the tests), submitted all the same.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from envs.base import Message
from envs.swe.instance import SWEInstance
from envs.swe.scaffold import SweEnv, play
from envs.swe.workspace_memory import InMemoryRuntime, file_diff
from envs.tools import format_tool_call

WRONG_FIX_RATE = 0.2
"""Default share of demonstrations whose scripted fix is wrong (reward 0 if graded)."""
DOCSTRING_RATE = 0.6
"""Share of functions written with their one-line docstring (swe-mini functions have them)."""


def _ints(k: int, lo: int = -9, hi: int = 9) -> Callable[[random.Random], tuple]:
    return lambda rng: tuple(rng.randint(lo, hi) for _ in range(k))


def _list(lo: int = -9, hi: int = 9, min_len: int = 1, extra: Callable | None = None) -> Callable:
    def sample(rng: random.Random) -> tuple:
        xs = [rng.randint(lo, hi) for _ in range(rng.randint(min_len, 4))]
        return (xs, *(extra(rng) if extra else ()))

    return sample


def _bounds(rng: random.Random) -> tuple:
    lo = rng.randint(-5, 5)
    return (rng.randint(-9, 12), lo, lo + rng.randint(1, 6))


def _word(rng: random.Random, alphabet: str = "abcde", lo: int = 1) -> str:
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(lo, 5)))


def _words(rng: random.Random) -> list[str]:
    return [_word(rng) for _ in range(rng.randint(1, 3))]


@dataclass(frozen=True)
class Family:
    """A correct function: name choices, parameters, body lines, an input sampler, a docstring;
    `rename`: whether single-letter parameters may be renamed without losing their meaning."""

    names: tuple[str, ...]
    params: tuple[str, ...]
    body: tuple[str, ...]
    sample: Callable[[random.Random], tuple]
    doc: str
    rename: bool = True


def F(names: str, params: str, body: str, sample, doc: str, rename: bool = True) -> Family:
    """Compact family constructor: names/params space-separated, body lines separated by `|`."""
    return Family(tuple(names.split()), tuple(params.split()), tuple(body.split("|")), sample, doc, rename)


I1, I2, N1 = _ints(1), _ints(2), _ints(1, 0, 12)
# fmt: off
FAMILIES: tuple[Family, ...] = (
    F("add plus", "a b", "return a + b", I2, "Sum of a and b."),
    F("sub minus", "a b", "return a - b", I2, "a minus b."),
    F("mul times product", "a b", "return a * b", I2, "Product of a and b."),
    F("double twice", "x", "return 2 * x", I1, "Twice x."),
    F("triple", "x", "return 3 * x", I1, "Three times x."),
    F("sq squared", "x", "return x * x", I1, "x squared."),
    F("cube", "x", "return x * x * x", I1, "x cubed."),
    F("inc succ", "n", "return n + 1", I1, "The integer after n."),
    F("dec pred", "n", "return n - 1", I1, "The integer before n."),
    F("half", "n", "return n // 2", _ints(1, 0, 20), "n halved, rounded down."),
    F("is_even", "n", "return n % 2 == 0", I1, "True when n is even."),
    F("is_odd", "n", "return n % 2 == 1", I1, "True when n is odd."),
    F("is_pos is_positive", "x", "return x > 0", I1, "True when x is above zero."),
    F("is_neg is_negative", "x", "return x < 0", I1, "True when x is below zero."),
    F("is_zero", "x", "return x == 0", _ints(1, -2, 2), "True when x is zero."),
    F("same equal", "a b", "return a == b", _ints(2, 0, 2), "True when a equals b."),
    F("both_pos", "a b", "return a > 0 and b > 0", I2, "True when a and b are both positive."),
    F("any_pos either_pos", "a b", "return a > 0 or b > 0", I2, "True when a or b is positive."),
    F("max2 larger bigger", "a b", "if a > b:|    return a|return b", I2, "The larger of a and b."),
    F("min2 smaller", "a b", "if a < b:|    return a|return b", I2, "The smaller of a and b."),
    F("abs_val magnitude", "x", "if x < 0:|    return -x|return x", I1, "x without its sign."),
    F("sign", "x", "if x > 0:|    return 1|if x < 0:|    return -1|return 0",
      I1, "1, -1 or 0 by the sign of x."),
    F("bound limit", "x lo hi", "if x < lo:|    return lo|if x > hi:|    return hi|return x", _bounds,
      "x moved into [lo, hi].", rename=False),
    F("in_range between", "x lo hi", "return lo <= x <= hi",
      _bounds, "True when lo <= x <= hi.", rename=False),
    F("total sum_all", "xs", "s = 0|for x in xs:|    s += x|return s", _list(min_len=0), "Sum of the items."),
    F("count_pos", "xs", "n = 0|for x in xs:|    if x > 0:|        n += 1|return n", _list(min_len=0),
      "How many items are positive."),
    F("largest max_of", "xs", "m = xs[0]|for x in xs:|    if x > m:|        m = x|return m", _list(),
      "The largest item."),
    F("smallest min_of", "xs", "m = xs[0]|for x in xs:|    if x < m:|        m = x|return m", _list(),
      "The smallest item."),
    F("first head", "xs", "return xs[0]", _list(), "The first item."),
    F("last tail", "xs", "return xs[-1]", _list(), "The last item."),
    F("second", "xs", "return xs[1]", _list(min_len=2), "The second item."),
    F("size length", "xs", "return len(xs)", _list(min_len=0), "Number of items."),
    F("avg mean_of", "xs", "return sum(xs) / len(xs)", _list(), "Mean of the items."),
    F("tri triangle", "n", "return n * (n + 1) // 2", N1, "1 + 2 + ... + n."),
    F("fact factorial", "n", "r = 1|for i in range(1, n + 1):|    r *= i|return r",
      _ints(1, 0, 7), "n factorial."),
    F("pow2", "n", "return 2 ** n", _ints(1, 0, 8), "2 to the power n."),
    F("area rect_area", "w h", "return w * h", _ints(2, 0, 9), "Area of a w by h rectangle.", rename=False),
    F("perimeter", "w h", "return 2 * (w + h)",
      _ints(2, 0, 9), "Perimeter of a w by h rectangle.", rename=False),
    F("avg2 mid", "a b", "return (a + b) / 2", I2, "The midpoint of a and b."),
    F("dist gap", "a b", "return abs(a - b)", I2, "Distance between a and b."),
    F("last_digit", "n", "return n % 10", _ints(1, 0, 99), "The last decimal digit of n."),
    F("num_digits", "n", "return len(str(n))", _ints(1, 0, 999), "How many digits n has."),
    F("to_secs", "m", "return m * 60", _ints(1, 0, 9), "m minutes in seconds."),
    F("to_cents", "d", "return d * 100", _ints(1, 0, 9), "d dollars in cents."),
    F("hours", "mins", "return mins // 60", _ints(1, 0, 300), "Whole hours in mins minutes."),
    F("percent", "part whole", "return 100 * part / whole", lambda r: (r.randint(0, 9), r.randint(1, 9)),
      "part as a percentage of whole."),
    F("is_multiple", "n k", "return n % k == 0", lambda r: (r.randint(0, 20), r.randint(1, 5)),
      "True when k divides n.", rename=False),
    F("repeat", "s n", "return s * n", lambda r: (_word(r), r.randint(0, 3)), "s repeated n times."),
    F("shout", "s", "return s.upper() + '!'",
      lambda r: (_word(r),), "s in capitals with a '!'.", rename=False),
    F("count_even", "xs", "return len([x for x in xs if x % 2 == 0])",
      _list(min_len=0), "How many items are even."),
    F("evens", "xs", "return [x for x in xs if x % 2 == 0]", _list(min_len=0), "The even items, in order."),
    F("positives", "xs", "return [x for x in xs if x > 0]",
      _list(min_len=0), "The positive items, in order."),
    F("count_over", "xs t", "return len([x for x in xs if x > t])", _list(min_len=0, extra=_ints(1)),
      "How many items exceed t.", rename=False),
    F("all_pos", "xs", "return all(x > 0 for x in xs)", _list(), "True when every item is positive."),
    F("has_neg", "xs", "return any(x < 0 for x in xs)", _list(), "True when some item is negative."),
    F("spread", "xs", "return max(xs) - min(xs)", _list(), "Largest minus smallest item."),
    F("uniq_sorted", "xs", "return sorted(set(xs))", _list(0, 4), "The distinct items, sorted."),
    F("take", "xs n", "return xs[:n]", _list(extra=_ints(1, 0, 4)), "The first n items.", rename=False),
    F("drop", "xs n", "return xs[n:]",
      _list(extra=_ints(1, 0, 4)), "All but the first n items.", rename=False),
    F("last_n", "xs n", "return xs[-n:]", _list(extra=_ints(1, 1, 4)), "The last n items.", rename=False),
    F("pairs", "xs", "return [(xs[i], xs[i + 1]) for i in range(len(xs) - 1)]", _list(min_len=0),
      "Neighbouring pairs of items."),
    F("index_of position", "xs v", "for i in range(len(xs)):|    if xs[i] == v:|        return i|return -1",
      _list(0, 5, extra=_ints(1, 0, 5)), "Index of v in xs, or -1.", rename=False),
    F("prefix_sums running", "xs", "out = []|s = 0|for x in xs:|    s += x|    out.append(s)|return out",
      _list(min_len=0), "Running totals of the items."),
    F("zip_sum", "xs ys", "return [x + y for x, y in zip(xs, ys)]", lambda r: (_list()(r)[0], _list()(r)[0]),
      "Item-wise sums of xs and ys."),
    F("first_word", "s", "return s.split()[0]", lambda r: (" ".join(_words(r)),), "The first word of s."),
    F("last_char", "s", "return s[-1]", lambda r: (_word(r),), "The last character of s."),
    F("reverse_str", "s", "return s[::-1]", lambda r: (_word(r),), "s backwards."),
    F("cap_first", "s", "return s[:1].upper() + s[1:]",
      lambda r: (_word(r),), "s with a capital first letter."),
    F("under_to_space", "s", "return s.replace('_', ' ')", lambda r: ("_".join(_words(r)),),
      "s with underscores as spaces."),
    F("join_words", "words", "return ' '.join(words)", lambda r: (_words(r),), "The words joined by spaces."),
    F("count_char", "s c", "return sum(1 for x in s if x == c)", lambda r: (_word(r, "ab"), "a"),
      "How often c occurs in s.", rename=False),
    F("is_blank", "s", "return not s.strip()", lambda r: (r.choice(["", " ", "a", " b ", "ab"]),),
      "True when s is empty or spaces.", rename=False),
    F("get_or", "d k default", "if k in d:|    return d[k]|return default",
      lambda r: ({c: i for i, c in enumerate("ab") if r.random() < 0.7}, r.choice("abc"), 0),
      "d[k], or default when k is missing.", rename=False),
    F("total_values", "d", "return sum(d.values())",
      lambda r: ({c: r.randint(0, 9) for c in _word(r, "abc")},),
      "Sum of the values of d."),
    F("swap_pair", "p", "return (p[1], p[0])",
      lambda r: ((r.randint(0, 9), r.randint(0, 9)),), "p reversed."),
)
# fmt: on
MODULE_NAMES = ("calc", "mathx2", "nums", "util", "ops", "helpers", "funcs", "core", "misc", "tools", "lib")
_PARAM_POOL = ("a", "b", "x", "y", "n", "m", "k", "p", "q", "v")
_SITE = re.compile(r"\*\*|//|<=|>=|==|!=|[-+*/%<>]|\b\d+\b|\b[A-Za-z_]\w*\b|'[^']*'")
_SWAPS = {
    "+": ("-", "*"), "-": ("+",), "*": ("+", "-"), "/": ("//", "*"), "//": ("/", "%"), "%": ("//",),
    "**": ("*",), "<": (">", "<="), ">": ("<", ">="), "<=": ("<", ">="), ">=": (">", "<="),
    "==": ("!=",), "!=": ("==",),
}  # fmt: skip
_WORDS = {
    "and": "or", "or": "and", "min": "max", "max": "min", "any": "all", "all": "any", "True": "False",
    "False": "True", "upper": "lower", "lower": "upper", "append": "extend", "extend": "append",
}  # fmt: skip
_CHARS = ("-", "_", " ", "")
_ISSUES = (
    "{call} returns {bad}; it should return {good}.",
    "{call} returns {bad} but should return {good}.",
    "{call} returns {bad}, but it should return {good}.",
    "{call} gives {bad}, expected {good}.",
    "{call} should return {good}, not {bad}.",
)


def mutations_by_kind(line: str, params: tuple[str, ...]) -> dict[str, list[str]]:
    """Every single edit of a body `line`, by bug kind (see the module docstring). Edits may
    be invalid Python or no-ops; callers filter those. Kinds are drawn uniformly by
    `make_bug`, so kinds with many sites (e.g. +-1) do not crowd out the others."""
    kinds: dict[str, list[str]] = {
        "operator": [],
        "constant": [],
        "name": [],
        "off_by_one": [],
        "structure": [],
    }
    for match in _SITE.finditer(line, len(line) - len(line.lstrip())):
        token, (a, b) = match.group(), match.span()
        if token in _SWAPS or token in _WORDS:
            kind, options = "operator", _SWAPS.get(token) or (_WORDS[token],)
        elif token.isdigit():
            kind, options = "constant", tuple(str(v) for v in (int(token) + 1, int(token) - 1) if v >= 0)
        elif token in params:
            kind, options = "name", tuple(p for p in params if p != token)
        elif token.startswith("'") and len(token) <= 3:
            kind, options = "constant", tuple(f"'{c}'" for c in _CHARS if f"'{c}'" != token)
        else:
            continue
        kinds[kind] += [line[:a] + option + line[b:] for option in options]
    off = kinds["off_by_one"]
    off += [line[: m.start()] + line[m.end() :] for m in re.finditer(r" [-+] 1\b", line)]  # drop a +-1
    for m in re.finditer(r"[A-Za-z_)\]](?=[)\],])", line):  # add a +-1 after a name or bracket
        off += [line[: m.end()] + term + line[m.end() :] for term in (" - 1", " + 1")]
    structure = kinds["structure"]
    for m in re.finditer(r"\((\w+), (\w+)\)", line):  # swap two call arguments
        structure.append(f"{line[: m.start()]}({m.group(2)}, {m.group(1)}){line[m.end() :]}")
    for m in re.finditer(r"(?<=[ (])\(([^()]+)\)(?= [-+*/%])", line):  # drop grouping parentheses
        structure.append(line[: m.start()] + m.group(1) + line[m.end() :])
    if "not " in line:
        structure.append(line.replace("not ", "", 1))
    return {k: [m for m in dict.fromkeys(v) if m != line] for k, v in kinds.items()}


def mutations(line: str, params: tuple[str, ...]) -> list[str]:
    """All edits of `mutations_by_kind`, in one list (kind order, no duplicates)."""
    return list(dict.fromkeys(m for ms in mutations_by_kind(line, params).values() for m in ms))


def _rename(family: Family, rng: random.Random) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """Parameters, body and docstring, numeric parameters (a, b, x, n) renamed to other single
    letters half the time; families marked `rename=False` keep names that carry meaning."""
    if not family.rename or rng.random() < 0.5 or any(p not in ("a", "b", "x", "n") for p in family.params):
        return family.params, family.body, family.doc
    taken = set(re.findall(r"\b\w+\b", " ".join(family.body))) - set(family.params)
    mapping = dict(
        zip(family.params, rng.sample([p for p in _PARAM_POOL if p not in taken], len(family.params)))
    )

    def rename(text: str) -> str:
        return re.sub(r"\b[a-z]\b", lambda m: mapping.get(m.group(), m.group()), text)

    return tuple(mapping.values()), tuple(rename(line) for line in family.body), rename(family.doc)


def _load(source: str) -> dict | None:
    """The namespace of module `source` (code generated by this module, never model output);
    None when a mutation made it invalid Python (such mutants are not used)."""
    namespace: dict = {}
    try:
        exec(compile(source, "<synthetic>", "exec"), namespace)  # noqa: S102
    except SyntaxError:
        return None
    return namespace


def _call(namespace: dict, name: str, args: tuple) -> tuple[bool, object]:
    """(True, value) of `name(*args)` on copies of list/dict arguments, or (False, exception name)."""
    try:
        return True, namespace[name](*[type(a)(a) if isinstance(a, list | dict) else a for a in args])
    except Exception as exc:
        return False, type(exc).__name__


def _fmt_call(name: str, args: tuple) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


Case = tuple[str, tuple, object]
"""(function name, arguments, expected return value)."""


@dataclass(frozen=True)
class SyntheticBug:
    """One generated instance: the buggy repository, the fix, a wrong fix, the test cases."""

    instance: SWEInstance
    files: dict[str, str]  # the buggy repository: module + tests/test_<module>.py
    path: str  # the module
    line_no: int  # 1-based line of the bug
    fixed_line: str
    wrong_line: str  # a plausible replacement that does not fix it
    fixed_source: str
    cases: tuple[Case, ...]  # the buggy function's cases, the issue's first


def _module(rng: random.Random) -> tuple[list[tuple[Family, str, tuple, tuple]], list[str], list[int]]:
    """1-3 distinct functions: [(family, name, params, body)], the module lines, each body's first line."""
    funcs, lines, starts = [], [], []
    for family in rng.sample(FAMILIES, rng.choices((1, 2, 3), weights=(5, 3, 2))[0]):
        name = rng.choice(family.names)
        params, body, doc = _rename(family, rng)
        if lines:
            lines += ["", ""]
        lines.append(f"def {name}({', '.join(params)}):")
        if rng.random() < DOCSTRING_RATE:
            lines.append(f'    """{doc}"""')
        starts.append(len(lines) + 1)
        lines += ["    " + line for line in body]
        funcs.append((family, name, params, body))
    return funcs, lines, starts


def make_bug(rng: random.Random, index: int = 0) -> SyntheticBug:
    """A random synthetic instance (deterministic in `rng`); see the module docstring."""
    while True:
        bug = _try_bug(rng, index)
        if bug is not None:
            return bug


def _with_line(lines: list[str], line_no: int, text: str) -> str:
    return "\n".join(lines[: line_no - 1] + [text] + lines[line_no:]) + "\n"


def _try_bug(rng: random.Random, index: int) -> SyntheticBug | None:
    """One attempt; None when the mutant is invalid or equivalent, or has no wrong-fix alternative."""
    funcs, lines, starts = _module(rng)
    target = rng.randrange(len(funcs))
    family, name, params, body = funcs[target]
    line_no = starts[target] + rng.randrange(len(body))
    fixed_line = lines[line_no - 1]
    kinds = [ms for ms in mutations_by_kind(fixed_line, params).values() if ms]
    buggy_line = rng.choice(rng.choice(kinds)) if kinds else fixed_line
    source, buggy = "\n".join(lines) + "\n", _with_line(lines, line_no, buggy_line)
    good_ns, bad_ns = _load(source), _load(buggy)
    if bad_ns is None or buggy_line == fixed_line:
        return None
    issue, cases = None, []
    for args in (family.sample(rng) for _ in range(24)):
        ok, good = _call(good_ns, name, args)
        if not ok:
            continue
        bad = _call(bad_ns, name, args)
        if bad == (False, "TypeError"):
            return None  # type confusion ("xs - 1"): not the kind of bug issues report
        if issue is None and bad != (True, good):
            issue = _issue(rng, _fmt_call(name, args), bad, good)
            cases.insert(0, (name, args, good))
        elif len(cases) < 3:
            cases.append((name, args, good))
    if issue is None:
        return None  # equivalent on every sampled input
    wrong = [w for w in mutations(buggy_line, params) if w != fixed_line]
    rng.shuffle(wrong)
    wrong_line = next(
        (w for w in wrong if _plausible_wrong(_load(_with_line(lines, line_no, w)), cases)), None
    )
    if wrong_line is None:
        return None
    return _assemble(
        rng, index, funcs, target, (source, buggy), line_no, (fixed_line, wrong_line), issue, cases
    )


def _issue(rng: random.Random, call: str, bad: tuple[bool, object], good: object) -> str:
    """The issue text for a call whose buggy outcome is `bad` ((ok, value or exception name))."""
    if not bad[0]:
        return f"{call} raises {bad[1]}; it should return {good!r}."
    return rng.choice(_ISSUES).format(call=call, bad=repr(bad[1]), good=repr(good))


def _plausible_wrong(namespace: dict | None, cases: list[Case]) -> bool:
    """Whether a module is a plausible wrong fix: valid Python, no TypeError, fails a case."""
    if namespace is None:
        return False
    outcomes = [(_call(namespace, name, args), good) for name, args, good in cases]
    return all(got != (False, "TypeError") for got, _ in outcomes) and any(
        got != (True, g) for got, g in outcomes
    )


def _assemble(rng, index, funcs, target, sources, line_no, fixes, issue, cases) -> SyntheticBug:
    """Build the repository (module + pytest file) and the SWEInstance of a drawn bug."""
    source, buggy = sources
    names = [f[1] for f in funcs]
    module = names[0] if rng.random() < 0.5 else rng.choice(MODULE_NAMES)  # swe-mini names files like this
    path, test_path = f"{module}.py", f"tests/test_{module}.py"
    namespace = _load(source)
    tests = [f"from {module} import {', '.join(names)}"]
    for i, (family, name, _, _) in enumerate(funcs):
        own = cases[:3] if i == target else []
        while len(own) < 2:  # the other functions get two passing cases each
            args = family.sample(rng)
            ok, value = _call(namespace, name, args)
            if ok:
                own.append((name, args, value))
        tests += [
            "",
            "",
            f"def test_{name}():",
            *(f"    assert {_fmt_call(n, a)} == {g!r}" for n, a, g in own),
        ]
    files = {path: buggy, test_path: "\n".join(tests) + "\n"}
    instance = SWEInstance(
        instance_id=f"synthetic-{index:06d}",
        repo=f"synthetic/{module}",
        base_commit="0" * 40,
        problem_statement=issue,
        patch=file_diff(path, buggy, source),
        test_patch="",
        fail_to_pass=(f"{test_path}::test_{names[target]}",),
        pass_to_pass=tuple(f"{test_path}::test_{n}" for n in names if n != names[target]),
        version="0",
        environment_setup_commit="0" * 40,
    )
    return SyntheticBug(instance, files, path, line_no, fixes[0], fixes[1], source, tuple(cases))


def runtime_for(bugs: list[SyntheticBug]) -> InMemoryRuntime:
    """An in-memory runtime serving `bugs`; a patch resolves one iff it restores the correct module."""
    runtime = InMemoryRuntime()
    for bug in bugs:
        runtime.add(bug.instance.instance_id, bug.files, {bug.path: bug.fixed_source})
    return runtime


def scripted_actions(bug: SyntheticBug, wrong: bool) -> list[str]:
    """The scripted agent's turns: view the module, replace the buggy line, submit."""
    line = bug.wrong_line if wrong else bug.fixed_line
    return [
        format_tool_call("view", bug.path),
        format_tool_call("replace", f"{bug.path} {bug.line_no} {line}"),
        format_tool_call("submit"),
    ]


def demonstrations(
    rng: random.Random, n: int, wrong_fix_rate: float = WRONG_FIX_RATE, **env_kwargs
) -> list[tuple[list[Message], float]]:
    """`n` (conversation, reward) pairs of the scripted agent on fresh synthetic bugs;
    `env_kwargs` go to `SweEnv` (e.g. `max_observation_chars`)."""

    async def run_all():
        out = []
        for i in range(n):
            bug = make_bug(rng, i)
            env = SweEnv(bug.instance, runtime_for([bug]), **env_kwargs)
            out.append(await play(env, scripted_actions(bug, wrong=rng.random() < wrong_fix_rate)))
        return out

    return asyncio.run(run_all())
