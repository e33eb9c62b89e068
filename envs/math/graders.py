"""Answer graders shared by the environments and the benchmarks (the only copy in the project).

Every grader takes the model's full completion text and the reference answer and returns a
`GradeResult` naming *how* the verdict was reached (`method`), so evaluations can count, for
example, how many answers needed the string fallback.

- `grade_integer`: integer answers (arith, AIME-style, BeyondAIME, integer IMOAnswerBench rows).
- `grade_last_integer`: the last integer written, for small instruct models that answer
  `7 + 5 = 12` and follow no answer format (opt-in: the arith task's `grading="last-number"`).
- `grade_gsm8k`: GSM8K, reference after `#### `, numeric comparison.
- `grade_symbolic`: IMOAnswerBench-style answers (expressions, fractions, sets, intervals,
  tuples, functions) through math-verify, with an explicit normalised-string fallback.

Choices made here (documented because they change scores):
1. The final answer is what `extract_final_answer` returns: the last `\\boxed{}`/`\\fbox{}`,
   else the last `Answer: X` / `answer is X` / `#### X` (rest of that line). Nothing else;
   in particular no "last number in the text" guess (a completion without a marked answer is
   graded wrong with method `no-answer`) except in `grade_last_integer`, which is only that
   guess and is asked for by name. Thinking is never read for the answer
   (`strip_thinking`: only the text after the last `</think>` counts; a `<think>` never closed
   leaves no answer), so a box inside a thinking model's reasoning does not score.
2. math-verify is called with its timeouts disabled: its signal-based timeouts raise outside
   the main thread, and rollout workers grade from threads. Inputs longer than
   `MAX_SYMBOLIC_CHARS` skip math-verify (fallback) so a pathological answer cannot stall a
   worker.
3. The string fallback (method `fallback-normalized-string`, `normalize_answer_string`)
   decides when the reference is one math-verify cannot represent faithfully (prose such as
   `odd $n$` or `... for some $a>0$`, multi-line case splits, unparsable or partially parsed
   LaTeX; see `symbolic_fallback_reason`: 32 of the 400 IMOAnswerBench answers), when the
   prediction does not parse, and when math-verify says "different" for two strings that
   are equal after normalisation. It never turns an unequal pair into "correct".
4. math-verify is called with unit stripping off (it would read `2-2m` as `2-2`). It
   lower-cases symbols (`R` and `r` are the same symbol); this is not configurable through
   its public API and is accepted.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from envs.base import GradeResult

MAX_SYMBOLIC_CHARS = 400
"""Longer answers are not sent to math-verify (see module docstring, point 2)."""


# ---------------------------------------------------------------------------- extraction

_BOX_COMMANDS = ("\\boxed", "\\fbox")


def _braced(text: str, start: int) -> str | None:
    """Content of the balanced `{...}` group opening at `text[start]`, or None if unbalanced."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def extract_boxed(text: str) -> str | None:
    """Content of the last complete `\\boxed{...}` (or `\\fbox{...}`), braces balanced.

    Nested braces are kept (`\\boxed{\\frac{1}{2}}` -> `\\frac{1}{2}`); `\\boxed 5` (no
    braces) yields `5`. A truncated last box (unbalanced) is skipped in favour of an earlier
    complete one. Returns None when there is no complete box.
    """
    positions = sorted(
        (m.start(), m.end())
        for cmd in _BOX_COMMANDS
        for m in re.finditer(re.escape(cmd) + r"(?![A-Za-z])", text)
    )
    for _, end in reversed(positions):
        rest = text[end:]
        stripped = rest.lstrip()
        if stripped.startswith("{"):
            content = _braced(text, end + (len(rest) - len(stripped)))
            if content is not None:
                return content.strip()
        elif rest[:1] == " ":
            m = re.match(r"\s+([^\s$]+)", rest)
            if m:
                return m.group(1)
    return None


