"""eventlake as an AWS user holding only the documented IAM policy (docs/operations.md), on a moto
server that enforces IAM (a server of its own: after its first few requests, every request must be
signed by a known user and allowed by that user's policies).

The policy is parsed out of docs/operations.md, so this test holds that page: the collector, the
sync, compaction, user deletion, replay, import, retention and the console all work as that user,
and every action the policy grants is one they call (moto records each request). Refusals are
``insufficient_permissions`` errors naming the call and the resource.

Where moto 5.2.5 checks less than AWS, the test checks for it or adapts, and says so:
- it authorizes every Glue call against the resource ``*`` (it computes no Glue ARN), so the Glue
  statement's ARNs can never match there: for moto, that statement's resource is ``*``;
- it authorizes DeleteObjects against the bucket's ARN (AWS: each key's), so for moto the user may
  also call s3:DeleteObject on ``arn:aws:s3:::BUCKET`` (an ARN no object has on AWS);
- it ignores ``StringLike`` conditions: the test checks every listing's prefix itself.

IAM enforcement costs moto next to nothing (800 S3 and Glue requests: 31.6-36.4 s enforced, 32.8-33.8 s
not, on a busy 2-core machine); the first test's minutes are its four Spark processes (three syncs and
a replay), so its data is a handful of messages.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
import httpx
import orjson
import pytest

from eventlake.config import load_settings
from eventlake.timestamps import day_start_ms, format_timestamp, parse_timestamp
from tests.catalog.conftest import clean_env
from tests.catalog.servers import Moto, free_port, stop_process
from tests.collect.harness import EVENTLAKE
from tests.objectstore.conftest import BUCKET, s3_project

pytestmark = pytest.mark.integration

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
ACCOUNT = "123456789012"  # moto's account
REGION = "us-east-1"
EXPORT_BUCKET = "iam-segment-export"
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
# the unsigned requests moto serves before it enforces IAM: the administrator's user, its policy
# and its access key (everything else is signed by a user)
UNSIGNED_CALLS = 3
START = 120.0  # seconds a command or a server may take to start


def documented_policies(bucket: str, prefix: str, export_bucket: str = "", export_prefix: str = "") -> tuple[
    dict[str, Any], list[dict[str, Any]]
]:  # fmt: skip
    """The documented IAM policy (the first JSON block of "Run on AWS" in docs/operations.md) and
    the statements it adds for `eventlake import` from a bucket (the second), with its placeholders
    replaced."""
    text = OPERATIONS.read_text()
    section = text[text.index("### Run on AWS") : text.index("### Run on Azure")]
    blocks = re.findall(r"```json\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "the Run on AWS section has the policy and the import statements"
    names = {"EXPORT_BUCKET": export_bucket, "EXPORT_PREFIX": export_prefix, "BUCKET": bucket,
             "PREFIX": prefix, "REGION": REGION, "ACCOUNT": ACCOUNT}  # fmt: skip
    filled = [re.sub("|".join(names), lambda m: names[m[0]], block) for block in blocks]
    return json.loads(filled[0]), json.loads(filled[1])


def for_moto(policy: dict[str, Any], bucket: str) -> dict[str, Any]:
    """``policy`` as moto can evaluate it (see the module docstring)."""
    statements = []
    for statement in policy["Statement"]:
        actions = _actions(statement)
        if all(a.startswith("glue:") for a in actions):
            statement = {**statement, "Resource": "*"}
        statements.append(statement)
    if any("s3:DeleteObject" in _actions(s) for s in statements):
        bucket_arn = f"arn:aws:s3:::{bucket}"
        statements.append({"Effect": "Allow", "Action": "s3:DeleteObject", "Resource": bucket_arn})
    return {**policy, "Statement": statements}


def _actions(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def without(policy: dict[str, Any], action: str) -> dict[str, Any]:
    """``policy`` without ``action`` in any statement."""
    statements = []
    for statement in policy["Statement"]:
        kept = [a for a in _actions(statement) if a != action]
        if kept:
            statements.append({**statement, "Action": kept})
    return {**policy, "Statement": statements}


@dataclass
class Aws:
    """moto enforcing IAM, recording every request, with an administrator allowed everything."""

    moto: Moto
    recording: Path
    admin: dict[str, str]

    def client(self, service: str, keys: dict[str, str] | None = None) -> Any:
        keys = keys or self.admin
        return boto3.client(
            service, endpoint_url=self.moto.endpoint, region_name=REGION,
            aws_access_key_id=keys["AWS_ACCESS_KEY_ID"], aws_secret_access_key=keys["AWS_SECRET_ACCESS_KEY"],
        )  # fmt: skip

    def user(self, policy: dict[str, Any]) -> dict[str, str]:
        """A new IAM user holding only ``policy``: its credentials, as environment variables."""
        iam, name = self.client("iam"), f"lake-{uuid.uuid4().hex[:8]}"
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="eventlake", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}

    def calls(self, keys: dict[str, str]) -> list[tuple[str, str, str]]:
        """(IAM action, resource, listing prefix) of every request signed with ``keys``."""
        found = []
        for line in self.recording.read_text().splitlines():
            entry = json.loads(line)
            headers = {k.lower(): v for k, v in entry["headers"].items()}
            if f"Credential={keys['AWS_ACCESS_KEY_ID']}/" in headers.get("authorization", ""):
                found.extend(_iam_actions(entry, headers))
        return found


def _iam_actions(entry: dict[str, Any], headers: dict[str, str]) -> list[tuple[str, str, str]]:
    """The IAM actions one recorded request needs: (action, resource, ListBucket's prefix)."""
    target = headers.get("x-amz-target", "")
    if target.startswith("AWSGlue."):
        return [("glue:" + target.removeprefix("AWSGlue."), "*", "")]
    url = urlsplit(entry["url"])
    query = parse_qs(url.query, keep_blank_values=True)
    bucket, _, key = unquote(url.path).lstrip("/").partition("/")
    method = entry["method"]
    if not key:
        if method == "GET" and "list-type" in query:
            return [("s3:ListBucket", f"arn:aws:s3:::{bucket}", query.get("prefix", [""])[0])]
        if method == "POST" and "delete" in query:
            body = base64.b64decode(entry["body"]) if entry["body_encoded"] else entry["body"].encode()
            keys = re.findall(rb"<Key>(.*?)</Key>", body)
            return [("s3:DeleteObject", f"arn:aws:s3:::{bucket}/{k.decode()}", "") for k in keys]
        raise AssertionError(f"an S3 call eventlake is not expected to make: {method} {entry['url']}")
    arn = f"arn:aws:s3:::{bucket}/{key}"
    if method in ("GET", "HEAD"):
        return [("s3:GetObject", arn, "")]
    if method == "PUT" and "x-amz-copy-source" in headers:
        return [("s3:GetObject", f"arn:aws:s3:::{unquote(headers['x-amz-copy-source']).lstrip('/')}", ""),
                ("s3:PutObject", arn, "")]  # fmt: skip
    if method == "PUT":
        return [("s3:PutObject", arn, "")]
    if method == "DELETE":
        return [("s3:DeleteObject", arn, "")]
    raise AssertionError(f"an S3 call eventlake is not expected to make: {method} {entry['url']}")


@pytest.fixture(scope="module")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aws]:
    folder = tmp_path_factory.mktemp("moto-iam")
    recording = folder / "requests.jsonl"
    settings = {"INITIAL_NO_AUTH_ACTION_COUNT": str(UNSIGNED_CALLS), "MOTO_ENABLE_RECORDING": "true",
                "MOTO_RECORDER_FILEPATH": str(recording)}  # fmt: skip
    server = Moto.start(folder / "moto.log", env=settings)
    try:
        unsigned = Aws(server, recording, {"AWS_ACCESS_KEY_ID": "unsigned", "AWS_SECRET_ACCESS_KEY": "-"})
        iam = unsigned.client("iam")
        iam.create_user(UserName="admin")
        iam.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=json.dumps(ALLOW_ALL))
        key = iam.create_access_key(UserName="admin")["AccessKey"]  # the last unsigned call
        admin = {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}
        aws = Aws(server, recording, admin)
        with pytest.raises(Exception, match="InvalidAccessKeyId|not valid"):  # IAM is enforced now
            unsigned.client("s3").list_buckets()
        for bucket in (BUCKET, EXPORT_BUCKET):
            aws.client("s3").create_bucket(Bucket=bucket)
        yield aws
    finally:
        server.stop()


