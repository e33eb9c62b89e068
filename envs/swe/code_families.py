"""The correct functions that `envs.swe.synthetic` writes modules from (`FAMILIES`).

Each family is a small, pure function with a name pool, parameters, body lines, an input
sampler and a one-line docstring; `synthetic.make_bug` injects a bug into one body line.
No name here is shared with a swe-mini function (those are for RL and evaluation).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


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