_MARKER_PATTERNS = (
    re.compile(r"answer\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?[ \t]*(.*)", re.IGNORECASE),
    re.compile(r"answer\s+is\s*[:：]?[ \t]*(.*)", re.IGNORECASE),
    re.compile(r"####[ \t]*(.*)"),
)


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
"""The thinking delimiters of Qwen3, DeepSeek-R1 and their distills."""


def strip_thinking(text: str) -> str:
    """`text` without its thinking: what follows the last `</think>` (also when the `<think>`
    was in the prompt, as some templates put it there), "" when a `<think>` is never closed (the
    budget ran out mid-thought), else `text` unchanged."""
    if THINK_CLOSE in text:
        return text.rsplit(THINK_CLOSE, 1)[1]
    return "" if THINK_OPEN in text else text


def extract_final_answer(text: str) -> str | None:
    """The final answer of a completion: the last box, else the last marked answer, both read
    after the thinking (`strip_thinking`).

    Marked answers are `Answer: X` (also `**Answer:** X`, `Final answer: X`), `answer is X`
    and `#### X`; X is the rest of that line, stripped of markdown stars and a trailing
    period. The last occurrence over all three patterns wins. Returns None when none is found.
    """
    text = strip_thinking(text)
    boxed = extract_boxed(text)
    if boxed is not None:
        return boxed
    best: tuple[int, str] | None = None
    for pattern in _MARKER_PATTERNS:
        for m in pattern.finditer(text):
            value = m.group(1).strip().strip("*").strip().rstrip(".").strip()
            if value and (best is None or m.start() >= best[0]):
                best = (m.start(), value)
    return best[1] if best else None


# ---------------------------------------------------------------------------- numbers

_NUMBER = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+"
_NUMBER_RE = re.compile(rf"({_NUMBER})")
_UNITS_RE = re.compile(rf"({_NUMBER})\s*[A-Za-z][A-Za-z .'/-]*")


def _clean_number_text(s: str) -> str:
    """Strip the LaTeX/markdown wrapping that can surround a plain number."""
    t = s.replace("\u2212", "-").replace("{,}", ",").replace("\\$", "").replace("$", "")
    t = re.sub(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}", r"\1", t)
    t = re.sub(r"\^\{?\\circ\}?|°|\\%|%", "", t)
    t = re.sub(r"\\[,!;: ]", "", t)
    t = t.replace("\\(", "").replace("\\)", "").replace("\\[", "").replace("\\]", "")
    t = t.strip().rstrip(".").strip()
    if t.startswith("{") and t.endswith("}"):
        t = t[1:-1].strip()
    return t


def _parse_number(s: str, allow_units: bool = False) -> Fraction | None:
    """Exact value of a plain number (`042`, `1,234`, `-17.0`, `$17$`), else None.

    With `allow_units`, trailing words after the number are ignored (`18 dollars`).
    """
    t = _clean_number_text(s)
    m = _NUMBER_RE.fullmatch(t) or (_UNITS_RE.fullmatch(t) if allow_units else None)
    if m is None:
        return None
    return Fraction(m.group(1).replace(",", ""))


def grade_integer(completion: str, answer: str | int) -> GradeResult:
    """Grade an integer-answer completion (arith, AIME, BeyondAIME).

    Accepts `042`, `1,234`, `\\boxed{17}`, `17.0`, `$17$`, `Answer: 17`; rejects non-integers
    such as `17.5`, other numbers, expressions, and completions without a marked answer.
    """
    gold = _parse_number(str(answer))
    if gold is None or gold.denominator != 1:
        raise ValueError(f"grade_integer: reference answer {answer!r} is not an integer")
    extracted = extract_final_answer(completion)
    if extracted is None:
        return GradeResult(False, None, "no-answer")
    value = _parse_number(extracted)
    correct = value is not None and value.denominator == 1 and value == gold
    return GradeResult(correct, extracted, "integer")


_LAST_NUMBER_RE = re.compile(
    r"(?<![\w.])((?:(?<![-\u2212])[-\u2212])?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?!\w)"
)
"""A number standing alone: a sign (`-` or the Unicode minus `\u2212`, as typeset math writes it)
only where no operand or other minus precedes it (`9-2` is 9 and 2, `= -2` is -2, `--6` is 6,
not -6), no digits glued to letters (`3rd`, `x2`), thousands commas, a decimal part."""


