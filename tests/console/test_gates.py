"""What keeps other web sites out of a console on 127.0.0.1: requests for other host names (DNS
rebinding) get 421, forms posted from another site 403; and CSV cells that a spreadsheet would
run as formulas are defused. The app in process, on an empty lake."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from eventlake.config import LakeSettings, Settings
from eventlake.console.app import create_console
from eventlake.console.lake import LakeWatch


def _client(tmp_path: Path) -> TestClient:
    settings = Settings(path=None, lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"))
    return TestClient(create_console(settings, LakeWatch(settings, None)), base_url="http://127.0.0.1:8089")


def test_other_host_names_and_other_sites_are_refused(tmp_path: Path) -> None:
    client = _client(tmp_path)
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"Host": "localhost:8089"}).status_code == 200
    assert client.get("/", headers={"Host": "[::1]:8089"}).status_code == 200
    assert client.get("/", headers={"Host": "attacker.example:8089"}).status_code == 421
    form = {"sql": "SELECT 1 AS one"}
    assert client.post("/query", data=form).status_code == 200  # no Origin: a tool, not a page
    assert client.post("/query", data=form, headers={"Origin": "http://127.0.0.1:8089"}).status_code == 200
    assert client.post("/query", data=form, headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.post("/query.csv", data=form, headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403


def test_csv_cells_that_look_like_formulas_are_defused(tmp_path: Path) -> None:
    sql = "SELECT '=HYPERLINK(1)' AS a, '-3' AS b, 'plain' AS c, NULL AS d"
    answer = _client(tmp_path).post("/query.csv", data={"sql": sql})
    assert answer.status_code == 200
    assert answer.text.splitlines() == ["a,b,c,d", "'=HYPERLINK(1),'-3,plain,"]
