from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from faasml.exceptions import ConfigError, UnknownNameError
from faasml.sync.param_server import ParameterServer
from faasml.sync.stores import open_store
from faasml.sync.stores.embedded import EmbeddedStore
from faasml.testing.store_conformance import StoreConformance


class TestEmbeddedStore(StoreConformance):
    @pytest.fixture
    def store_url(self, tmp_path: Path) -> str:
        return f"embedded://{tmp_path / 'store'}"


@pytest.fixture(scope="module")
def param_server() -> Iterator[ParameterServer]:
    with ParameterServer() as server:
        yield server


class TestParameterServerStore(StoreConformance):
    @pytest.fixture
    def store_url(self, param_server: ParameterServer) -> str:
        return param_server.url


def test_embedded_without_path_picks_a_fresh_directory() -> None:
    store = open_store("embedded://")
    assert isinstance(store, EmbeddedStore)
    try:
        store.put("k", b"v")
        assert open_store(store.url).get("k") == b"v"
    finally:
        store.destroy()
    assert not store.root.exists()


def test_bad_urls_name_the_value_and_the_rule() -> None:
    with pytest.raises(ConfigError, match="embedded store is on this machine only"):
        open_store("embedded://otherhost/x")
    with pytest.raises(UnknownNameError, match=r"choose one of: .*embedded"):
        open_store("nosuch://x")
    with pytest.raises(ConfigError, match="ps://host:port"):
        open_store("ps://nohostport")


def test_overlong_key_is_refused(tmp_path: Path) -> None:
    store = open_store(f"embedded://{tmp_path}")
    with pytest.raises(ConfigError, match="at most 240"):
        store.put("k" * 300, b"")


_key_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)


@settings(max_examples=30, deadline=None)
@given(keys=st.sets(_key_text, max_size=8), prefix=_key_text)
@example(keys={".", "..", "a.b"}, prefix="")  # dot keys once named the directory itself
def test_delete_removes_exactly_the_keys_with_the_prefix(keys: set[str], prefix: str) -> None:
    store = open_store("embedded://")
    assert isinstance(store, EmbeddedStore)
    try:
        for key in keys:
            store.put(key, key.encode())
        removed = store.delete(prefix)
        kept = {k for k in keys if not k.startswith(prefix)}
        assert removed == len(keys) - len(kept)
        assert {k for k in keys if store.get(k) is not None} == kept
    finally:
        store.destroy()
