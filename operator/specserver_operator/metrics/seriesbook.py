"""Per-SpecServer metric series as plain values, exposed at scrape time (used by registry.py).

prometheus_client keeps one child object per label set: values behind their own locks, the
label names and values again, a creation time; about 1 KB a series, and every SpecServer has
three or more (mode, readiness, one per decision reason seen). ``Series`` keeps a label tuple
and a number per series in one dict and builds the metric family only when ``/metrics`` is
scraped, so a thousand SpecServers cost a dict entry per series instead of a child object.
The exposition is prometheus_client's own (a counter's ``_total`` and ``_created`` samples
included); ``labels(...).set/.inc`` and ``remove`` read as they do on prometheus_client's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from sys import intern

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class _Child:
    """What ``Series.labels`` returns: one series to set or increment (kept by nobody)."""

    __slots__ = ("_key", "_series")

    def __init__(self, series: Series, key: tuple[str, ...]) -> None:
        self._series, self._key = series, key

    def set(self, value: float) -> None:
        self._series.put(self._key, float(value), add=False)

    def inc(self, amount: float = 1.0) -> None:
        self._series.put(self._key, float(amount), add=True)


class Series(Collector):
    """A gauge or counter family with labels, its series kept as ``labels -> [value, created]``."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: tuple[str, ...],
        counter: bool = False,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames, self.counter = labelnames, counter
        self.values: dict[tuple[str, ...], list[float]] = {}
        self.lock = threading.Lock()
        if registry is not None:
            registry.register(self)

    def labels(self, *values: str) -> _Child:
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
        return _Child(self, tuple(intern(str(v)) for v in values))

    def put(self, key: tuple[str, ...], value: float, add: bool) -> None:
        with self.lock:
            kept = self.values.get(key)
            if kept is None:
                self.values[key] = [value, time.time()]
            else:
                kept[0] = kept[0] + value if add else value

    def remove(self, *values: str) -> None:
        with self.lock:
            self.values.pop(tuple(values), None)

    def collect(self) -> Iterator[Metric]:
        with self.lock:
            items = [(key, kept[0], kept[1]) for key, kept in self.values.items()]
        family: CounterMetricFamily | GaugeMetricFamily
        if self.counter:
            family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
            for key, value, created in items:
                family.add_metric(list(key), value, created=created)
        else:
            family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
            for key, value, _ in items:
                family.add_metric(list(key), value)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())