@dataclass
class Project:
    """A project whose lake is ``s3://BUCKET/<prefix>`` and catalog Glue, run as ``keys``' user."""

    config: Path
    prefix: str
    slug: str
    keys: dict[str, str]
    aws: Aws

    @classmethod
    def create(cls, directory: Path, aws: Aws, prefix: str, policy: dict[str, Any]) -> Project:
        """A project on ``prefix`` of the bucket; its user holds ``policy`` (as moto evaluates it)."""
        config = s3_project(directory, aws.moto, prefix, "web")
        return cls(config, prefix, "web", aws.user(for_moto(policy, BUCKET)), aws)

    @property
    def settings(self) -> Any:
        return load_settings(self.config, environ={})

    @property
    def source(self) -> Any:
        return self.settings.source(self.slug)

    def env(self, **settings: str) -> dict[str, str]:
        """The environment of a command run as the user: its keys only (no session token)."""
        env = {k: v for k, v in clean_env().items() if not k.startswith("AWS_")}
        env.update(self.keys, AWS_DEFAULT_REGION=REGION, AWS_EC2_METADATA_DISABLED="true")
        return {**env, **{f"EVENTLAKE__{k.upper()}": v for k, v in settings.items()}}

    def run(self, *args: str, **settings: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(EVENTLAKE), "--config", str(self.config), *args],
            capture_output=True, text=True, timeout=600, env=self.env(**settings),
        )  # fmt: skip
        assert done.returncode == 0, f"eventlake {' '.join(args)}:\n{done.stderr[-3000:]}"
        return done

    def archive_files(self) -> list[str]:
        prefix = f"{self.prefix}/segment-logs/{self.source.id}/"
        answer = self.aws.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        return [o["Key"] for o in answer.get("Contents", [])]


