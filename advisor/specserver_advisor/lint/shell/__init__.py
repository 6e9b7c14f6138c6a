"""The shell evaluator under lint's launch-script source (inside ``lint``): tokenizer, parser,
word expansion and one budget per file. Pure. May import ``lint.model``/``lint.argv`` and the
layers below ``lint``.
"""