def grade_last_integer(completion: str, answer: str | int) -> GradeResult:
    """Grade by the last number of the completion after any thinking (lm-eval-harness's
    "flexible extract"): correct when it is the integer `answer`. One number is read, so a list
    of guesses scores only its last; a decimal such as `17.5` is wrong; no number: `no-answer`."""
    gold = _parse_number(str(answer))
    if gold is None or gold.denominator != 1:
        raise ValueError(f"grade_last_integer: reference answer {answer!r} is not an integer")
    numbers = _LAST_NUMBER_RE.findall(strip_thinking(completion))
    if not numbers:
        return GradeResult(False, None, "no-answer")
    value = Fraction(numbers[-1].replace(",", "").replace("\u2212", "-"))
    return GradeResult(value == gold, numbers[-1], "last-number")


def gsm8k_reference(answer: str) -> Fraction:
    """The numeric reference of a GSM8K answer field (text after `#### `, commas stripped)."""
    ref = answer.rsplit("####", 1)[-1] if "####" in answer else answer
    value = _parse_number(ref.strip())
    if value is None:
        raise ValueError(f"gsm8k_reference: cannot read a number from {ref.strip()!r}")
    return value


def grade_gsm8k(completion: str, answer: str) -> GradeResult:
    """Grade a GSM8K completion against the dataset's answer field (or a bare number).

    The prediction is the extracted final answer read as a number, allowing `$`, thousands
    commas, a trailing period and unit words after the number (`$1,234.`, `18 dollars`).
    """
    gold = gsm8k_reference(answer)
    extracted = extract_final_answer(completion)
    if extracted is None:
        return GradeResult(False, None, "no-answer")
    value = _parse_number(extracted, allow_units=True)
    return GradeResult(value is not None and value == gold, extracted, "numeric")


# ---------------------------------------------------------------------------- symbolic


def normalize_answer_string(s: str) -> str:
    """Normalised form used by the string fallback of `grade_symbolic`.

    Removes whitespace, `$`, `\\(`/`\\)`, `\\left`/`\\right`, thin spaces (`\\,` `\\!` `\\;`),
    `\\displaystyle`, `\\text{...}`-style wrappers (keeping their content), trailing periods;
    maps `\\dfrac`/`\\tfrac` to `\\frac` and `\\dots`/`\\cdots`/`...` to `\\ldots`;
    lower-cases (math-verify lower-cases symbols too).
    """
    t = s.replace("$", "").replace("\\(", "").replace("\\)", "")
    t = re.sub(r"\\(?:text|textbf|textrm|mathrm|mbox)\{([^{}]*)\}", r"\1", t)
    t = re.sub(r"\\left(?![A-Za-z])|\\right(?![A-Za-z])|\\displaystyle", "", t)
    t = re.sub(r"\\[,!;: ]", "", t)
    t = re.sub(r"\\[dt]frac", r"\\frac", t)
    t = re.sub(r"\\(?:dots|cdots|ldots)(?![A-Za-z])|\.\.\.", r"\\ldots", t)
    t = re.sub(r"\s+", "", t)
    return t.rstrip(".").lower()


def _clean_math(s: str) -> str:
    """Prepare an answer for math-verify: drop `$` delimiters and trailing periods."""
    t = s.strip().replace("$", " ").replace("\\(", " ").replace("\\)", " ")
    return t.strip().rstrip(".").strip()


_PROSE_WORDS = frozenset(
    "if for all and or is of no odd the any not some where which with when otherwise none even are "
    "each only".split()
)