@dataclass
class Server:
    """An `eventlake serve` or `eventlake console` subprocess of ``project``'s user."""

    process: subprocess.Popen[bytes]
    url: str

    @classmethod
    def start(cls, project: Project, command: str, log: Path, **settings: str) -> Server:
        port = free_port()
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(EVENTLAKE), "--config", str(project.config), command, "--port", str(port)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=project.env(**settings),
            )  # fmt: skip
        server = cls(process, f"http://127.0.0.1:{port}")
        deadline = time.monotonic() + START
        while True:
            assert process.poll() is None, f"eventlake {command} exited: {log.read_text()[-2000:]}"
            try:
                httpx.get(server.url, timeout=1)
                return server
            except httpx.TransportError:
                assert time.monotonic() < deadline, f"eventlake {command} did not start: {log.read_text()}"
                time.sleep(0.2)

    def wait_for(self, done: Any, path: str) -> None:
        """Until ``done(the page at path)``."""
        deadline = time.monotonic() + START
        while not done(httpx.get(self.url + path, timeout=30).text):
            assert time.monotonic() < deadline, f"{path} never changed"
            time.sleep(0.2)

    def stop(self) -> None:
        stop_process(self.process, timeout=60)


def track(message_id: str, user: str, **properties: Any) -> dict[str, Any]:
    return {"type": "track", "userId": user, "event": "Order Completed", "messageId": message_id,
            "properties": properties}  # fmt: skip


