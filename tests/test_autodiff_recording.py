"""lang/autodiff/recording.py, the one derivation of a reverse from launches (Tape.grad's and
the adjoint's reverse step's): what each launch saves, the replay and the reverse order."""

from __future__ import annotations

import simrun.lang as ti
from simrun.lang.autodiff.analysis import Access
from simrun.lang.autodiff.recording import Recording, read_by


def _fields(n: int) -> list:
    ti.init(arch=ti.cpu, default_fp=ti.f64, cpu_max_num_threads=1)
    return [ti.field(ti.f64, shape=4) for _ in range(n)]


def test_a_launch_saves_what_it_overwrites_that_it_an_earlier_launch_or_a_later_reader_reads():
    x, v, a, out = _fields(4)
    recording = Recording(read={a})  # a: read after the reverse (e.g. by the energies)
    first = recording.record("kick", Access(reads={v, x}, writes={v}))
    second = recording.record("drift", Access(reads={v}, writes={x, out}))
    third = recording.record("force", Access(reads={x}, writes={a}))
    hidden = recording.record("custom", None)
    assert first.fields == [v] and second.fields == [x] and third.fields == [a]
    assert hidden.fields == []  # a custom gradient hides its access: nothing saved
    later = recording.then()  # the next stage's launches: out was never read, x was
    assert later.record("copy", Access(reads=set(), writes={x, out})).fields == [x]
    everything = Recording(read=None)  # any field may be read later: every write saved
    assert everything.record("drift", Access(reads=set(), writes={out, x})).fields == \
        sorted([out, x], key=lambda f: f.id)
    assert read_by([Access(reads={x}), Access(reads={v})]) == {x, v}
    assert read_by([Access(reads={x}), None]) is None


def test_the_replay_saves_before_each_launch_and_the_reverse_restores_around_each_gradient():
    x, v = _fields(2)
    recording = Recording()
    for name, acc in (("kick", Access(reads={v}, writes={v})),
                      ("drift", Access(reads={v, x}, writes={x}))):
        recording.record(name, acc)
    replay = recording.replay(lambda e: [f"save {e.launch}"], lambda e: [e.launch])
    assert replay == ["save kick", "kick", "save drift", "drift"]
    reverse = recording.reverse(lambda e: [f"restore {e.launch}"],
                                lambda e: [f"{e.launch}.grad"])
    assert reverse == ["restore drift", "drift.grad", "restore drift",
                       "restore kick", "kick.grad", "restore kick"]
