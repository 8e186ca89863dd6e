"""Moved to `simrun.keys` (the KEY grammar and the table of what each kind means); these
names stay importable from here for code written before the move."""

from simrun.keys import (  # noqa: F401
    FIXED_KEYS,
    KEY_KINDS,
    THERMOSTAT_KEYS,
    Key,
    check_field_keys,
    known_keys,
    parse_key,
    value_of,
    with_value,
)