def collect(project: Project, collector: Server, messages: list[dict[str, Any]]) -> None:
    """Send ``messages`` and wait until the collector has sealed them into one more archive file."""
    before = len(project.archive_files())
    key = f"wk_{project.slug}"
    answer = httpx.post(f"{collector.url}/v1/batch", json={"batch": messages}, auth=(key, ""))
    assert answer.json() == {"success": True}
    deadline = time.monotonic() + START
    while len(project.archive_files()) == before:
        assert time.monotonic() < deadline, "the collector sealed nothing"
        time.sleep(0.2)


def segment_export(aws: Aws, prefix: str, received: str) -> None:
    """One gzip file of Segment's S3 destination (an old day) in the export bucket."""
    at = parse_timestamp(received)
    message = {"anonymousId": "a-1", "event": "Order Completed", "messageId": "old-1", "userId": "u1",
               "originalTimestamp": received, "receivedAt": received, "sentAt": received,
               "timestamp": received, "projectId": "AbC123", "properties": {"revenue": 3}, "type": "track",
               "version": 2}  # fmt: skip
    key = f"{prefix}/segment-logs/AbC123/{day_start_ms(at)}/{int(at.timestamp() * 1000)}.a1b2.gz"
    body = gzip.compress(orjson.dumps(message) + b"\n")
    aws.client("s3").put_object(Bucket=EXPORT_BUCKET, Key=key, Body=body)
    assert format_timestamp(at) == received


def test_everything_runs_as_a_user_holding_only_the_documented_policy(aws, tmp_path):
    prefix, export = f"t-{uuid.uuid4().hex[:10]}", f"export-{uuid.uuid4().hex[:8]}"
    policy, import_statements = documented_policies(BUCKET, prefix, EXPORT_BUCKET, export)
    granted = {**policy, "Statement": [*policy["Statement"], *import_statements]}
    project = Project.create(tmp_path / "project", aws, prefix, granted)
    database = project.source.database

    collector = Server.start(project, "serve", tmp_path / "serve.log", collector__seal_max_age_seconds="0.5")
    try:
        identify = {"type": "identify", "userId": "u2", "messageId": "i1", "traits": {"plan": "pro"}}
        collect(project, collector, [track("m1", "u1", revenue=9.5), track("m2", "u2", revenue=12), identify])
        project.run("sync")
        # a new column (UpdateTable, the views replaced) and a value that is no number (quarantined)
        collect(project, collector, [track("m3", "u1", revenue="plenty", coupon="FALL")])
        project.run("sync")
    finally:
        collector.stop()
    project.run("compact", "--older-than", "0")
    project.run("users", "delete", "u2")
    project.run("replay", "--source", project.slug)
    segment_export(aws, export, "2026-01-02T09:15:00.000Z")
    imported = project.run(
        "import", f"s3://{EXPORT_BUCKET}/{export}", "--source", project.slug,
        "--endpoint-url", aws.moto.endpoint, "--sync",
    )  # fmt: skip
    assert "imported 1 files" in imported.stderr, imported.stderr
    expired = project.run("retention", retention__archive_days="60", retention__table_days="60")
    assert re.search(r"deleted 1 archive days and [1-9]\d* table partitions", expired.stderr), expired.stderr

    console = Server.start(project, "console", tmp_path / "console.log")
    try:
        console.wait_for(lambda page: "not yet: the lake is being read" not in page, "/runs")
        assert "Success" in httpx.get(f"{console.url}/runs", timeout=30).text
        schema = httpx.get(f"{console.url}/schemas/{database}/track_order_completed", timeout=30).text
        assert "properties_coupon" in schema
        assert "plenty" in httpx.get(f"{console.url}/quarantine", timeout=30).text
        sql = f"SELECT message_id FROM {database}.track_order_completed ORDER BY 1"
        answer = httpx.post(f"{console.url}/query", data={"sql": sql}, timeout=60).text
        assert re.findall(r"<td>(\w+)</td>", answer) == ["m1", "m3"]  # u2's m2 deleted, 2026-01-02 expired
    finally:
        console.stop()

    # exactly what they need: every action granted was called, and nothing else; only in the lake
    calls = aws.calls(project.keys)
    called = {action for action, _, _ in calls}
    assert called == {a for s in granted["Statement"] for a in _actions(s)}
    lake, source = f"arn:aws:s3:::{BUCKET}/{project.prefix}/", f"arn:aws:s3:::{EXPORT_BUCKET}/{export}/"
    objects = [c for c in calls if c[0].startswith("s3:") and c[0] != "s3:ListBucket"]
    assert objects and [c for c in objects if not c[1].startswith((lake, source))] == []
    listings = {(resource, prefix) for action, resource, prefix in calls if action == "s3:ListBucket"}
    assert all(prefix.startswith(f"{project.prefix}/") for r, prefix in listings if r.endswith(BUCKET))
    assert all(prefix.startswith(f"{export}/") for r, prefix in listings if r.endswith(EXPORT_BUCKET))


