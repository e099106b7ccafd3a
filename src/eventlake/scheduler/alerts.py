"""Sync failure alerts, as Segment Data Lakes sent them: on the 1st, 5th and 20th failure in a row
of a source's sync (``alerts.on_failures``), and on its first success after failing
(``alerts.on_recovery``), to the webhook and the email addresses of ``[alerts]``. And, always, on a
sync that found damaged archive files (quarantined by name, :mod:`eventlake.sync.protocol.damaged`): the run
did not fail, but those files' messages are not in the lake until they are restored.

``eventlake sync`` and ``up``'s engine call :func:`notify_results` with each run's results; the
failures in a row are counted in the source's health file (:mod:`eventlake.sync.maintenance.health`), so the
count goes on across restarts and across ``eventlake sync`` and ``up``. A channel that fails is
logged and skipped: it never fails the sync, and the alert is not sent again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlake.config import AlertsSettings, Settings
from eventlake.progress import Say
from eventlake.scheduler.channels import post_webhook, send_email
from eventlake.sync.maintenance.health import SyncHealth, record_result
from eventlake.sync.protocol.report import SyncResult
from eventlake.timestamps import format_timestamp

FAILED, RECOVERED, DAMAGED = "sync_failed", "sync_recovered", "archive_file_damaged"


@dataclass(frozen=True)
class Alert:
    """One alert: a source's sync failed for the n-th time in a row, or recovered, or found damaged
    archive files."""

    event: str  # FAILED | RECOVERED | DAMAGED
    source: str  # the slug
    source_id: str
    status: str  # the result's status (Failed; Success, Partial Success or Nothing to do)
    failures_in_a_row: int  # FAILED: counting this one; RECOVERED: the failures before the success
    error: str  # FAILED: this run's error; RECOVERED: the last failure's
    error_code: str
    run_id: str  # empty when the sync failed before its run started
    time: datetime  # when the result's run finished
    first_failure: datetime | None  # when the streak's first failure finished
    files: tuple[str, ...] = ()  # DAMAGED: the damaged archive files (keys), quarantined

    def text(self) -> str:
        """One line for people (Slack's ``text``, the email's first line)."""
        run = f" (run {self.run_id})" if self.run_id else ""
        if self.event == DAMAGED:
            count = f"{len(self.files)} damaged archive file{'s' if len(self.files) != 1 else ''}"
            return (
                f"eventlake: the sync of source {self.source}{run} found {count}, quarantined (none of "
                f"their messages synced): {self.error}"
            )
        if self.event == FAILED:
            return (
                f"eventlake: the sync of source {self.source} failed{run}, "
                f"{ordinal(self.failures_in_a_row)} failure in a row: {self.error}"
            )
        since = f" since {format_timestamp(self.first_failure)}" if self.first_failure else ""
        return (
            f"eventlake: the sync of source {self.source} recovered ({self.status}{run}) after "
            f"{self.failures_in_a_row} failure{'s' if self.failures_in_a_row != 1 else ''} in a row{since}"
        )

    def payload(self) -> dict[str, Any]:
        """The webhook's JSON: Slack's ``text`` and the same facts as fields."""
        return {
            "text": self.text(),
            "event": self.event,
            "source": self.source,
            "source_id": self.source_id,
            "status": self.status,
            "failures_in_a_row": self.failures_in_a_row,
            "error": self.error,
            "error_code": self.error_code,
            "run_id": self.run_id,
            "time": format_timestamp(self.time),
            "first_failure": format_timestamp(self.first_failure) if self.first_failure else None,
            "files": list(self.files),
        }

    def subject(self) -> str:
        if self.event == DAMAGED:
            return f"eventlake: damaged archive files in {self.source} ({len(self.files)})"
        if self.event == FAILED:
            return (
                f"eventlake sync failed: {self.source} ({ordinal(self.failures_in_a_row)} failure in a row)"
            )
        return f"eventlake sync recovered: {self.source}"

    def body(self) -> str:
        lines = [
            self.text(),
            "",
            f"source:            {self.source} ({self.source_id})",
            f"status:            {self.status}",
            f"failures in a row: {self.failures_in_a_row}",
            f"run:               {self.run_id or '(none: the sync failed before its run started)'}",
            f"time:              {format_timestamp(self.time)}",
        ]
        if self.event == DAMAGED:  # the run did not fail: no streak to tell
            del lines[4]
        if self.first_failure:
            lines.append(f"first failure:     {format_timestamp(self.first_failure)}")
        lines += [f"damaged file:      {key}" for key in self.files]
        if self.error:
            lines += [f"error code:        {self.error_code}", "", self.error]
        lines += ["", f"`eventlake reports --source {self.source}` lists the source's runs."]
        return "\n".join(lines) + "\n"


def ordinal(n: int) -> str:
    """
    >>> [ordinal(n) for n in (1, 2, 3, 4, 5, 11, 12, 13, 20, 21, 22, 101)]
    ['1st', '2nd', '3rd', '4th', '5th', '11th', '12th', '13th', '20th', '21st', '22nd', '101st']
    """
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def alert_for(
    before: SyncHealth, after: SyncHealth, result: SyncResult, alerts: AlertsSettings
) -> Alert | None:
    """The alert ``result`` calls for, given the source's health before and after it, or None."""
    if after.failures_in_a_row > before.failures_in_a_row and after.failures_in_a_row in alerts.on_failures:
        return Alert(
            FAILED, result.source, result.source_id, result.status, after.failures_in_a_row, result.error,
            result.error_code, result.run_id, result.finish_time, after.first_failure,
        )  # fmt: skip
    if before.failures_in_a_row and not after.failures_in_a_row and alerts.on_recovery:
        return Alert(
            RECOVERED, result.source, result.source_id, result.status, before.failures_in_a_row,
            before.last_error, "", result.run_id, result.finish_time, before.first_failure,
        )  # fmt: skip
    return None


