"""Real servers for the catalog tests, each in its own temporary directory on 127.0.0.1:
PostgreSQL (initdb + pg_ctl), MariaDB (mariadb-install-db + mariadbd), moto's AWS emulator,
Azurite's blob service, and `eventlake metastore`. They are installed by `make setup`
(scripts/ensure-db-servers.sh; Azurite by scripts/ensure-node-deps.sh); without them the tests
that need them are skipped (in CI they fail).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

START_TIMEOUT = 120.0
PASSWORD = "s3cret-Pw"  # noqa: S105 - a test server's password
USER = "eventlake"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def missing(what: str, installer: str = "scripts/ensure-db-servers.sh") -> None:
    message = f"{what} is not installed: run {installer} (make setup does)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def wait_until(check, what: str, process: subprocess.Popen | None = None, log: Path | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not check():
        if process is not None and process.poll() is not None:
            pytest.fail(f"{what} exited with {process.returncode}: {_tail(log)}")
        if time.monotonic() > deadline:
            pytest.fail(f"{what} did not start in {START_TIMEOUT} s: {_tail(log)}")
        time.sleep(0.2)


def _tail(log: Path | None) -> str:
    if log is None or not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-15:])


def stop_process(process: subprocess.Popen, timeout: float = 20) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# -- PostgreSQL ---------------------------------------------------------------------------------


@dataclass
class Postgres:
    """A PostgreSQL server in a temporary directory (run as the postgres user when we are root)."""

    root: Path
    port: int
    bin: Path
    databases: int = 0

    @classmethod
    def start(cls) -> Postgres:
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
        initdb = Path(found[-1]) if found else (Path(shutil.which("initdb") or "/nonexistent"))
        if not initdb.exists():
            missing("PostgreSQL (initdb)")
        root = Path(tempfile.mkdtemp(prefix="eventlake-pg-"))
        server = cls(root, free_port(), initdb.parent)
        os.chmod(root, 0o755)
        if os.geteuid() == 0:
            os.chown(root, pwd.getpwnam("postgres").pw_uid, -1)
        (root / "pw").write_text(PASSWORD + "\n")
        if os.geteuid() == 0:
            os.chown(root / "pw", pwd.getpwnam("postgres").pw_uid, -1)
        server._run(
            "initdb",
            "-D",
            str(root / "data"),
            "-U",
            USER,
            f"--pwfile={root / 'pw'}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--no-sync",
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {server.port} -k {root} -c fsync=off -c max_connections=60"
        )
        server._run("pg_ctl", "-D", str(root / "data"), "-l", str(root / "log"), "-w", "-o", options, "start")
        return server

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=self.root)
        if result.returncode != 0:
            pytest.fail(f"{tool} failed: {result.stdout}{result.stderr}{_tail(self.root / 'log')}")

    def create_database(self) -> str:
        """A new empty database; its JDBC URL."""
        self.databases += 1
        name = f"hms{self.databases}"
        self._run("psql", "-h", str(self.root), "-p", str(self.port), "-U", USER, "-d", "postgres",
                  "-c", f"CREATE DATABASE {name}")  # fmt: skip
        return f"jdbc:postgresql://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        subprocess.run(
            (["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else [])
            + [str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.root, ignore_errors=True)


# -- MariaDB ------------------------------------------------------------------------------------


@dataclass
class MariaDB:
    root: Path
    port: int
    process: subprocess.Popen
    databases: int = 0

    @classmethod
    def start(cls) -> MariaDB:
        server_bin = shutil.which("mariadbd") or (
            "/usr/sbin/mariadbd" if Path("/usr/sbin/mariadbd").exists() else ""
        )
        install = shutil.which("mariadb-install-db")
        if not server_bin or not install or not shutil.which("mariadb"):
            missing("MariaDB (mariadbd, mariadb-install-db)")
        root = Path(tempfile.mkdtemp(prefix="eventlake-mariadb-"))
        user = pwd.getpwuid(os.geteuid()).pw_name
        result = subprocess.run(
            [install, "--no-defaults", f"--user={user}", f"--datadir={root / 'data'}",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if result.returncode != 0:
            pytest.fail(f"mariadb-install-db failed: {result.stdout}{result.stderr}")
        port = free_port()
        log = root / "error.log"
        process = subprocess.Popen(
            [server_bin, "--no-defaults", f"--user={user}", f"--datadir={root / 'data'}",
             f"--socket={root / 'sock'}", f"--port={port}", "--bind-address=127.0.0.1",
             f"--pid-file={root / 'pid'}", f"--log-error={log}", "--skip-log-bin",
             "--innodb-buffer-pool-size=32M", "--innodb-flush-log-at-trx-commit=0", "--max-connections=60"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        server = cls(root, port, process)
        wait_until(lambda: (root / "sock").exists() and port_open(port), "mariadbd", process, log)
        return server

    def sql(self, statement: str) -> None:
        result = subprocess.run(
            ["mariadb", "--no-defaults", "-S", str(self.root / "sock"), "-u", "root", "-e", statement],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if result.returncode != 0:
            pytest.fail(f"mariadb: {statement}: {result.stderr}")

    def create_database(self) -> str:
        self.databases += 1
        name = f"hms{self.databases}"
        self.sql(
            f"CREATE DATABASE {name}; CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY "
            f"'{PASSWORD}'; GRANT ALL ON {name}.* TO '{USER}'@'127.0.0.1';"
        )
        return f"jdbc:mariadb://127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.root, ignore_errors=True)


# -- moto (AWS Glue and S3 emulator) ------------------------------------------------------------


@dataclass
class Moto:
    port: int
    process: subprocess.Popen
    log: Path

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(cls, log: Path, port: int = 0, env: dict[str, str] | None = None) -> Moto:
        """``python -m moto.server`` on 127.0.0.1:``port`` (a free one when 0; a start on the same
        port brings the store back, empty, after an outage), once it listens. ``env``: moto's
        settings (``INITIAL_NO_AUTH_ACTION_COUNT``, ``MOTO_ENABLE_RECORDING``, ...)."""
        try:
            import moto.server  # noqa: F401
        except ImportError:
            missing("moto[server]")
        port = port or free_port()
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        server = cls(port, process, log)
        wait_until(lambda: port_open(port), "moto_server", process, log)
        return server

    def stop(self) -> None:
        stop_process(self.process)


AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_EC2_METADATA_DISABLED": "true",
}


# -- Azurite (Azure Blob Storage emulator) ------------------------------------------------------

AZURITE = Path(__file__).resolve().parents[1] / "clients" / "node_modules" / ".bin" / "azurite-blob"
AZURITE_ACCOUNT = "devstoreaccount1"  # Azurite's well-known development account and its published key
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # noqa: S105
AZURITE_ENV = {"AZURE_STORAGE_KEY": AZURITE_KEY}


@dataclass
class Azurite:
    """Azurite's blob service (npm, installed by scripts/ensure-node-deps.sh) on a free port of
    127.0.0.1, in memory. Never on its default port 10000: Spark's Thrift server may hold it."""

    port: int
    process: subprocess.Popen
    log: Path
    workspace: Path

    @property
    def endpoint(self) -> str:
        """The account's blob endpoint, path-style as Azurite serves it."""
        return f"http://127.0.0.1:{self.port}/{AZURITE_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    @classmethod
    def start(cls, log: Path) -> Azurite:
        if not AZURITE.exists() or not shutil.which("node"):
            missing("Azurite (npm)", "scripts/ensure-node-deps.sh")
        port = free_port()
        workspace = Path(tempfile.mkdtemp(prefix="eventlake-azurite-"))
        with open(log, "ab") as out:
            process = subprocess.Popen(
                [str(AZURITE), "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                 "--extentMemoryLimit", "256", "--skipApiVersionCheck", "--disableTelemetry", "--silent"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=workspace,
            )  # fmt: skip
        server = cls(port, process, log, workspace)
        wait_until(lambda: port_open(port), "azurite-blob", process, log)
        return server

    def stop(self) -> None:
        stop_process(self.process)
        shutil.rmtree(self.workspace, ignore_errors=True)


# -- `eventlake metastore` ----------------------------------------------------------------------


@dataclass
class MetastoreCommand:
    """`eventlake --config CONFIG metastore --port PORT` as a subprocess."""

    config: Path
    log: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def start(self, env: dict[str, str]) -> MetastoreCommand:
        eventlake = Path(sys.executable).parent / "eventlake"
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [str(eventlake), "--config", str(self.config), "metastore", "--port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
            )
        wait_until(lambda: port_open(self.port), "eventlake metastore", self.process, self.log)
        return self

    def stop(self) -> int:
        assert self.process is not None
        stop_process(self.process, timeout=30)
        return self.process.returncode
