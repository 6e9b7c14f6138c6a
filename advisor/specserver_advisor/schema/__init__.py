"""Generators of the SpecServer CustomResourceDefinition and JSON Schema from the API models
(``python -m specserver_advisor.schema.crd``; tests/advisor/schema/test_crd.py fails on drift).
May import the ground modules only.
"""
