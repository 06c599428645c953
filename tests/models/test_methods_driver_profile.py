"""MethodsDriver(..., profile=True): one event set per prefill and decode call, in the table and the ETDump (issue
52, done-when row 2)."""

from __future__ import annotations

import pytest

from et_tensorrt.llm import MethodsDriver

pytestmark = pytest.mark.slow  # the tiny Llama lowered once per session (tests/artifacts.py): a minute and more


def test_each_decode_step_logs_one_set_of_phase_events(tiny_llama_artifact, monkeypatch, tmp_path):
    folder = tiny_llama_artifact.folder
    driver = MethodsDriver(folder / "two.pte", folder / "tokenizer.json", profile=True)
    delegate_calls = []  # per Runner call: how many delegate calls it made (one event set each)
    run = driver._runner.run

    def counted(*args, **kwargs):
        results = run(*args, **kwargs)
        delegate_calls.append(len(driver._runner.last_plans))
        return results

    monkeypatch.setattr(driver._runner, "run", counted)
    result = driver.generate("the cat", max_new_tokens=6)
    assert len(delegate_calls) == result.generated_tokens == 6  # the prompt's call, then 5 decode steps
    table = driver.profile_table()
    executor = next(n for n in table.names if n in ("tensorrt", "pytorch fallback"))
    for name in ("input copies", executor, "output copies"):
        assert table.row(name).calls == sum(delegate_calls), name
    assert any(name.startswith("init") for name in table.names)  # both methods' delegates, loaded with the driver
    assert driver.write_etdump(tmp_path / "generate.etdump") > 0
    assert driver.profile_table().rows == ()  # started over


def test_without_profile_the_driver_traces_nothing(tiny_llama_artifact):
    from et_tensorrt.errors import RunnerError

    folder = tiny_llama_artifact.folder
    driver = MethodsDriver(folder / "two.pte", folder / "tokenizer.json")
    with pytest.raises(RunnerError, match="without profile=True"):
        driver.profile_table()
