"""Where alerts go: a webhook (JSON POST; Slack's incoming webhooks take it as it is) and email
over SMTP. Each sender raises on failure; :func:`eventlake.scheduler.alerts.deliver` logs it."""

from __future__ import annotations

import smtplib
import ssl
import urllib.request
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from typing import Any

import orjson

from eventlake.config import AlertsSettings

USER_AGENT = "eventlake-alerts"


def post_webhook(alerts: AlertsSettings, payload: dict[str, Any]) -> None:
    """POST ``payload`` as JSON to ``alerts.webhook_url``; an ``OSError`` (``HTTPError`` for an
    answer that is not 2xx) when it was not taken. Messages never show the URL (a Slack webhook's
    URL is its credential)."""
    request = urllib.request.Request(
        alerts.webhook_url.reveal(),
        data=orjson.dumps(payload),
        headers={"Content-Type": "application/json", "User-Agent": USER_AGENT},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=alerts.timeout_seconds) as response:
        response.read()


def send_email(alerts: AlertsSettings, subject: str, body: str) -> None:
    """Send a plain-text email to ``alerts.email_to`` through ``alerts.smtp_host`` (STARTTLS first
    when ``alerts.starttls``, then login when ``alerts.smtp_user`` is set); an ``OSError`` or
    ``smtplib.SMTPException`` when it was not taken."""
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = alerts.email_from
    message["To"] = ", ".join(alerts.email_to)
    message["Date"] = formatdate(usegmt=True)
    message["Message-ID"] = make_msgid("eventlake", alerts.email_from.rsplit("@", 1)[-1])
    message.set_content(body)
    with smtplib.SMTP(alerts.smtp_host, alerts.smtp_port, timeout=alerts.timeout_seconds) as smtp:
        if alerts.starttls:
            smtp.starttls(context=ssl.create_default_context())
        if alerts.smtp_user:
            smtp.login(alerts.smtp_user, alerts.smtp_password.reveal())
        smtp.send_message(message)
