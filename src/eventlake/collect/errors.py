"""Errors of the HTTP Tracking API; each names what is wrong and carries its HTTP status."""

from __future__ import annotations

from eventlake.errors import EventLakeError


class RequestError(EventLakeError):
    """The request cannot be accepted as sent."""

    http_status = 400
    code = "invalid_request"


class UnauthorizedError(RequestError):
    http_status = 401
    code = "unauthorized"


class InvalidJsonError(RequestError):
    code = "invalid_json"


class UnknownEndpointError(RequestError):
    http_status = 404
    code = "not_found"

    def __init__(self, name: str, valid: list[str]) -> None:
        super().__init__(f"unknown endpoint /v1/{name} (valid: {', '.join(valid)})", endpoint=name)


class LimitExceededError(RequestError):
    """A size or count limit of the Tracking API was exceeded. ``code`` names which."""

    def __init__(self, code: str, message: str, limit: int, actual: int) -> None:
        super().__init__(message, limit=limit, actual=actual)
        self.code = code
        self.limit = limit
        self.actual = actual


class ListenError(EventLakeError):
    """The collector cannot listen on its host and port."""

    exit_code = 2

    def __init__(self, host: str, port: int, problem: str) -> None:
        super().__init__(
            f"cannot listen on {host}:{port} ({problem}); choose another [collector] port or --port",
            host=host,
            port=port,
        )
