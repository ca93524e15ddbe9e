"""What the S3 and DynamoDB stores share: URL options, boto3 clients, error translation.

URL options (query string): ``endpoint_url`` (any S3- or DynamoDB-compatible endpoint; AWS's
own when absent), ``region`` (else the standard AWS configuration), ``create=true`` (create the
bucket or table when it does not exist). Credentials come only from boto3's standard chain
(environment, ``~/.aws`` files, instance roles) and never appear in URLs, messages or logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Self
from urllib.parse import parse_qs, urlsplit

from faasml._imports import optional_import
from faasml.exceptions import ConfigError
from faasml.sync.stores._base import Store

_OPTIONS = ("endpoint_url", "region", "create")


@dataclass(frozen=True)
class AwsTarget:
    """A bucket or table, its key prefix, and where and how to reach it."""

    name: str
    prefix: str
    endpoint_url: str | None
    region: str | None
    create: bool

    @property
    def endpoint(self) -> str:
        return self.endpoint_url or f"AWS region {self.region or '(default)'}"


def parse_url(url: str, scheme: str, what: str) -> AwsTarget:
    parts = urlsplit(url)
    if parts.scheme != scheme or not parts.netloc:
        raise ConfigError(f"{what} URL {url!r} must look like {scheme}://name[/prefix][?options]")
    if "@" in parts.netloc:
        raise ConfigError(
            f"a {what} URL must not carry credentials; use the standard AWS environment "
            "variables or credential files"
        )
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - set(_OPTIONS))
    if unknown:
        raise ConfigError(
            f"{what} URL option(s) {', '.join(unknown)} unknown; choose from {', '.join(_OPTIONS)}"
        )
    create = query.get("create", ["false"])[-1].lower()
    if create not in ("true", "false", "1", "0"):
        raise ConfigError(f"{what} URL option create={create!r} must be true or false")
    prefix = parts.path.strip("/")
    return AwsTarget(
        name=parts.netloc,
        prefix=f"{prefix}/" if prefix else "",
        endpoint_url=query.get("endpoint_url", [None])[-1],
        region=query.get("region", [None])[-1],
        create=create in ("true", "1"),
    )


def client(service: str, target: AwsTarget) -> Any:
    """A boto3 client with standard retries (backoff on throttling and transient errors)."""
    boto3 = optional_import("boto3", "aws")
    config = optional_import("botocore.config", "aws").Config(
        retries={"max_attempts": 5, "mode": "standard"},
        connect_timeout=5,
        read_timeout=60,
        max_pool_connections=16,
    )
    return boto3.session.Session().client(
        service, endpoint_url=target.endpoint_url, region_name=target.region, config=config
    )


def connection_errors() -> tuple[type[BaseException], ...]:
    """The botocore errors that mean the endpoint cannot be reached (after its retries)."""
    exceptions = optional_import("botocore.exceptions", "aws")
    return (
        exceptions.EndpointConnectionError,
        exceptions.ConnectionClosedError,
        exceptions.ReadTimeoutError,
        exceptions.ConnectTimeoutError,
    )


def error_code(err: BaseException) -> str:
    response = getattr(err, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class AwsCalls(Store):
    """A store over one bucket or table through boto3: the URL parsed, the client opened, the
    container checked (and created when the URL asks) on first use, and connection failures
    retried and named."""

    label = ""
    """What the endpoint is called in messages: 'S3', 'DynamoDB'."""
    service = ""
    """The boto3 service, also the URL scheme: 's3', 'dynamodb'."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.target = parse_url(url, self.service, self.label)
        self._client: Any = client(self.service, self.target)
        self._errors = connection_errors()
        self._checked = False

    @classmethod
    def from_url(cls, url: str) -> Self:
        return cls(url)

    def _ensure_container(self) -> None:
        raise NotImplementedError

    def _call(self, method: str, **kwargs: Any) -> Any:
        from faasml.sync.stores._service import with_retries

        endpoint = f"{self.label} {self.target.endpoint}"
        if not self._checked:
            with_retries(
                self._ensure_container, endpoint=endpoint, transient=self._errors, attempts=1
            )
            self._checked = True
        return with_retries(
            lambda: getattr(self._client, method)(**kwargs),
            endpoint=endpoint,
            transient=self._errors,
            attempts=1,  # botocore already retried with backoff
        )