@functools.lru_cache(maxsize=8192)
def _mv_parse(text: str) -> tuple:
    """math-verify's parse of `\\boxed{text}` with timeouts disabled (cached, thread-safe).

    Returns `(sympy object, matched text)`, or `()` when math-verify cannot parse `text`.

    Unit stripping is turned off: with it, `2-2m` parses as `2-2` (`m` read as metres).
    """
    from latex2sympy2_extended import NormalizationConfig
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    if not text or len(text) > MAX_SYMBOLIC_CHARS:
        return ()
    norm = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
    )
    config = [LatexExtractionConfig(normalization_config=norm), ExprExtractionConfig()]
    try:
        parsed = parse("\\boxed{" + text + "}", extraction_config=config, parsing_timeout=None)
    except Exception:  # math-verify raises on some malformed LaTeX despite raise_on_error=False
        return ()
    # A successful parse is [sympy object, matched text]; a failed one is [] or [raw string].
    if len(parsed) != 2 or isinstance(parsed[0], str):
        return ()
    return tuple(parsed)


def _mv_verify(gold: tuple, pred: tuple) -> bool:
    """math-verify's verify with timeouts disabled; errors count as "not equivalent"."""
    from math_verify import verify

    try:
        return bool(verify(list(gold), list(pred), timeout_seconds=None))
    except Exception:
        return False


@functools.lru_cache(maxsize=8192)
def symbolic_fallback_reason(answer: str) -> str | None:
    """Why a reference answer is graded by string comparison rather than math-verify, or None.

    - "prose": English words (`odd $n$`, `... for some $a>0$`, `All powers of 2`); math-verify
      would read them as products of single-letter symbols or keep only a fragment;
    - "multi-line": case splits written over several lines;
    - "unparsed": math-verify returns nothing (or the answer exceeds `MAX_SYMBOLIC_CHARS`);
    - "partial-parse": math-verify's matched text is not the whole answer (`1,2,\\ldots,1235`
      would become the set {1, 2, 1235}).
    """
    text = _clean_math(answer)
    letters = re.sub(r"\\(?:text|textbf|textrm|mathrm|mbox|operatorname)\b", "", text)
    letters = re.sub(r"\\[A-Za-z]+", "", letters)
    if any(len(w) >= 4 or w.lower() in _PROSE_WORDS for w in re.findall(r"[A-Za-z]{2,}", letters)):
        return "prose"
    if "\n" in text:
        return "multi-line"
    if _parse_number(text) is not None:
        return None
    parsed = _mv_parse(text)
    if not parsed:
        return "unparsed"
    if _squash(parsed[1]) != _squash(text):
        return "partial-parse"
    return None


def _squash(s: str) -> str:
    """`normalize_answer_string` without braces: compares math-verify's matched text to its input."""
    return re.sub(r"[{}]", "", normalize_answer_string(s))


def grade_symbolic(completion: str, answer: str) -> GradeResult:
    """Grade an expression/set/interval/tuple/function answer (IMOAnswerBench style).

    Order: plain numbers on both sides are compared exactly ("numeric"); references that
    `symbolic_fallback_reason` flags are compared as normalised strings
    ("fallback-normalized-string"); otherwise both sides go through math-verify
    ("math-verify"), where a prediction math-verify cannot parse, or one it rejects but that
    equals the reference after `normalize_answer_string`, is also decided by the string
    comparison. Safe to call from any thread.
    """
    extracted = extract_final_answer(completion)
    if extracted is None:
        return GradeResult(False, None, "no-answer")
    gold, pred = _clean_math(answer), _clean_math(extracted)
    if not pred:
        return GradeResult(False, extracted, "no-answer")
    gold_num, pred_num = _parse_number(gold), _parse_number(pred)
    if gold_num is not None and pred_num is not None:
        return GradeResult(gold_num == pred_num, extracted, "numeric")
    same_string = normalize_answer_string(gold) == normalize_answer_string(pred)
    if symbolic_fallback_reason(gold) is None:
        pred_parsed = _mv_parse(pred)
        if pred_parsed:
            if _mv_verify(_mv_parse(gold), pred_parsed):
                return GradeResult(True, extracted, "math-verify")
            if not same_string:
                return GradeResult(False, extracted, "math-verify")
    return GradeResult(same_string, extracted, "fallback-normalized-string")
