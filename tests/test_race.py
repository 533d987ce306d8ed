"""The race scheduler: both prefills before anything is handed out, then the run that is behind goes next."""

from types import SimpleNamespace

from specviz.core.race import race


def _stream(name, times, log):
    for t in times:
        log.append(name)
        yield SimpleNamespace(run=name, t_end_ms=t)


def test_both_prefills_run_before_the_first_event_is_yielded():
    log: list[str] = []
    events = race(_stream("speculative", [10, 50, 60], log), _stream("baseline", [12, 20, 30, 40], log))
    first = next(events)
    assert first.run == "speculative" and log == ["speculative", "baseline"]
    rest = [first] + list(events)
    order = [(e.run, e.t_end_ms) for e in rest]
    assert order[:2] == [("speculative", 10), ("baseline", 12)]
    # afterwards each step advances the run that is behind on its own clock
    assert order[2:] == [("speculative", 50), ("baseline", 20), ("baseline", 30), ("baseline", 40), ("speculative", 60)]


def test_a_stream_that_ends_early_leaves_the_other_running():
    log: list[str] = []
    out = list(race(_stream("speculative", [], log), _stream("baseline", [1, 2], log)))
    assert [e.t_end_ms for e in out] == [1, 2]
