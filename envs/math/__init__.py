"""Answer graders shared by environments and benchmarks (see `envs.math.graders`)."""

from envs.math.graders import (
    GradeResult,
    extract_boxed,
    extract_final_answer,
    grade_gsm8k,
    grade_integer,
    grade_symbolic,
    gsm8k_reference,
    normalize_answer_string,
    strip_thinking,
    symbolic_fallback_reason,
)

__all__ = [
    "GradeResult",
    "extract_boxed",
    "extract_final_answer",
    "grade_gsm8k",
    "grade_integer",
    "grade_symbolic",
    "gsm8k_reference",
    "normalize_answer_string",
    "strip_thinking",
    "symbolic_fallback_reason",
]
