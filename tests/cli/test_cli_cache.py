"""`et-tensorrt cache` as the real command: list (entries with model and partition), size against the limit,
clear; a second `lower` of the same program takes its engine from the cache."""

from __future__ import annotations

import re

import pytest
import torch

from et_tensorrt import cli


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cache_cli")
    torch.manual_seed(0)
    torch.export.save(torch.export.export(Net().eval(), (torch.randn(3, 8),)), tmp / "net.pt2")
    return tmp


def test_cache_list_size_and_clear(work, run_cli):
    env = {"ET_TENSORRT_CACHE_DIR": str(work / "cache"), "ET_TENSORRT_CACHE_MAX_BYTES": "64M"}
    empty = run_cli("cache", cwd=work, env=env)
    assert empty.status == 0 and empty.stderr == ""
    assert "the build cache is empty" in empty.stdout
    assert re.search(r"cache: 0 entries, 0 B of the 64\.0 MiB limit", empty.stdout), empty.stdout

    for expect in ("1 built, 0 from cache", "0 built, 1 from cache"):
        lowered = run_cli("lower", "net.pt2", "-o", "net.pte", "--min-block-size", 1, cwd=work, env=env)
        assert lowered.status == 0, lowered.stdout + lowered.stderr
        assert f"engines {expect}" in lowered.stdout, lowered.stdout

    listed = run_cli("cache", "list", cwd=work, env=env)
    assert listed.status == 0 and listed.stderr == ""
    row = next(line for line in listed.stdout.splitlines() if "net.pt2" in line)
    assert re.search(r"^[0-9a-f]{16}\s+\d+\.\d (KiB|MiB)\s+\d+ s ago\s+fp32\s+net\.pt2; engine 1/1; \d+ nodes", row), (
        row
    )
    assert "inputs 3x8" in row
    assert re.search(r"cache: 1 entry, [\d.]+ (KiB|MiB) of the 64\.0 MiB limit", listed.stdout), listed.stdout

    size = run_cli("cache", "size", cwd=work, env=env)
    assert size.status == 0 and "1 entry" in size.stdout and "net.pt2" not in size.stdout

    cleared = run_cli("cache", "clear", cwd=work, env=env)
    assert cleared.status == 0 and re.search(r"removed 1 file\(s\), [\d.]+ (KiB|MiB)", cleared.stdout)
    assert "the build cache is empty" in run_cli("cache", cwd=work, env=env).stdout


def test_no_cache_option_builds_and_stores_nothing(work, run_cli):
    env = {"ET_TENSORRT_CACHE_DIR": str(work / "off")}
    lowered = run_cli("lower", "net.pt2", "-o", "off.pte", "--min-block-size", 1, "--no-cache", cwd=work, env=env)
    assert lowered.status == 0, lowered.stderr
    assert "engines 1 built, 0 from cache" in lowered.stdout
    assert not (work / "off").exists()


def test_unreadable_cache_limit_is_a_usage_error(work, run_cli):
    result = run_cli("cache", "size", cwd=work, env={"ET_TENSORRT_CACHE_MAX_BYTES": "a lot"})
    assert result.status == cli.EXIT_USAGE
    assert "ET_TENSORRT_CACHE_MAX_BYTES='a lot' is not a size" in result.error_line


def test_unknown_cache_action_is_a_usage_error(work, run_cli):
    result = run_cli("cache", "purge", cwd=work)
    assert result.status == cli.EXIT_USAGE and "invalid choice: 'purge'" in result.error_line
