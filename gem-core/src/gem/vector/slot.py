"""The host's slot (:mod:`gem.host.slot`), where the vector backends and the reference's
``AutoresetMode`` path have always found it."""

from gem.host.slot import (
    NO_STATE,
    ON_ERROR,
    SNAPSHOT_BYTES,
    SNAPSHOT_CALLS,
    SNAPSHOT_COST_RATIO,
    SNAPSHOT_SECONDS,
    AutoresetMode,
    Slot,
)

__all__ = ["NO_STATE", "ON_ERROR", "SNAPSHOT_BYTES", "SNAPSHOT_CALLS", "SNAPSHOT_COST_RATIO", "SNAPSHOT_SECONDS",
           "AutoresetMode", "Slot"]
