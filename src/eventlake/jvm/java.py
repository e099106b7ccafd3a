"""Java and the pyspark wheel's jars, which every JVM eventlake runs comes from, and whether a
JVM service answers on its port."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
from pathlib import Path

from eventlake.errors import DependencyError

JAVA_HINT = "eventlake needs Java 17: apt-get install openjdk-17-jre-headless (or set JAVA_HOME)"


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return os.path.join(java_home, "bin", "java")
    found = shutil.which("java")
    if found is None:
        raise DependencyError(JAVA_HINT)
    return found


def pyspark_home() -> Path:
    """The installed pyspark package: its ``jars/`` hold the Hive metastore, Derby and DataNucleus."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise DependencyError("pyspark is not installed: pip install 'eventlake[spark]'")
    return Path(spec.origin).parent


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False
