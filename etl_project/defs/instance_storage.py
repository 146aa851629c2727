"""The instance's SQLite storage, with pool slots handed out under one lock per host.

Dagster's SQLite event log claims a pool slot in separate statements (is a slot free? then take
it) that two processes can interleave: both runs then hold the pool's one slot and their steps
write the stage and the warehouse at once. Here every change to pool slots first takes an fcntl
lock beside the index database, so the processes sharing a DAGSTER_HOME take turns for them.
The project's dagster.yaml selects this storage; it is Dagster's own in every other respect.
"""

import functools
from pathlib import Path

from dagster._core.storage.event_log import SqliteEventLogStorage
from dagster._core.storage.sqlite_storage import DagsterSqliteStorage

from etl_project.locks import file_lock


def _under_slot_lock(method):
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        with self.slot_lock():
            return method(self, *args, **kwargs)

    return locked


class SlotLockedSqliteEventLogStorage(SqliteEventLogStorage):
    def slot_lock(self):
        return file_lock(Path(self._base_dir) / ".pool_slots.lock")

    claim_concurrency_slot = _under_slot_lock(SqliteEventLogStorage.claim_concurrency_slot)
    free_concurrency_slot_for_step = _under_slot_lock(SqliteEventLogStorage.free_concurrency_slot_for_step)
    free_concurrency_slots_for_run = _under_slot_lock(SqliteEventLogStorage.free_concurrency_slots_for_run)
    # Two processes meeting a pool for the first time must not both create its slots.
    initialize_concurrency_limit_to_default = _under_slot_lock(
        SqliteEventLogStorage.initialize_concurrency_limit_to_default
    )
    set_concurrency_slots = _under_slot_lock(SqliteEventLogStorage.set_concurrency_slots)
    delete_concurrency_limit = _under_slot_lock(SqliteEventLogStorage.delete_concurrency_limit)


class SlotLockedSqliteStorage(DagsterSqliteStorage):
    """``storage: custom:`` in dagster.yaml, with the same ``base_dir`` as ``storage: sqlite:``."""

    def __init__(self, base_dir: str, inst_data=None):
        super().__init__(base_dir, inst_data=inst_data)
        default = self._event_log_storage
        self._event_log_storage = SlotLockedSqliteEventLogStorage(default._base_dir)
        default.dispose()

    @classmethod
    def from_config_value(cls, inst_data, config_value):
        # The parent builds a DagsterSqliteStorage by name, not this class.
        return cls.from_local(inst_data=inst_data, **config_value)


def serializes_slots(instance) -> bool:
    """Whether ``instance`` hands out pool slots safely: this storage, or one that is not
    Dagster's SQLite storage (a DAGSTER_HOME set up before the project's dagster.yaml had it
    would silently use the stock one)."""
    storage = instance.event_log_storage
    return isinstance(storage, SlotLockedSqliteEventLogStorage) or not isinstance(storage, SqliteEventLogStorage)
