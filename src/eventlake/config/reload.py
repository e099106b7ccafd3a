"""Sources without restarts: a running process re-reads ``eventlake.toml`` when it changes.

:class:`SourcesWatch` holds the settings a long-running process (the collector, ``up``'s engine)
works with. :meth:`SourcesWatch.check`, called as often as the caller likes, looks at the file at
most once per ``interval``: its size, modification time and inode (an atomic rewrite is a new
inode), then, when those changed, its contents' hash. A changed file is loaded and validated like
at start (the process's environment overrides included); its ``[[sources]]`` replace the running
ones, everything else stays as the process started (ports, the lake, Spark need a restart: a
changed section is logged as such). A file that does not load (bad TOML, an invalid setting, a
duplicated write key, a missing file) keeps the running settings and logs the error once, naming
the problem, until the file changes again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from eventlake.config.loader import settings_from_text
from eventlake.config.settings import Settings, SourceSettings
from eventlake.errors import ConfigError, EventLakeError

log = logging.getLogger("eventlake.config")

CHECK_SECONDS = 1.0  # a change to eventlake.toml is seen within about this long
# the sections a running process keeps as it started (sources aside, every other field of Settings)
_RESTART_SECTIONS = tuple(f.name for f in dataclasses.fields(Settings) if f.name not in ("path", "sources"))


def _log_warning(line: str) -> None:
    log.warning("%s", line)


@dataclasses.dataclass(frozen=True)
class SourceChanges:
    """What a reload changed, by slug."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()
    enabled: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # another setting of the source (write key, fill_ip, ...)

    def __bool__(self) -> bool:
        return any((self.added, self.removed, self.disabled, self.enabled, self.changed))

    def describe(self) -> str:
        """``added ios; disabled web`` (empty when nothing changed).

        >>> SourceChanges(added=("ios",), disabled=("web", "app")).describe()
        'added ios; disabled web, app'
        """
        parts = [
            (name, getattr(self, name)) for name in ("added", "removed", "disabled", "enabled", "changed")
        ]
        return "; ".join(f"{name} {', '.join(slugs)}" for name, slugs in parts if slugs)


def source_changes(old: tuple[SourceSettings, ...], new: tuple[SourceSettings, ...]) -> SourceChanges:
    before = {s.slug: s for s in old}
    after = {s.slug: s for s in new}
    kept = [slug for slug in after if slug in before and after[slug] != before[slug]]
    flipped = {slug for slug in kept if after[slug].enabled != before[slug].enabled}
    return SourceChanges(
        added=tuple(slug for slug in after if slug not in before),
        removed=tuple(slug for slug in before if slug not in after),
        disabled=tuple(slug for slug in flipped if not after[slug].enabled),
        enabled=tuple(slug for slug in flipped if after[slug].enabled),
        changed=tuple(
            slug
            for slug in kept
            if dataclasses.replace(after[slug], enabled=True)
            != dataclasses.replace(before[slug], enabled=True)
        ),
    )


class SourcesWatch:
    """The running settings of a process whose sources follow ``eventlake.toml``.

    ``settings.path`` is the file watched (None: nothing to watch, :meth:`check` never changes
    anything). ``say`` gets one line per reload and per problem (default: the ``eventlake.config``
    logger, at warning level)."""

    def __init__(
        self,
        settings: Settings,
        *,
        environ: Mapping[str, str] | None = None,
        interval: float = CHECK_SECONDS,
        say: Callable[[str], None] = _log_warning,
    ) -> None:
        self.settings = settings
        self.environ = os.environ if environ is None else environ
        self.interval = interval
        self.say = say
        self._checked = time.monotonic()
        self._stat: tuple[int, int, int] | None = None
        self._digest = b""
        self._file: Settings | None = None  # the settings as loaded from the file (no CLI flags)
        self._failing = ""  # the problem last said (said again only once it changes)
        if settings.path is not None:
            self._stat = self._signature()
            try:
                text = self._read()
                self._digest = self._hash(text)
                self._file = self._load(text)
            except (ConfigError, OSError, UnicodeDecodeError):
                pass  # the process loaded it a moment ago; the first check says what is wrong now

    def check(self, *, force: bool = False) -> SourceChanges | None:
        """Re-read the file if it changed (looked at once per ``interval`` unless ``force``); what
        changed in the sources when they did (``self.settings`` is then the new settings), else None."""
        path = self.settings.path
        now = time.monotonic()
        if path is None or (not force and now - self._checked < self.interval):
            return None
        self._checked = now
        stat = self._signature()
        if stat is None:
            self._stat, self._digest = None, b""
            self._fail(f"{path} is gone")
            return None
        if stat == self._stat:
            return None
        self._stat = stat
        try:
            text = self._read()
        except (OSError, UnicodeDecodeError) as exc:
            self._stat = None  # read it again at the next check
            self._fail(f"cannot read {path}: {exc}")
            return None
        digest = self._hash(text)
        if digest == self._digest:  # the same contents (loaded, or refused and said)
            return None
        self._digest = digest
        try:
            loaded = self._load(text)
        except EventLakeError as exc:  # an invalid setting (ConfigError), a lake root without a back end
            self._fail(str(exc))
            return None
        if self._failing:
            self.say(f"{path} loads again")
            self._failing = ""
        self._say_restart_sections(loaded)
        self._file = loaded
        changes = source_changes(self.settings.sources, loaded.sources)
        if changes:
            self.settings = dataclasses.replace(self.settings, sources=loaded.sources)
            self.say(f"sources reloaded from {path}: {changes.describe()}")
            return changes
        return None

    def _fail(self, problem: str) -> None:
        if problem != self._failing:
            count = len(self.settings.sources)
            self.say(
                f"{self.settings.path} changed but was not loaded: {problem}; the {count} sources "
                "loaded before stay in use until the file is fixed"
            )
            self._failing = problem

    def _say_restart_sections(self, loaded: Settings) -> None:
        if self._file is None:
            return
        changed = [name for name in _RESTART_SECTIONS if getattr(loaded, name) != getattr(self._file, name)]
        if changed:
            sections = ", ".join(f"[{name}]" for name in changed)
            self.say(f"{sections} changed in {self.settings.path}: restart for that to take effect")

    def _signature(self) -> tuple[int, int, int] | None:
        assert self.settings.path is not None
        try:
            stat = os.stat(self.settings.path)
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size, stat.st_ino

    def _read(self) -> str:
        assert self.settings.path is not None
        return Path(self.settings.path).read_text(encoding="utf-8")

    @staticmethod
    def _hash(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()

    def _load(self, text: str) -> Settings:
        assert self.settings.path is not None
        return settings_from_text(text, Path(self.settings.path), self.environ)
