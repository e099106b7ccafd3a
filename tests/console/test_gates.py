"""What keeps other web sites out of a console on 127.0.0.1: requests for other host names (DNS
rebinding) get 421, forms posted from another site 403; and CSV cells that a spreadsheet would
run as formulas are defused. The app in process, on an empty lake."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.testclient import TestClient

from eventlake import state_layout
from eventlake.config import ConsoleSettings, LakeSettings, Secret, Settings
from eventlake.console.app import create_console
from eventlake.console.lake import LakeWatch
from eventlake.console.server import check_access
from eventlake.errors import UsageError
from eventlake.storage import LocalStorage


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


def test_the_query_box_reads_tables_not_files(tmp_path: Path) -> None:
    """The deletion audit (``_state/deletions/``) names the erased users: the query box refuses to
    read it, or any file by path, and says so."""
    client = _client(tmp_path)
    lake = tmp_path / "lake"
    audit = state_layout.deletion_audit_file(lake, "SRC1", "compact-1")
    LocalStorage().write(audit, b'{"user_id": "erased-user-42"}\n')
    for sql in (
        f"SELECT * FROM read_json('{audit}')",
        f"SELECT * FROM read_json_auto('{lake}/segment-data/_state/*/*/*.json')",
        f"SELECT * FROM read_parquet('{lake}/segment-data/**/*.parquet')",
        f"SELECT * FROM glob('{lake}/**')",
        f"SELECT * FROM '{audit}'",
        f"SELECT 1 AS one WHERE EXISTS (SELECT * FROM read_text('{audit}'))",
    ):
        answer = client.post("/query", data={"sql": sql})
        assert answer.status_code == 200 and "erased-user-42" not in answer.text.replace(sql, "")
        assert "reads the lake&#x27;s tables by name, not files" in answer.text, sql
        refused = client.post("/query.csv", data={"sql": sql})
        assert refused.status_code == 400 and "erased-user-42" not in refused.text


def test_the_token_is_asked_for_and_kept_in_a_cookie(tmp_path: Path) -> None:
    settings = Settings(
        path=None,
        lake=LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state"),
        console=ConsoleSettings(token=Secret("t0ken")),
    )
    client = TestClient(create_console(settings, LakeWatch(settings, None)), base_url="http://127.0.0.1:8089")
    assert client.get("/").status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer t0ke"}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer t0ken"}).status_code == 200
    answer = client.get("/runs?token=t0ken&source=web", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/runs?source=web"
    assert client.cookies["eventlake_console"] == "t0ken"
    assert client.get("/").status_code == 200  # the cookie
    client.cookies.clear()
    assert client.get("/?token=wrong", follow_redirects=False).status_code == 401


def test_off_loopback_the_console_needs_a_token(tmp_path: Path) -> None:
    lake = LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state")
    with pytest.raises(UsageError, match="without a token: set console.token"):
        check_access(Settings(path=None, lake=lake, console=ConsoleSettings(host="0.0.0.0")))
    check_access(Settings(path=None, lake=lake, console=ConsoleSettings(host="0.0.0.0", token=Secret("t"))))
    check_access(Settings(path=None, lake=lake, console=ConsoleSettings(host="127.0.0.1")))
