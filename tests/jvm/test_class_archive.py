"""The Spark driver's class-data archive (eventlake.jvm.class_archive): its key, who makes it, and
that only a whole archive a JVM maps is ever put in place."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from eventlake.config import LakeSettings, Settings, SparkSettings
from eventlake.jvm import class_archive
from eventlake.jvm.class_archive import ArchivePlan, archive_name, default_folder, maps, plan
from eventlake.jvm.java import java_executable

QUIET = ["-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def settings_for(tmp_path: Path) -> Settings:
    lake = LakeSettings(root=tmp_path / "lake", state_dir=tmp_path / "state")
    return Settings(path=None, lake=lake, spark=SparkSettings(class_archive_dir=str(tmp_path / "jvm")))


def small_archive(path: Path) -> Path:
    """A real dynamic archive: the classes of `java -version`, written at its exit."""
    subprocess.run([java_executable(), f"-XX:ArchiveClassesAtExit={path}", *QUIET, "-version"], check=True)
    return path


def test_the_key_follows_the_class_path_the_java_and_the_pyspark_version(tmp_path: Path) -> None:
    home = tmp_path / "pyspark"
    home.mkdir()
    (home / "version.py").write_text('__version__: str = "4.3.0"\n')
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    (jdk / "bin" / "java").write_text("")
    (jdk / "release").write_text('IMPLEMENTOR="x"\nJAVA_VERSION="17.0.15"\n')
    java = str(jdk / "bin" / "java")

    name = archive_name("", java, home)
    assert name.startswith("spark-4.3.0-java-17.0.15-") and name.endswith(".jsa")
    assert archive_name("/usr/share/java/postgresql.jar", java, home) != name
    (jdk / "release").write_text('JAVA_VERSION="17.0.16"\n')
    assert archive_name("", java, home).startswith("spark-4.3.0-java-17.0.16-")
    (home / "version.py").write_text("__version__ = '4.4.0'\n")
    assert archive_name("", java, home).startswith("spark-4.4.0-java-17.0.16-")
    jar = tmp_path / "metastore.jar"  # a jar replaced where it was (an upgrade): a new archive
    jar.write_bytes(b"PK old")
    before = archive_name(str(jar), java, home)
    assert archive_name(str(jar), java, home) == before
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 1_000_000_000))
    assert archive_name(str(jar), java, home) != before
    without_jars = archive_name("", java, home)
    (home / "jars").mkdir()  # the wheel reinstalled: its jars folder is new
    assert archive_name("", java, home) != without_jars


def test_the_default_folder_is_the_machines_cache(tmp_path: Path) -> None:
    assert default_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "eventlake" / "jvm"
    assert default_folder({}) == Path.home() / ".cache" / "eventlake" / "jvm"


def test_one_process_makes_the_archive_the_others_start_without_then_map_it(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    assert plan(replace(settings, spark=replace(settings.spark, class_archive=False)), "") is None

    maker = plan(settings, "")
    assert maker is not None and maker.creating and maker.marker is not None and maker.temporary is not None
    assert maker.java_options()[0] == f"-XX:ArchiveClassesAtExit={maker.temporary}"
    assert plan(settings, "") is None  # this (live) process is making it: start without

    small_archive(maker.temporary)
    jvm = subprocess.Popen([java_executable(), "-version"], stderr=subprocess.DEVNULL)
    jvm.wait()
    assert maker.publish(jvm.pid)
    assert not maker.marker.exists() and not maker.temporary.exists()

    user = plan(settings, "")
    assert user == ArchivePlan(maker.path)
    assert user.java_options() == [f"-XX:SharedArchiveFile={maker.path}", *QUIET]


def test_a_damaged_archive_is_never_put_in_place(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    maker = plan(settings, "")
    assert maker is not None and maker.temporary is not None
    whole = small_archive(tmp_path / "whole.jsa")
    assert maps(whole)
    maker.temporary.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])  # a JVM killed mid-write
    assert not maps(maker.temporary)  # mapping it crashes a JVM

    jvm = subprocess.Popen([java_executable(), "-version"], stderr=subprocess.DEVNULL)
    jvm.wait()
    assert not maker.publish(jvm.pid)
    assert not maker.path.exists() and not maker.temporary.exists()
    assert plan(settings, "") is not None  # the next process tries again


def test_a_marker_left_by_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    folder = tmp_path / "jvm"
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    pid = int(dead.stdout)
    name = archive_name("")
    (folder / f"{name}.creating").write_text(str(pid))
    (folder / f"{name}.{pid}.tmp").write_bytes(b"half")

    maker = plan(settings, "", pid=os.getpid())
    assert maker is not None and maker.creating
    assert (folder / f"{name}.creating").read_text() == str(os.getpid())
    assert not (folder / f"{name}.{pid}.tmp").exists()  # the dead creator's leftover


def test_an_archive_unused_for_a_month_is_deleted_when_another_is_made(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    folder = tmp_path / "jvm"
    folder.mkdir()
    day, now = class_archive.DAY_SECONDS, time.time()
    used = folder / archive_name("")  # this class path's: mapped now, after 40 days unused
    upgraded = folder / "spark-4.2.0-java-17.0.15-0123456789ab.jsa"  # an upgrade's old one
    recent = folder / "spark-4.3.0-java-17.0.15-ba9876543210.jsa"  # another project's, in use
    for archive, age in ((used, 40), (upgraded, 31), (recent, 29)):
        archive.write_bytes(b"jsa")
        os.utime(archive, (now - age * day, now - age * day))

    assert plan(settings, "") == ArchivePlan(used)
    assert now - used.stat().st_mtime < day  # marked used
    maker = plan(settings, "/usr/share/java/postgresql.jar")  # another class path: a new archive
    assert maker is not None and maker.creating
    assert sorted(p.name for p in folder.glob("*.jsa")) == sorted([used.name, recent.name])
    maker.abandon()


def test_a_class_path_with_the_projects_private_folder_gets_no_archive(tmp_path: Path) -> None:
    settings = settings_for(tmp_path)
    private = settings.lake.state_dir / "metastore-client"  # a hive-site.xml with a password
    assert plan(settings, f"{private}{os.pathsep}/usr/share/java/postgresql.jar") is None

    archive = plan(settings, "/usr/share/java/postgresql.jar")
    assert archive is not None and archive.creating
    assert archive.path.name == archive_name("/usr/share/java/postgresql.jar")
    archive.abandon()


SESSION = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from eventlake.config import LakeSettings, Settings, SparkSettings
    from eventlake.jvm.session import spark_session

    state, folder = Path(sys.argv[1]), sys.argv[2]
    settings = Settings(path=None, lake=LakeSettings(root=state / "lake", state_dir=state),
                        spark=SparkSettings(master="local[1]", class_archive_dir=folder))
    session = spark_session(settings, "archive-test")
    print(session.range(5).selectExpr("sum(id)").collect()[0][0])
    session.stop()
    """
)


@pytest.mark.spark
@pytest.mark.integration
def test_a_session_makes_the_archive_the_next_maps_it_and_a_stale_one_is_ignored(tmp_path: Path) -> None:
    folder = tmp_path / "jvm"

    def session(state: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-c", SESSION, str(tmp_path / state), str(folder)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "10"
        assert "cds" not in done.stdout + done.stderr and "shared archive" not in done.stderr.lower()
        return done

    session("first")
    deadline = time.monotonic() + 600
    # published by a detached process once the first JVM wrote it (the name depends on the extra
    # class path: the embedded Derby metastore's ORM jar is on it)
    while any(folder.glob("*.creating")) and time.monotonic() < deadline:
        time.sleep(0.5)
    [archive] = folder.glob("spark-*.jsa")
    assert sorted(p.name for p in folder.iterdir()) == [archive.name]  # no marker, no temporary left
    assert maps(archive)
    session("second")  # maps it

    small_archive(tmp_path / "stale.jsa")  # made for another class path: the JVM ignores it
    os.replace(tmp_path / "stale.jsa", archive)
    session("third")
    assert class_archive.QUIET == tuple(QUIET)
