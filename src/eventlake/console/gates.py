"""What stands in front of the console's pages: the token (``Authorization: Bearer <token>``, the
``eventlake_console`` cookie, or ``?token=`` once, which sets the cookie, ``Secure`` when the
request came over https), and the same-site rules against other web sites using a browser that
can reach the console (DNS rebinding, forms posted from elsewhere)."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from eventlake.config import Secret

COOKIE = "eventlake_console"


class TokenGate:
    """ASGI middleware: every request needs the token (see the module docstring); 401 otherwise."""

    def __init__(self, app: ASGIApp, token: Secret) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.token.is_set:
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        if given is not None and self._ok(given):  # once: keep it in a cookie, drop it from the URL
            kept = [(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode()) if k != "token"]
            target = request.url.path + ("?" + urlencode(kept) if kept else "")
            response: Response = RedirectResponse(target, status_code=303)
            # Secure over https: uvicorn sets the scheme from a trusted proxy's X-Forwarded-Proto
            # (FORWARDED_ALLOW_IPS, 127.0.0.1 by default), so a TLS proxy in front counts too
            secure = scope.get("scheme") in ("https", "wss")
            response.set_cookie(COOKIE, self.token.reveal(), httponly=True, samesite="strict", secure=secure)
            await response(scope, receive, send)
            return
        bearer = request.headers.get("authorization", "")
        presented = bearer[7:] if bearer.lower().startswith("bearer ") else request.cookies.get(COOKIE, "")
        if self._ok(presented):
            await self.app(scope, receive, send)
            return
        await PlainTextResponse(
            "401: this console needs its token (open it once with ?token=<console.token>, or send "
            "Authorization: Bearer <token>)\n",
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )(scope, receive, send)

    def _ok(self, given: str) -> bool:
        return bool(given) and self.token.matches(given)


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


class SameSiteGate:
    """ASGI middleware against other web sites using a browser that can reach the console: on a
    loopback bind, requests must be addressed to a loopback name (a DNS-rebinding page's are not:
    421); a form posted from another site (``Sec-Fetch-Site``, ``Origin``) is refused (403)."""

    def __init__(self, app: ASGIApp, loopback: bool) -> None:
        self.app, self.loopback = app, loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Request(scope).headers
        host = headers.get("host", "")
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        if self.loopback and name.lower() not in LOOPBACK_HOSTS:
            why = f"421: this console answers requests for 127.0.0.1 or localhost, not {host!r}\n"
            await PlainTextResponse(why, status_code=421)(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            site = headers.get("sec-fetch-site", "same-origin")
            origin = headers.get("origin")
            if site not in ("same-origin", "none") or (origin and origin.split("://", 1)[-1] != host):
                why = "403: a form posted from another site is refused\n"
                await PlainTextResponse(why, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)
