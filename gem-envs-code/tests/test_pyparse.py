"""The judge parses tests from many threads: CPython 3.11's ast.parse alone is not safe there."""

import gc
import sys
import threading

from gem_envs_code.harness import referenced_names

# a nested list literal like MBPP's longer asserts: the parse recurses deeply
NESTED = "assert f(" + "[" * 40 + "'a', " * 50 + "1" + "]" * 40 + ") == [[1]]"


class _Finalised:
    """Runs Python code when the collector frees it, as a parse's allocations can trigger."""

    def __del__(self) -> None:
        sum(range(50))


def test_referenced_names_from_many_threads_at_once():
    errors: list[BaseException] = []

    def parse_many() -> None:
        for _ in range(800):
            cycle = _Finalised()
            cycle.self = cycle  # freed only by the collector, mid-parse
            try:
                assert referenced_names(NESTED) == ["f"]
            except BaseException as error:  # the SystemError is what this looks for
                errors.append(error)
                return

    thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
    gc.set_threshold(5, 1, 1)
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=parse_many) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        gc.set_threshold(*thresholds)
        sys.setswitchinterval(interval)
    assert errors == []
