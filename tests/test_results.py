"""results/ holds studies, each listed in results/studies.toml with a command that can run."""

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from gencc.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
STUDIES = tomllib.loads((RESULTS / "studies.toml").read_text())


def test_every_study_folder_is_listed_and_every_listed_study_exists():
    folders = {p.name for p in RESULTS.iterdir() if p.is_dir()}
    assert folders == set(STUDIES), (f"not in studies.toml: {sorted(folders - set(STUDIES))}; "
                                     f"listed without a folder: {sorted(set(STUDIES) - folders)}")
    for name, entry in STUDIES.items():
        assert entry.get("command") and entry.get("minutes", 0) > 0, name


@pytest.mark.parametrize("name", sorted(STUDIES))
def test_a_study_command_names_programs_that_exist_and_writes_into_its_folder(name):
    command = STUDIES[name]["command"]
    assert f"results/{name}" in command, f"{name}'s command does not write into results/{name}"
    scripts = re.findall(r"python (\S+\.py)", command)
    for script in scripts:
        assert (ROOT / script).is_file(), f"{name}: {script} does not exist"
    for line in re.findall(r"(?:^|; |\n)(gencc [^;\n]*)", command):
        build_parser().parse_args(shlex.split(line)[1:])  # a misspelt sub-command or flag exits here
    assert scripts or "gencc " in command or "python -c" in command, command


def test_every_result_written_is_stamped_with_what_made_it(tmp_path):
    import json

    from gencc.report import write_json

    data = json.loads(write_json({"rows": [1.0, float("nan")]}, tmp_path / "r.json").read_text())
    prov = data["provenance"]
    assert data["rows"] == [1.0, None] and prov["gencc"] and prov["date"].endswith("Z") and "cores" in prov["machine"]
    assert len(prov["commit"] or "") in (0, 40)  # a commit where the package runs from a checkout
    kept = {"commit": "abc", "date": "2026-01-01"}
    assert json.loads(write_json({"provenance": kept}, tmp_path / "k.json").read_text())["provenance"] == kept
    assert "provenance" not in json.loads(write_json({"a": 1}, tmp_path / "u.json", stamp=False).read_text())
