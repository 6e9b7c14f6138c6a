#!/usr/bin/env bash
# `sglang serve MODEL --config FILE`, the form SGLang's server-arguments docs show for keeping the
# options in a YAML file (docs.sglang.ai, "Server Arguments": a config file whose keys are the
# flag names; the command line wins over the file). Written for this corpus, not copied.
# The model is on the command line, everything else in configs/qwen3-eagle3.yaml: SGLang merges
# the file's keys into the argv, so its mistakes are this launch's (reported at --config).
sglang serve Qwen/Qwen3-8B --config configs/qwen3-eagle3.yaml --port 30000
