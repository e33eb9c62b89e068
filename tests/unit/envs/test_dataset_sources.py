"""Datasets users bring (envs/dataset_source.py, envs/math/layouts.py): local files in every
format, a `save_to_disk` directory, hub names offline, and TRL's and verl's layouts read by the
`math` task without a column map (the small files in tests/fixtures/byo)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from envs.dataset_source import DatasetSourceError, read_dataset
from envs.math.layouts import LayoutError, read_records
from envs.math.tasks import INSTRUCTION, MathTask

BYO = Path(__file__).resolve().parents[2] / "fixtures" / "byo"
SUMS = {f"What is {a}+{b}?": str(a + b) for a in range(1, 5) for b in range(2, 5)}


def reset(task: MathTask, problem):
    return asyncio.run(task.make_env(problem).reset())


def test_verl_parquet_is_read_as_chat_messages_with_ground_truth():
    task = MathTask(dataset=str(BYO / "verl_sums.parquet"), eval_fraction=0.25)
    problems = task.train + task.held_out
    assert len(problems) == 12 and task.grader_name == "integer"
    p = next(p for p in problems if p.meta["row"] == 0)
    assert p.answer == "3" and p.meta["data_source"] == "sums"
    assert reset(task, p) == [{"role": "user", "content": "What is 1+2? Answer: N"}]  # used as given


def test_trl_jsonl_solution_is_graded_against_its_boxed_answer():
    task = MathTask(dataset=str(BYO / "trl_sums.jsonl"))
    p = next(p for p in task.train + task.held_out if p.meta["row"] == 0)
    assert (p.answer, p.meta["solution"]) == ("3", "1+2 = \\boxed{3}")
    assert p.prompt == f"What is 1+2?\n\n{INSTRUCTION}"  # a string prompt gets the instruction
    assert task.make_env(p).grader("so \\boxed{3}", p.answer).correct


def test_trl_conversational_completion_is_its_last_message():
    task = MathTask(dataset=str(BYO / "trl_conversational.jsonl"), system_prompt="Be brief.")
    p = next(p for p in task.train + task.held_out if p.meta["row"] == 0)
    assert p.answer == "3"
    assert reset(task, p) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 1+2?"},
    ]


@pytest.mark.parametrize("source", ["hub_sums", "sums.arrow"])
def test_saved_dataset_directory_and_arrow_file(source):
    task = MathTask(dataset=str(BYO / source))
    problems = task.train + task.held_out
    assert {p.meta["problem"]: p.answer for p in problems} == SUMS


def test_split_picks_a_split_of_a_dataset_dict():
    assert len(read_dataset(BYO / "hub_sums", split="test")) == 4
    with pytest.raises(DatasetSourceError, match="has no split 'dev'; set task.split to one of: train, test"):
        read_dataset(BYO / "hub_sums", split="dev", split_option="task.split")
    with pytest.raises(DatasetSourceError, match="has no split 'dev'; its splits are: train, test"):
        read_dataset(BYO / "hub_sums", split="dev")  # bench eval --data: always the test split


def test_every_layout_gives_the_same_problems_and_the_same_split():
    """The held-out set depends on the problem text only: verl's chat prompt hashes its
    messages, so compare the string layouts (TRL jsonl, plain arrow) row for row."""
    trl = MathTask(dataset=str(BYO / "trl_sums.jsonl"), eval_fraction=0.3)
    plain = MathTask(dataset=str(BYO / "sums.arrow"), eval_fraction=0.3)
    assert [p.meta["problem"] for p in trl.held_out] == [p.meta["problem"] for p in plain.held_out]
    assert not {p.meta["problem"] for p in trl.train} & {p.meta["problem"] for p in trl.held_out}


def test_explicit_columns_read_dotted_fields(tmp_path):
    rows = [{"q": {"text": f"What is {k}?"}, "gold": v} for k, v in [("1+1", 2), ("2+2", 4), ("3+3", 6)]]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    task = MathTask(dataset=str(path), prompt_column="q.text", answer_column="gold")
    assert sorted(p.answer for p in task.train + task.held_out) == ["2", "4", "6"]


def test_unknown_layout_names_the_columns_found_and_the_option(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps({"input": "x", "target": "1"}) + "\n")
    with pytest.raises(LayoutError) as info:
        read_records([{"input": "x", "target": "1"}], None, None, str(path))
    message = str(info.value)
    assert "columns found: input, target" in message and "task.prompt_column" in message
    with pytest.raises(LayoutError, match="no column 'nope' \\(task.answer_column\\); columns found: input"):
        read_records([{"input": "x", "target": "1"}], "input", "nope", "x")


def test_hub_name_offline_fails_at_once_with_the_fix(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(DatasetSourceError) as info:
        read_dataset("some-org/not-cached")
    message = str(info.value)
    assert "\n" not in message and "not in the local datasets cache" in message
    assert "_OFFLINE is set" in message and "datasets.load_dataset('some-org/not-cached')" in message


def test_a_missing_path_is_not_a_hub_lookup(tmp_path):
    with pytest.raises(DatasetSourceError, match="gone.parquet: no such file"):
        read_dataset(str(tmp_path / "gone.parquet"))
    with pytest.raises(DatasetSourceError, match="no such file or directory"):
        read_dataset("./nothing/here")


def test_benchmark_data_reads_a_saved_dataset_directory_test_split(tmp_path):
    """`bench eval --data` takes the same sources: a save_to_disk directory, split test."""
    import datasets

    from benchmarks import registry

    rows = [{"problem": f"What is {n}+1?", "answer": str(n + 1), "id": str(n)} for n in range(3)]
    datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "aime"))
    spec = registry.get("aime25")
    problems = spec.load(tmp_path / "aime")
    assert [p.answer for p in problems] == ["1", "2", "3"] and problems[0].key == "aime25-0"
    assert spec.provenance(problems, tmp_path / "aime")["data_file_sha256"] is None  # a directory
