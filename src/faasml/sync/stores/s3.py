"""S3 (or any S3-compatible endpoint) as a store: ``s3://bucket[/prefix][?endpoint_url=...]``.

The object store of SMLT §4.3 (training data, checkpoints) and the stateless storage of
CE-scaling's all-reduce. PUT and GET of one object are atomic; ``delete(prefix)`` is LIST +
batched DELETE. Request-priced: every PUT, GET, LIST and DELETE is counted for the bill (a
batched DELETE of up to 1000 keys counts once per key, as S3 bills it).
"""

from __future__ import annotations

from faasml._imports import optional_import
from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync.stores._aws import AwsCalls, error_code
from faasml.sync.stores._service import with_retries


class S3Store(AwsCalls):
    """One object per key under the bucket's prefix."""

    label = "S3"
    service = "s3"
    max_poll_s = 0.02  # every poll is a billed GET

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._checksum_error: type[BaseException] = optional_import(
            "botocore.exceptions", "aws"
        ).FlexibleChecksumError

    def _ensure_container(self) -> None:
        try:
            self._client.head_bucket(Bucket=self.target.name)
        except self._errors:
            raise
        except Exception as err:
            if error_code(err) not in ("404", "NoSuchBucket", "NotFound"):
                raise StoreUnavailableError(
                    f"S3 bucket {self.target.name!r} at {self.target.endpoint}: {err}"
                ) from err
            if not self.target.create:
                raise ConfigError(
                    f"S3 bucket {self.target.name!r} does not exist at {self.target.endpoint}; "
                    "create it or add ?create=true to the store URL"
                ) from None
            self._client.create_bucket(Bucket=self.target.name)

    def _put(self, key: str, value: bytes) -> None:
        self._call("put_object", Bucket=self.target.name, Key=self.target.prefix + key, Body=value)

    def _get(self, key: str) -> bytes | None:
        tries = 0

        def once() -> bytes | None:
            nonlocal tries
            tries += 1
            return self._get_once(key)

        value = with_retries(
            once, endpoint=f"S3 {self.target.endpoint}", transient=(self._checksum_error,)
        )
        self._count_extra(gets=tries - 1)  # a retried GET is billed again
        return value

    def _get_once(self, key: str) -> bytes | None:
        """One GET; a body whose checksum does not match raises (and is retried by ``_get``)."""
        try:
            reply = self._call("get_object", Bucket=self.target.name, Key=self.target.prefix + key)
        except StoreUnavailableError:
            raise
        except Exception as err:
            if error_code(err) in ("NoSuchKey", "404"):
                return None
            raise
        body: bytes = reply["Body"].read()  # botocore checks the body's checksum here
        return body

    def _delete_prefix(self, prefix: str) -> int:
        keys: list[str] = []
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self._call(
                "list_objects_v2",
                Bucket=self.target.name,
                Prefix=self.target.prefix + prefix,
                **extra,
            )
            self._count_extra(lists=1)
            keys += [item["Key"] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                break
            token = page["NextContinuationToken"]
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start : start + 1000]]
            self._call("delete_objects", Bucket=self.target.name, Delete={"Objects": batch})
        self._count_extra(deletes=max(len(keys) - 1, 0))
        return len(keys)

    def close(self) -> None:
        self._client.close()