def damaged_alert(result: SyncResult) -> Alert | None:
    """The alert of a run that found damaged archive files (None: it found none)."""
    if not result.damaged:
        return None
    error = "; ".join(d.describe() for d in result.damaged)
    return Alert(
        DAMAGED, result.source, result.source_id, result.status, 0, error, "archive_file_damaged",
        result.run_id, result.finish_time, None, tuple(d.key for d in result.damaged),
    )  # fmt: skip


def deliver(alert: Alert, alerts: AlertsSettings, say: Say) -> list[str]:
    """Send ``alert`` to every channel set; the channels that took it. A failing channel is said."""
    channels: list[tuple[str, Callable[[], None]]] = []
    if alerts.webhook_url.reveal():
        channels.append(("webhook", lambda: post_webhook(alerts, alert.payload())))
    if alerts.email_to:
        channels.append(("email", lambda: send_email(alerts, alert.subject(), alert.body())))
    sent = []
    for name, send in channels:
        try:
            send()
        except Exception as exc:  # a channel's failure never fails the sync
            say(f"alerts: {alert.source}: the {name} alert was not sent: {type(exc).__name__}: {exc}")
            continue
        sent.append(name)
    if sent:
        what = (
            f"{alert.event} alert ({len(alert.files)} files)"
            if alert.event == DAMAGED
            else f"{alert.event} alert ({alert.failures_in_a_row} in a row)"
        )
        say(f"alerts: {alert.source}: {what} sent by {', '.join(sent)}")
    return sent


def notify_results(settings: Settings, results: Sequence[SyncResult], say: Say) -> list[Alert]:
    """Count each result in its source's health and send the alerts they call for (see the module's
    description); the alerts, sent or not. Never raises for a store or channel that fails."""
    storage = settings.lake.storage()
    decided = []
    for result in results:
        damaged = damaged_alert(result)
        if damaged is not None:  # whatever the health file says: it is the run's own finding
            deliver(damaged, settings.alerts, say)
            decided.append(damaged)
        try:
            before, after = record_result(storage, settings.lake.root, result)
        except Exception as exc:  # the lake's store may be away: the next result counts again
            say(f"alerts: {result.source}: cannot record the sync's health: {type(exc).__name__}: {exc}")
            continue
        alert = alert_for(before, after, result, settings.alerts)
        if alert is not None:
            deliver(alert, settings.alerts, say)
            decided.append(alert)
    return decided


def failed_results(settings: Settings, exc: BaseException, slugs: Sequence[str] = ()) -> list[SyncResult]:
    """A ``Failed`` result for each source (``slugs``, default all) of a sync that failed as a whole
    (``run_sync`` raised: e.g. the catalog could not be loaded)."""
    return [
        SyncResult.failure(source.slug, source.id, exc)
        for source in settings.sources
        if not slugs or source.slug in slugs
    ]
