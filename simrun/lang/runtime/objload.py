"""A loader for the relocatable x86-64 ELF objects LLVM emits for kernels.

A warm process finds every kernel's object code in the disk cache; loading it through
llvmlite's MCJIT means loading LLVM itself (a 100 MB shared library plus llvmlite's Python
modules, ~0.1 s of a ~0.4 s start). The objects are simple: the large code model puts code in
`.ltext`, constants in `.rodata*`, and every reference to a constant or a libc/libm function
is a 64-bit absolute relocation. This module maps them and applies those relocations itself;
anything else it meets (another relocation type, writable data, a symbol it cannot resolve)
raises LoadError and the caller falls back to MCJIT, so it never guesses.
"""

from __future__ import annotations

import ctypes
import platform
import struct
import sys
from ctypes.util import find_library
from typing import Callable

_PROT_READ, _PROT_WRITE, _PROT_EXEC = 1, 2, 4
_MAP_PRIVATE, _MAP_ANONYMOUS = 0x02, 0x20
_SHT_PROGBITS, _SHT_SYMTAB, _SHT_RELA, _SHT_NOBITS, _SHT_REL = 1, 2, 4, 8, 9
_SHF_WRITE, _SHF_ALLOC = 1, 2
_SHN_UNDEF, _SHN_ABS = 0, 0xFFF1
_STT_SECTION = 3
_R_X86_64_NONE, _R_X86_64_64 = 0, 1
_PAGE = 4096

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class LoadError(Exception):
    """The object is not one this loader handles; load it with LLVM instead."""


def supported() -> bool:
    return sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64")


_handles: dict = {}  # c, m: the ctypes handles of libc and libm


def _libs() -> dict:
    if not _handles:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                              ctypes.c_int, ctypes.c_long]
        libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        _handles.update(c=libc, m=_libm())
    return _handles


def _libm() -> ctypes.CDLL:
    try:
        return ctypes.CDLL("libm.so.6")
    except OSError:  # not glibc: ask the slower way (it runs ldconfig)

        return ctypes.CDLL(find_library("m"))


def resolve_c(name: str) -> int:
    """The address of a libm or libc function (what kernels call), or LoadError."""
    libs = _libs()
    for lib in (libs["m"], libs["c"]):
        try:
            return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value
        except AttributeError:
            continue
    raise LoadError(f"unresolved symbol {name}")


def _cstr(table: bytes, offset: int) -> str:
    return table[offset:table.index(b"\0", offset)].decode()


def load(data: bytes, resolve: Callable[[str], int] = resolve_c) -> dict[str, int]:
    """Map an object's code and constants, relocate them, make them executable; returns the
    address of every function and object it defines, by name."""
    if len(data) < _EHDR.size:
        raise LoadError("truncated object")
    (ident, e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum,
     shstrndx) = _EHDR.unpack_from(data)
    if ident[:4] != b"\x7fELF" or ident[4] != 2 or ident[5] != 1 or e_type != 1 \
            or machine != 62 or shentsize != _SHDR.size:
        raise LoadError("not a relocatable x86-64 ELF object")
    try:
        sections = [_SHDR.unpack_from(data, shoff + k * _SHDR.size) for k in range(shnum)]
    except struct.error as exc:
        raise LoadError("truncated section table") from exc
    names = data[sections[shstrndx][4]:][:sections[shstrndx][5]]

    # place every allocated section in one mapping, aligned as it asks
    placed: dict[int, int] = {}
    size = 0
    for k, (_, kind, flags, _, _, sh_size, _, _, align, _) in enumerate(sections):
        if not flags & _SHF_ALLOC:
            continue
        if flags & _SHF_WRITE or kind not in (_SHT_PROGBITS, _SHT_NOBITS):
            raise LoadError(f"unsupported section {_cstr(names, sections[k][0])}")
        align = max(align, 1)
        size = -(-size // align) * align
        placed[k] = size
        size += sh_size
    libc = _libs()["c"]
    length = max(_PAGE, -(-size // _PAGE) * _PAGE)
    base = libc.mmap(None, length, _PROT_READ | _PROT_WRITE, _MAP_PRIVATE | _MAP_ANONYMOUS,
                     -1, 0)
    if base in (None, ctypes.c_void_p(-1).value):
        raise LoadError("mmap failed")
    try:
        return _fill(data, sections, placed, base, length, resolve)
    except BaseException:
        libc.munmap(ctypes.c_void_p(base), ctypes.c_size_t(length))
        raise


def _fill(data: bytes, sections: list, placed: dict, base: int, length: int,
          resolve: Callable[[str], int]) -> dict[str, int]:
    """Copy the sections into the mapping at base, relocate, make it executable."""
    for k, at in placed.items():
        _, kind, _, _, offset, sh_size = sections[k][:6]
        if kind == _SHT_PROGBITS and sh_size:
            if offset + sh_size > len(data):
                raise LoadError("truncated section")
            ctypes.memmove(base + at, data[offset:offset + sh_size], sh_size)

    symbols, defined = _symbols(data, sections, placed, base, resolve)
    for _, kind, _, _, offset, sh_size, _, info, _, _ in sections:
        if kind == _SHT_REL:
            raise LoadError("REL relocations")
        if kind != _SHT_RELA or info not in placed:
            continue
        target = base + placed[info]
        limit = sections[info][5]
        for r in range(sh_size // _RELA.size):
            r_offset, r_info, addend = _RELA.unpack_from(data, offset + r * _RELA.size)
            rtype, sym = r_info & 0xFFFFFFFF, r_info >> 32
            if rtype == _R_X86_64_NONE:
                continue
            if rtype != _R_X86_64_64 or r_offset + 8 > limit:
                raise LoadError(f"unsupported relocation type {rtype}")
            if sym >= len(symbols) or symbols[sym] is None:
                raise LoadError(f"relocation against an unloaded symbol ({sym})")
            value = (symbols[sym] + addend) % 2**64
            ctypes.memmove(target + r_offset, struct.pack("<Q", value), 8)
    if _libs()["c"].mprotect(base, length, _PROT_READ | _PROT_EXEC) != 0:
        raise LoadError("mprotect failed")
    return defined


def _symbols(data: bytes, sections: list, placed: dict, base: int,
             resolve: Callable[[str], int]) -> tuple[list, dict]:
    """Every symbol-table entry's address (None where it has none), and the defined names'."""
    tables = [s for s in sections if s[1] == _SHT_SYMTAB]
    if len(tables) > 1:
        raise LoadError("several symbol tables")
    if not tables:
        return [], {}
    _, _, _, _, offset, size, link, _, _, _ = tables[0]
    strings = data[sections[link][4]:][:sections[link][5]]
    addresses, defined = [], {}
    for k in range(size // _SYM.size):
        st_name, st_info, _, shndx, value, _ = _SYM.unpack_from(data, offset + k * _SYM.size)
        name = _cstr(strings, st_name) if st_name else ""
        if k == 0:
            addresses.append(None)
        elif shndx == _SHN_UNDEF:
            addresses.append(resolve(name) if name else None)
        elif shndx == _SHN_ABS:
            addresses.append(value)
        elif shndx in placed:
            addresses.append(base + placed[shndx] + value)
            if name and st_info & 0xF != _STT_SECTION:
                defined[name] = addresses[-1]
        elif shndx < len(sections) and not sections[shndx][2] & _SHF_ALLOC:
            addresses.append(None)  # in a section that is not loaded (.note)
        else:
            raise LoadError(f"symbol {name} in an unsupported section")
    return addresses, defined
