"""``eventlake suppress add|remove|list``: the userIds whose new messages the collector blocks."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from eventlake.cli.main import Context, cli, handle_errors, pass_context
from eventlake.cli.render import format_option, render
from eventlake.config import Settings, SourceSettings
from eventlake.errors import UsageError

if TYPE_CHECKING:
    from eventlake.archive import SuppressionList

_SOURCE_HELP = "The source (slug); may be left out when only one source is configured."


def _source(settings: Settings, slug: str | None) -> SourceSettings:
    if slug is not None:
        return settings.source(slug)
    if len(settings.sources) == 1:
        return settings.sources[0]
    if not settings.sources:
        raise UsageError("no sources configured; add one with `eventlake sources add SLUG`")
    known = ", ".join(s.slug for s in settings.sources)
    raise UsageError(
        f"{len(settings.sources)} sources are configured ({known}): choose one with --source SLUG"
    )


def _list(settings: Settings, source: SourceSettings) -> SuppressionList:
    from eventlake.archive import SuppressionList

    return SuppressionList(settings.lake.storage(), settings.lake.root, source.id)


@cli.group()
def suppress() -> None:
    """Block the new messages of some userIds at the collector (a running one picks changes up within ~1 s).

    Suppressed messages are not archived; the collector counts them
    (eventlake_messages_suppressed_total in GET /metrics).
    """


@suppress.command("add")
@click.argument("user_ids", nargs=-1, required=True, metavar="USER_ID...")
@click.option("--source", "slug", metavar="SLUG", help=_SOURCE_HELP)
@pass_context
@handle_errors
def suppress_add(ctx: Context, user_ids: tuple[str, ...], slug: str | None) -> None:
    """Suppress USER_ID (one or more) for a source.

    \b
    Example:
      eventlake suppress add u-1234 --source web
    """
    _change(ctx, slug, user_ids, "add", ("suppressed", "already suppressed"))


@suppress.command("remove")
@click.argument("user_ids", nargs=-1, required=True, metavar="USER_ID...")
@click.option("--source", "slug", metavar="SLUG", help=_SOURCE_HELP)
@pass_context
@handle_errors
def suppress_remove(ctx: Context, user_ids: tuple[str, ...], slug: str | None) -> None:
    """Lift the suppression of USER_ID (one or more) for a source.

    \b
    Example:
      eventlake suppress remove u-1234 --source web
    """
    _change(ctx, slug, user_ids, "remove", ("no longer suppressed", "was not suppressed"))


def _change(
    ctx: Context, slug: str | None, user_ids: tuple[str, ...], method: str, outcomes: tuple[str, str]
) -> None:
    """Add or remove userIds and say, for each, whether that changed anything."""
    settings = ctx.settings()
    source = _source(settings, slug)
    changed = getattr(_list(settings, source), method)(user_ids)
    for user_id in user_ids:
        click.echo(f"{source.slug}: {user_id} {outcomes[0] if user_id in changed else outcomes[1]}", err=True)


@suppress.command("list")
@click.option("--source", "slug", metavar="SLUG", help=_SOURCE_HELP)
@format_option
@pass_context
@handle_errors
def suppress_list(ctx: Context, slug: str | None, fmt: str) -> None:
    """List the suppressed userIds of a source, with when each was added.

    \b
    Example:
      eventlake suppress list --source web --format json
    """

    settings = ctx.settings()
    source = _source(settings, slug)
    rows = [
        {"source": source.slug, "user_id": user.user_id, "added_at": user.added_at}
        for user in _list(settings, source).users()
    ]
    render(["source", "user_id", "added_at"], rows, fmt)
