"""Validation of the ``[alerts]`` section (see :class:`eventlake.config.settings.AlertsSettings`)."""

from __future__ import annotations

import re
from dataclasses import replace
from urllib.parse import urlsplit

from eventlake.config.settings import AlertsSettings, is_loopback
from eventlake.errors import ConfigError

EMAIL = re.compile(r"^[^@\s<>,;]+@[^@\s<>,;]+\.[^@\s<>,;]+$")


def validate_alerts(alerts: AlertsSettings) -> AlertsSettings:
    """``alerts`` checked (every error names the setting, the bad value and the fix), with
    ``on_failures`` sorted."""
    url = alerts.webhook_url.reveal()
    if url:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            shown = f"{parts.scheme}://..." if parts.scheme else "(hidden: it may hold a token)"
            raise ConfigError(
                "alerts.webhook_url", f"{shown} is not an http(s) URL",
                "use https://hooks.slack.com/services/... or another https:// URL",
            )  # fmt: skip
    for address in alerts.email_to:
        if not EMAIL.match(address):
            raise ConfigError(
                "alerts.email_to", f"{address!r} is not an email address", "e.g. data@example.com"
            )
    if alerts.email_to:
        if not alerts.smtp_host:
            raise ConfigError(
                "alerts.smtp_host", "is empty but alerts.email_to is set",
                "set the SMTP server that sends the alert emails, e.g. smtp.example.com",
            )  # fmt: skip
        if not EMAIL.match(alerts.email_from):
            raise ConfigError(
                "alerts.email_from", f"{alerts.email_from!r} is not an email address",
                "set the sender address, e.g. eventlake@example.com",
            )  # fmt: skip
    else:
        smtp = ("smtp_host", "smtp_user", "smtp_password", "email_from")
        for name in smtp:
            if getattr(alerts, name) != getattr(AlertsSettings(), name):
                raise ConfigError(
                    f"alerts.{name}", "is set but alerts.email_to is empty: no email would be sent",
                    "add the recipients to alerts.email_to, or remove it",
                )  # fmt: skip
    if not 0 < alerts.smtp_port < 65536:
        raise ConfigError(
            "alerts.smtp_port", f"{alerts.smtp_port} is not a TCP port", "use 1-65535 (587: submission)"
        )
    if bool(alerts.smtp_user) != alerts.smtp_password.is_set:
        missing = "smtp_password" if alerts.smtp_user else "smtp_user"
        raise ConfigError(
            f"alerts.{missing}", "is missing", "set both alerts.smtp_user and alerts.smtp_password"
        )
    if alerts.smtp_password.is_set and not alerts.starttls and not is_loopback(alerts.smtp_host):
        raise ConfigError(
            "alerts.starttls",
            f"false: the SMTP password would cross the network to {alerts.smtp_host} in clear",
            "set alerts.starttls = true (the server must offer STARTTLS)",
        )  # fmt: skip
    for count in alerts.on_failures:
        if count < 1:
            raise ConfigError("alerts.on_failures", f"{count} is not a count of failures", "use numbers >= 1")
    if len(set(alerts.on_failures)) != len(alerts.on_failures):
        raise ConfigError(
            "alerts.on_failures", f"{list(alerts.on_failures)} repeats a number", "e.g. [1, 5, 20]"
        )
    if alerts.timeout_seconds <= 0:
        raise ConfigError("alerts.timeout_seconds", f"{alerts.timeout_seconds}", "use > 0")
    return replace(alerts, on_failures=tuple(sorted(alerts.on_failures)))
