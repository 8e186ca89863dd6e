"""`pytest --ptx ...`: every kernel the selected tests compile is also lowered to PTX and
assembled by ptxas for sm_80 and sm_90, once per distinct IR, at the end of the session; a
kernel that fails is reported by name with ptxas's (or LLVM's) message and fails the run.

Opt-in (it adds about a second per distinct kernel): tests/test_cuda_ptx.py checks a
representative set and every shipped scene's kernels on every run."""

from __future__ import annotations

import pytest

from simrun.lang import pipeline
from simrun.lang.codegen.cuda.target import assemble
from simrun.lang.codegen.layout import build_layout
from simrun.lang.compiler import kernel_text
from simrun.lang.compiler_cuda import kernel_ptx

_SMS = (80, 90)


def pytest_addoption(parser):
    parser.addoption("--ptx", action="store_true",
                     help="also lower every kernel the tests compile to PTX and assemble it "
                          "with ptxas (sm_80, sm_90)")


class _Collector:
    def __init__(self) -> None:
        self.kernels: dict = {}  # IR text -> KernelIR
        self.last = pipeline.passes("primal", "")[-1][0]

    def __call__(self, kir, pass_name: str) -> None:
        if pass_name == self.last:
            self.kernels.setdefault(kernel_text(kir, build_layout(kir)), kir)

    def failures(self) -> list[str]:
        out = []
        for kir in self.kernels.values():
            for sm in _SMS:
                try:
                    assemble(kernel_ptx(kir, sm).text, sm)
                except Exception as exc:  # noqa: BLE001 - every failure is reported
                    out.append(f"{kir.name} (sm_{sm}): {type(exc).__name__}: {exc}")
                    break
        return out


def pytest_configure(config):
    if config.getoption("--ptx"):
        collector = _Collector()
        config._simrun_ptx = collector
        pipeline.checks.append(collector)


def pytest_sessionfinish(session, exitstatus):
    collector = getattr(session.config, "_simrun_ptx", None)
    if collector is None:
        return
    pipeline.checks.remove(collector)
    failures = collector.failures()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"--ptx: {len(collector.kernels)} distinct kernels, "
                            f"{len(failures)} failed to lower or assemble")
        for line in failures:
            reporter.write_line(f"  {line[:2000]}")
    if failures:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
