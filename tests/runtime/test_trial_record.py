"""A trial's fields are defined once (``TrialRecord``): the live ``TrialState`` restates the
same names, and the conversions and the record's JSON follow the definition."""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from typing import Any

import pytest

from faasml._validate import Fields
from faasml.exceptions import RecordError
from faasml.runtime.coordinator.trial import TrialState
from faasml.runtime.record.codec import trial_json
from faasml.runtime.record.fields import TRIAL_READERS, trial_from
from faasml.runtime.record.records import TrialRecord

EPOCH = {"epoch": 1, "loss": 0.5, "n": 2, "memory_mb": 1024, "t_s": 1, "spent_usd": 0, "epoch_s": 1}
SET: dict[str, Any] = {
    "trial_id": 4,
    "config": {"lr": 0.1},
    "epochs_done": 2,
    "epoch": 2,
    "batch": 3,
    "round_id": 7,
    "checkpoint": "ckpt/4",
    "status": "diverged",
    "history": [EPOCH],
    "restarts": 1,
    "failures": ["epoch 2 batch 0: killed"],
    "partial": {"loss_sum": 1.5, "samples": 3.0},
    "memory_mb": 2048,
    "diverged_epoch": 2,
    "functions": 2,
}
"""A value other than its default for every trial field."""


def _as_list(annotation: str) -> str:
    """The live form's annotation of a recorded field: a list where the record has a tuple."""
    return re.sub(r"^tuple\[(.*), \.\.\.\]$", r"list[\1]", annotation)


def test_the_live_trial_has_the_records_fields_in_order_with_their_types_and_defaults() -> None:
    recorded = [(f.name, _as_list(str(f.type))) for f in dataclasses.fields(TrialRecord)]
    live = [(f.name, str(f.type)) for f in dataclasses.fields(TrialState)]
    assert live == recorded
    assert TrialRecord.of(TrialState(0, {})) == TrialRecord(0, {})
    assert TrialRecord(0, {}).state() == TrialState(0, {})


def test_every_field_set_goes_through_the_record_and_its_json_and_back() -> None:
    assert list(SET) == [f.name for f in dataclasses.fields(TrialRecord)]  # one value each
    assert set(TRIAL_READERS) <= set(SET)  # no rule left for a field gone
    defaults = TrialRecord(0, {})
    assert all(getattr(defaults, name) != value for name, value in SET.items())
    live = TrialState(**SET)
    written = json.loads(json.dumps(trial_json(TrialRecord.of(live))))
    assert written == SET
    read = trial_from(Fields(written, "trial", RecordError))
    assert read == TrialRecord.of(live)
    assert read.state() == live


def test_a_field_at_its_default_is_left_out_only_where_older_records_lack_it() -> None:
    written = trial_json(TrialRecord(0, {}))
    assert "diverged_epoch" not in written and "functions" not in written
    assert written["memory_mb"] == 0 and written["checkpoint"] is None


def test_the_record_and_the_resumed_trial_do_not_share_lists_or_mappings() -> None:
    live = TrialState(**copy.deepcopy(SET))
    record = TrialRecord.of(live)
    live.history.append({"epoch": 2})
    live.failures.append("again")
    live.partial["samples"] = 9.0
    live.config["lr"] = 1.0
    assert record == TrialRecord.of(TrialState(**SET))
    again = record.state()
    again.history[0]["loss"] = 9.0
    again.config["lr"] = 2.0
    assert record.history[0]["loss"] == 0.5 and record.config == {"lr": 0.1}


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [
        ("functions", -1, "functions is -1"),
        ("diverged_epoch", 0, "diverged_epoch is 0"),
        ("checkpoint", 3, "must be a key or null"),
        ("failures", [1], "must be a list of texts"),
    ],
)
def test_a_wrong_trial_field_is_one_line_naming_it(name: str, value: Any, rule: str) -> None:
    with pytest.raises(RecordError, match=re.escape(rule)):
        trial_from(Fields({**SET, name: value}, "trial", RecordError))