def as_user(monkeypatch: pytest.MonkeyPatch, keys: dict[str, str]) -> None:
    """This process's boto3 clients made from now on sign as ``keys``' user."""
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # the default session keeps the keys it read


def test_refusals_are_insufficient_permissions_naming_the_call_and_the_resource(aws, tmp_path, monkeypatch):
    from eventlake.catalog import TableSpec
    from eventlake.catalog.glue import GlueCatalog
    from eventlake.errors import PermissionsError
    from eventlake.storage import ObjectPath, StorageError, StoragePermissionsError
    from eventlake.storage.s3 import S3Storage

    prefix = f"t-{uuid.uuid4().hex[:10]}"
    policy = documented_policies(BUCKET, prefix)[0]
    project = Project.create(tmp_path / "project", aws, prefix, without(policy, "s3:PutObject"))
    root = ObjectPath("s3", BUCKET, prefix)
    aws.client("s3").put_object(Bucket=BUCKET, Key=f"{prefix}/kept", Body=b"1")

    as_user(monkeypatch, project.keys)
    storage = S3Storage(endpoint_url=aws.moto.endpoint, region=REGION)
    assert storage.read(root / "kept") == b"1"
    refusals = {
        "PutObject": (lambda: storage.write(root / "new", b"2"), root / "new", "allow s3:PutObject on "
                      f"arn:aws:s3:::{BUCKET}/{prefix}/new"),
        "ListObjectsV2": (lambda: storage.list(ObjectPath("s3", EXPORT_BUCKET, "x")),
                          ObjectPath("s3", EXPORT_BUCKET, "x/"),
                          f"allow s3:ListBucket on arn:aws:s3:::{EXPORT_BUCKET} for the prefix x/"),
        "CopyObject": (lambda: storage.publish(root / "kept", root / "final"), root / "final",
                       f"allow s3:GetObject on arn:aws:s3:::{BUCKET}/{prefix}/kept and s3:PutObject on "
                       f"arn:aws:s3:::{BUCKET}/{prefix}/final"),
    }  # fmt: skip
    for call, (attempt, resource, fix) in refusals.items():
        with pytest.raises(StoragePermissionsError) as error:
            attempt()
        refused = error.value
        assert refused.code == "insufficient_permissions" and isinstance(refused, StorageError)
        assert (refused.call, refused.resource) == (call, str(resource))
        assert str(refused).startswith(f"S3 refused {call} on {resource} (AccessDenied): {fix}"), str(refused)

    # the `eventlake` command: a one-line error, the CLI's exit code
    done = subprocess.run(
        [str(EVENTLAKE), "--config", str(project.config), "suppress", "add", "u9", "--source", project.slug],
        capture_output=True, text=True, timeout=120, env=project.env(),
    )  # fmt: skip
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    refusal = r"S3 refused PutObject on s3://\S+/suppression/\S+ \(AccessDenied\): allow s3:PutObject on arn:"
    assert re.search(
        r"^error: suppression list s3://\S+: cannot take the lease: \S+: " + refusal, done.stderr
    )

    # DeleteObjects answers each key: the refused one is named
    project.keys = aws.user(for_moto(without(policy, "s3:DeleteObject"), BUCKET))
    as_user(monkeypatch, project.keys)
    storage = S3Storage(endpoint_url=aws.moto.endpoint, region=REGION)
    with pytest.raises(
        StoragePermissionsError, match=rf"S3 refused DeleteObjects on {root}/kept \(AccessDenied\)"
    ):
        storage.delete_tree(root)
    assert storage.read(root / "kept") == b"1"

    # Glue: the operation, the table's ARN, the IAM action
    project.keys = aws.user(for_moto(without(policy, "glue:CreateTable"), BUCKET))
    as_user(monkeypatch, project.keys)
    catalog = GlueCatalog.from_settings(project.settings.catalog)
    catalog.ensure_database("iam_refusals")
    spec = TableSpec("iam_refusals", "page", (("message_id", "string"),), ("day",), f"{root}/page")
    with pytest.raises(PermissionsError) as error:
        catalog.create_table(spec)
    refused = error.value
    assert refused.code == "insufficient_permissions"
    assert refused.fields == {
        "call": "glue:CreateTable",
        "resource": f"arn:aws:glue:{REGION}:ACCOUNT:table/iam_refusals/page",
    }
    assert str(refused).startswith("Glue refused creating table iam_refusals.page (CreateTable): ")
    assert "allow glue:CreateTable on arn:aws:glue:us-east-1:ACCOUNT:catalog, " in str(refused)


