"""From the settings to what the runtimes are built with: no knob of the pipeline is hard-coded in a runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from engines.contract import ConfigError
from pipeline.scrub import Policy
from worker.settings import Settings
from worker.wiring import convert_limits, legacy_import_settings, pipeline_settings, reader_options


def _settings(tmp_path: Path, **fields: object) -> Settings:
    return Settings(data_dir=tmp_path, **fields)  # type: ignore[arg-type]


def test_the_defaults_of_each_runtime(tmp_path: Path) -> None:
    embedded = pipeline_settings(_settings(tmp_path), converter_processes=3, in_task=False)
    task = pipeline_settings(_settings(tmp_path), converter_processes=1, in_task=True)
    assert (embedded.convert_concurrency, embedded.store_attempts, embedded.dead_letter_unavailable) == (6, 5, True)
    assert (task.convert_concurrency, task.store_attempts, task.dead_letter_unavailable) == (2, 3, False)


def test_the_knobs_come_from_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYMEMORY_CONVERT_CONCURRENCY", "7")
    monkeypatch.setenv("TINYMEMORY_STORE_ATTEMPTS", "9")
    monkeypatch.setenv("TINYMEMORY_TASK_STORE_ATTEMPTS", "4")
    settings = Settings.load()
    assert pipeline_settings(settings, 1, in_task=False).store_attempts == 9
    task = pipeline_settings(settings, 1, in_task=True)
    assert (task.convert_concurrency, task.store_attempts) == (7, 4)
    items = pipeline_settings(_settings(tmp_path, item_max_chars=1234), 1, in_task=False).items
    assert items.item_max_chars == 1234


def test_reader_options_and_convert_limits(tmp_path: Path) -> None:
    settings = _settings(tmp_path, max_file_mb=2.5, convert_timeout_s=7, convert_memory_mb=64)
    assert reader_options(settings).max_file_bytes == int(2.5 * 1024 * 1024)
    limits = convert_limits(settings)
    assert (limits.timeout_s, limits.memory_bytes) == (7, 64 * 1024 * 1024)


def test_a_nonsense_knob_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        _settings(tmp_path, store_attempts=0)


def test_the_scrub_regions_reach_the_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert pipeline_settings(_settings(tmp_path), 1, in_task=False).items.scrub_policy == Policy()
    monkeypatch.setenv("TINYMEMORY_SCRUB__REGIONS", '["ph", "TR"]')
    settings = Settings.load()
    assert pipeline_settings(settings, 1, in_task=False).items.scrub_policy == Policy(regions=("PH", "TR"))
    # A legacy import scrubs as a sync does, with the patience of where it runs.
    for in_task, attempts in ((False, settings.store_attempts), (True, settings.task_store_attempts)):
        job = legacy_import_settings(settings, in_task=in_task)
        assert (job.policy, job.store_attempts) == (Policy(regions=("PH", "TR")), attempts)
    monkeypatch.setenv("TINYMEMORY_SCRUB__REGIONS", '["XX"]')
    with pytest.raises(ConfigError, match=r"scrub\.regions: 'XX'"):
        Settings.load()


def test_printed_settings_mask_a_password_in_an_engine_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TINYMEMORY_ENGINES__POSTGRES__ENDPOINT", "postgresql://app:s3cret@db:5432/tm")
    monkeypatch.setenv("TINYMEMORY_ENGINE_KEY", "k3y")
    settings = Settings.load()
    shown = settings.printable()
    assert shown["engines"]["postgres"]["endpoint"] == "postgresql://app:***@db:5432/tm"
    assert "s3cret" not in str(shown) and "k3y" not in str(shown)
    # The settings themselves keep it: the engine connects with it.
    assert settings.engines["postgres"].endpoint == "postgresql://app:s3cret@db:5432/tm"
