"""The operator's own Prometheus metrics (a leaf: every layer may import it; it imports nothing
of the operator).
"""
