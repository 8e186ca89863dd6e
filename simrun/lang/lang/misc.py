"""`get_host_arch_list()`: simrun runs on the CPU."""

from .. import api


def get_host_arch_list() -> list:
    return [api.cpu]
