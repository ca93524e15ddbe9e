"""DynamoDB as a store: ``dynamodb://table[/prefix][?endpoint_url=...&create=true]``.

One item per key (partition key ``k``, value ``v``), read with strong consistency. An item is
at most 400 KB, so a larger value is written as chunk items first and then a small head item
that names them (see ``_service``): readers always see a whole value. Overwriting a chunked
value removes the old chunks after the new head is in place. ``delete(prefix)`` is a SCAN with
``begins_with`` (it reads the whole table: keep one table per run) and batched deletes.
Request-priced (on-demand capacity): every item written or read is counted; the catalog prices
them per write and read request unit.
"""

from __future__ import annotations

from typing import Any

from faasml.exceptions import ConfigError, StoreUnavailableError
from faasml.sync.stores._aws import AwsCalls, error_code
from faasml.sync.stores._service import (
    CHUNK_MARK,
    chunk_prefix,
    head_version,
    join,
    split,
)

ITEM_LIMIT_BYTES = 400 * 1024
"""DynamoDB's item size limit (attribute names and values together)."""
CHUNK_BYTES = 380 * 1024
"""Value bytes per item: the limit less room for the key and attribute names."""


class DynamoDBStore(AwsCalls):
    """One item per key; values above ``CHUNK_BYTES`` in chunk items behind a head item."""

    label = "DynamoDB"
    service = "dynamodb"
    max_poll_s = 0.02  # every poll is a billed read

    def _ensure_container(self) -> None:
        table = self.target.name
        try:
            self._client.describe_table(TableName=table)
            return
        except self._errors:
            raise
        except Exception as err:
            if error_code(err) != "ResourceNotFoundException":
                raise StoreUnavailableError(
                    f"DynamoDB table {table!r} at {self.target.endpoint}: {err}"
                ) from err
        if not self.target.create:
            raise ConfigError(
                f"DynamoDB table {table!r} does not exist at {self.target.endpoint}; create it "
                "(partition key 'k', type S) or add ?create=true to the store URL"
            )
        try:
            self._client.create_table(
                TableName=table,
                KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
        except Exception as err:
            if error_code(err) != "ResourceInUseException":  # another process created it
                raise
        self._client.get_waiter("table_exists").wait(
            TableName=table, WaiterConfig={"Delay": 1, "MaxAttempts": 60}
        )

    def _key(self, key: str) -> str:
        full = self.target.prefix + key
        if not full:
            raise ConfigError("a DynamoDB key must not be empty")
        return full

    def _write(self, key: str, value: bytes) -> None:
        self._call(
            "put_item", TableName=self.target.name, Item={"k": {"S": key}, "v": {"B": value}}
        )

    def _read(self, key: str) -> bytes | None:
        reply = self._call(
            "get_item", TableName=self.target.name, Key={"k": {"S": key}}, ConsistentRead=True
        )
        item = reply.get("Item")
        return None if item is None else bytes(item["v"]["B"])

    def _put(self, key: str, value: bytes) -> None:
        full = self._key(key)
        old = self._read(full)
        head, chunks = split(full, value, CHUNK_BYTES)
        for chunk, part in chunks:
            self._write(chunk, part)
        self._write(full, head)
        self._count_extra(puts=len(chunks), gets=1)
        stale = head_version(old) if old is not None else None
        if stale is not None:
            self._delete_keys([f"{chunk_prefix(full, stale[0])}{i}" for i in range(stale[1])])

    def _get(self, key: str) -> bytes | None:
        value, reads = join(self._key(key), lambda: self._read(self._key(key)), self._read)
        self._count_extra(gets=reads)
        return value

    def _delete_keys(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 25):
            pending: list[dict[str, Any]] = [
                {"DeleteRequest": {"Key": {"k": {"S": k}}}} for k in keys[start : start + 25]
            ]
            while pending:
                reply = self._call("batch_write_item", RequestItems={self.target.name: pending})
                pending = reply.get("UnprocessedItems", {}).get(self.target.name, [])
        self._count_extra(deletes=len(keys))

    def _delete_prefix(self, prefix: str) -> int:
        keys: list[str] = []
        start_key: dict[str, Any] | None = None
        while True:
            extra = {"ExclusiveStartKey": start_key} if start_key else {}
            page = self._call(
                "scan",
                TableName=self.target.name,
                ProjectionExpression="k",
                FilterExpression="begins_with(k, :p)",
                ExpressionAttributeValues={":p": {"S": self.target.prefix + prefix}},
                ConsistentRead=True,
                **extra,
            )
            self._count_extra(lists=1)
            keys += [item["k"]["S"] for item in page.get("Items", [])]
            start_key = page.get("LastEvaluatedKey")
            if not start_key:
                break
        self._delete_keys(keys)
        self._count_extra(deletes=-1 if keys else 0)  # the public call counted one already
        return sum(CHUNK_MARK not in k for k in keys)

    def close(self) -> None:
        self._client.close()
