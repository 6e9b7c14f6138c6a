"""The shared observation cycle (above ``reconcile``, beside ``webhook``): every few seconds one
pass over every SpecServer, leader election, per-object fault isolation, heap trimming. May
import ``reconcile`` and everything below; never ``webhook``.
"""
