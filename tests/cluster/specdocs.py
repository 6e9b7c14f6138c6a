"""SpecServer documents the cluster tests share: scripts/specserverdocs.py, which the demo and
the benchmarks build theirs with too."""

from __future__ import annotations

from stack import load_script

eagle3_auto = load_script("specserverdocs").eagle3_auto
