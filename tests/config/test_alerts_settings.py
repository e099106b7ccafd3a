"""The ``[alerts]`` section: parsed from the file and the environment, and refused with an error
that names the setting, the bad value and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlake.config import AlertsSettings, load_settings, write_initial_config
from eventlake.errors import ConfigError

SMTP = (
    'email_to = ["data@example.com"]\nemail_from = "eventlake@example.com"\nsmtp_host = "smtp.example.com"\n'
)


def _load(tmp_path: Path, alerts: str, environ: dict[str, str] | None = None) -> AlertsSettings:
    config = write_initial_config(tmp_path / "p")
    config.write_text(config.read_text() + "\n[alerts]\n" + alerts)
    return load_settings(config, environ=environ or {}).alerts


def test_alerts_from_the_file_and_the_environment(tmp_path: Path) -> None:
    alerts = _load(
        tmp_path,
        SMTP + 'webhook_url = "https://hooks.slack.com/services/T1/B1/xyz"\non_failures = [20, 1, 5, 50]\n'
        'smtp_user = "alerts"\n',
        {"EVENTLAKE__ALERTS__SMTP_PASSWORD": "pw from env", "EVENTLAKE__ALERTS__EMAIL_TO": "a@x.io, b@y.io"},
    )
    assert alerts.enabled and alerts.webhook_url.reveal().endswith("/xyz")
    assert alerts.email_to == ("a@x.io", "b@y.io") and alerts.on_failures == (1, 5, 20, 50)
    assert alerts.smtp_port == 587 and alerts.starttls and alerts.smtp_password.reveal() == "pw from env"
    assert "xyz" not in repr(alerts) and "pw from env" not in repr(alerts)
    assert _load(tmp_path / "2", "") == AlertsSettings() and not AlertsSettings().enabled
    listed = _load(tmp_path / "3", SMTP, {"EVENTLAKE__ALERTS__ON_FAILURES": "[3]"})
    assert listed.on_failures == (3,)


@pytest.mark.parametrize(
    ("alerts", "setting", "words"),
    [
        (
            'webhook_url = "ftp://files.example.com/hook/secret"',
            "alerts.webhook_url",
            "ftp://... is not an http(s) URL",
        ),
        ('webhook_url = "hooks.slack.com/T1/secret"', "alerts.webhook_url", "(hidden: it may hold a token)"),
        (
            'email_to = ["data"]\nemail_from = "e@x.io"\nsmtp_host = "h"',
            "alerts.email_to",
            "'data' is not an email",
        ),
        (
            'email_to = "data@example.com"\nemail_from = "e@x.io"',
            "alerts.smtp_host",
            "is empty but alerts.email_to",
        ),
        ('email_to = "data@example.com"\nsmtp_host = "h"', "alerts.email_from", "set the sender address"),
        ('smtp_host = "smtp.example.com"', "alerts.smtp_host", "no email would be sent"),
        (SMTP + "smtp_port = 0", "alerts.smtp_port", "0 is not a TCP port"),
        (SMTP + 'smtp_user = "u"', "alerts.smtp_password", "is missing"),
        (SMTP + 'smtp_user = "u"\nsmtp_password = "p"\nstarttls = false', "alerts.starttls", "in clear"),
        (SMTP + "on_failures = [1, 1]", "alerts.on_failures", "repeats a number"),
        (SMTP + "on_failures = [0]", "alerts.on_failures", "0 is not a count"),
        (SMTP + 'on_failures = "1"', "alerts.on_failures", "expected an array of int"),
        (SMTP + "timeout_seconds = 0", "alerts.timeout_seconds", "use > 0"),
        ("emails = 1", "alerts.emails", "unknown setting"),
    ],
)
def test_bad_alerts_settings_are_refused_by_name(
    tmp_path: Path, alerts: str, setting: str, words: str
) -> None:
    with pytest.raises(ConfigError) as error:
        _load(tmp_path, alerts)
    assert error.value.setting == setting and words in str(error.value)
    assert "secret" not in str(error.value)  # a webhook URL's token never shows


def test_a_password_in_clear_is_allowed_to_a_relay_on_this_machine(tmp_path: Path) -> None:
    alerts = _load(
        tmp_path,
        'email_to = ["d@example.com"]\nemail_from = "e@example.com"\nsmtp_host = "127.0.0.1"\n'
        'smtp_port = 25\nstarttls = false\nsmtp_user = "u"\nsmtp_password = "p"\n',
    )
    assert alerts.smtp_port == 25 and not alerts.starttls