def test_databases_an_administrator_created_need_no_create_database(aws, tmp_path, monkeypatch):
    """Segment Data Lakes' set-up: the role may not call CreateDatabase, an administrator created
    the source's database and ``__segment_datalake`` beforehand. The sync never asks to create them."""
    from eventlake.catalog.glue import GlueCatalog
    from eventlake.errors import PermissionsError
    from eventlake.sync.protocol.report import REPORTS_DATABASE

    prefix = f"t-{uuid.uuid4().hex[:10]}"
    policy = without(documented_policies(BUCKET, prefix)[0], "glue:CreateDatabase")
    project = Project.create(tmp_path / "project", aws, prefix, policy)
    database = project.source.database
    for name in (database, REPORTS_DATABASE):
        try:
            aws.client("glue").create_database(DatabaseInput={"Name": name})
        except aws.client("glue").exceptions.AlreadyExistsException:
            pass  # the reports' database of another test of this server

    collector = Server.start(project, "serve", tmp_path / "serve.log", collector__seal_max_age_seconds="0.5")
    try:
        page = {"type": "page", "userId": "u1", "messageId": "p1", "name": "Home"}
        collect(project, collector, [track("m1", "u1", revenue=9.5), page])
    finally:
        collector.stop()
    synced = project.run("sync")
    assert "Success, 2 rows in 2 tables" in synced.stderr, synced.stderr
    tables = aws.client("glue").get_tables(DatabaseName=database)["TableList"]
    assert {"track_order_completed", "page"} <= {t["Name"] for t in tables}
    assert "glue:CreateDatabase" not in {action for action, _, _ in aws.calls(project.keys)}

    # a database nobody created: the refusal says which call and which database
    as_user(monkeypatch, project.keys)
    catalog = GlueCatalog.from_settings(project.settings.catalog)
    refusal = (
        r"refused creating database nowhere_db \(CreateDatabase\).*CreateDatabase on .*:database/nowhere_db"
    )
    with pytest.raises(PermissionsError, match=refusal):
        catalog.ensure_database("nowhere_db")
