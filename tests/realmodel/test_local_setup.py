"""The setup code around the real model, without the model: model-file checks and the demo's tools.

Fast and offline (fake wheels built here, no registry); they sit with the real-model tests because
they guard the same path (``make model`` and ``make demo``).
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from demo.tools import CalculatorError, calculate, execute, get_weather
from scripts import local_model
from scripts.local_model import LocalModelError, ModelSpec, WheelMember

pytestmark = pytest.mark.realmodel

PIECES = (b"first piece " * 1000, b"second piece " * 700, b"tail")


def fake_spec(payload: bytes) -> ModelSpec:
    """A model made of three wheel members whose joined bytes must be ``payload``."""
    members = tuple(WheelMember(f"fake-part{n}==1.0", f"fake_part{n}/data/part{n:02d}.bin") for n in (1, 2, 3))
    return ModelSpec(
        key="fake",
        filename="fake.gguf",
        alias="fake",
        size=len(payload),
        sha256=hashlib.sha256(payload).hexdigest(),
        pieces=members,
    )


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    """Register ``fake`` with wheels on disk; downloads return them instead of calling pip."""
    spec = fake_spec(b"".join(PIECES))
    wheels = []
    for piece, data in zip(spec.pieces, PIECES, strict=True):
        wheel = tmp_path / f"{piece.requirement.split('==')[0].replace('-', '_')}-1.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(piece.member, data)
            archive.writestr(piece.member.split("/")[0] + "/__init__.py", "raise SystemExit('never run')")
        wheels.append(wheel)
    monkeypatch.setenv("TOOLSHIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(local_model.MODELS, "fake", spec)
    monkeypatch.setattr(local_model, "download_wheels", lambda s, dest: wheels)
    return spec


def test_fetch_joins_members_in_order_and_verifies(fake_model: ModelSpec) -> None:
    path = local_model.fetch_model("fake")
    assert path.read_bytes() == b"".join(PIECES)
    assert path.parent == Path(local_model.cache_dir()) / "models"
    assert local_model.verified(fake_model, path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["fake.gguf", "fake.gguf.verified"]


def test_fetch_refuses_a_digest_mismatch_and_leaves_nothing(
    fake_model: ModelSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(local_model.MODELS, "fake", ModelSpec(**{**_fields(fake_model), "sha256": "0" * 64}))
    with pytest.raises(LocalModelError, match="refusing"):
        local_model.fetch_model("fake")
    assert not local_model.model_path("fake").exists()
    assert list(local_model.model_path("fake").parent.iterdir()) == []


def test_fetch_refuses_pieces_longer_than_the_model(fake_model: ModelSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(local_model.MODELS, "fake", ModelSpec(**{**_fields(fake_model), "size": 100}))
    with pytest.raises(LocalModelError, match="more than 100 bytes"):
        local_model.fetch_model("fake")


def test_a_changed_file_is_rehashed_and_fetched_again(fake_model: ModelSpec) -> None:
    path = local_model.fetch_model("fake")
    with path.open("r+b") as fh:  # same size, different bytes: the stamp no longer matches
        fh.write(b"X")
    assert not local_model.verified(fake_model, path)
    assert local_model.fetch_model("fake").read_bytes() == b"".join(PIECES)


def test_a_wheel_without_the_member_is_rejected(tmp_path: Path) -> None:
    wheel = tmp_path / "w.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("other.bin", b"x")
    with pytest.raises(LocalModelError, match="no member"):
        list(local_model.read_member(wheel, "wanted.bin"))


def _fields(spec: ModelSpec) -> dict[str, object]:
    return {name: getattr(spec, name) for name in ModelSpec.__slots__}


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 * 23 + 4", 395),
        ("(21 - 14) * 1.8", 12.6),
        ("2 ** 10", 1024),
        ("-7 // 2", -4),
        ("10 % 4", 2),
        ("1 / 4", 0.25),
        ("6 / 3", 2),
    ],
)
def test_calculator_does_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "open('/etc/passwd')",
        "x + 1",
        "(1).__class__",
        "[1, 2]",
        "'a' * 3",
        "9 ** 9 ** 9",
        "1 / 0",
        "2 ^ 3",
        "True + 1",
        "1e308 * 10",
        "1" * 201,
        "lambda: 1",
    ],
)
def test_calculator_refuses_everything_else(expression: str) -> None:
    with pytest.raises(CalculatorError):
        calculate(expression)


def test_tools_answer_in_json_and_report_errors_as_data() -> None:
    weather = json.loads(execute("get_weather", {"city": " Paris "}))
    same_city = get_weather("paris")
    assert weather["city"] == "Paris"
    assert (weather["temperature_c"], weather["conditions"]) == (same_city["temperature_c"], same_city["conditions"])
    assert json.loads(execute("calculator", {"expression": "2 + 2"}))["result"] == 4
    assert "error" in json.loads(execute("calculator", {"expression": "os.system"}))
    assert "error" in json.loads(execute("calculator", {}))
    assert "error" in json.loads(execute("nope", {}))
