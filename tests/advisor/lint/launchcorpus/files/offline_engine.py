"""Offline engines, in the shape of SGLang's offline-engine examples
(github.com/sgl-project/sglang examples/runtime/engine: sgl.Engine(model_path=...))."""

import sglang as sgl


engine_0 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    enable_turbo_mode=True,
    host="0.0.0.0",
)

engine_1 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    speculative_algorithm="EAGLE3",
    speculative_draft_model_path="Tengyunw/qwen3_8b_eagle3",
    speculative_eagle_topk=2,
    max_running_requests=8,
)

engine_2 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    cuda_graph_max_bs_decode=16,
    host="0.0.0.0",
)

engine_3 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    speculative_algorithm="NGRAM",
    host="0.0.0.0",
)

engine_4 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    speculative_algorithm="DFLASH",
    host="0.0.0.0",
)

engine_5 = sgl.Engine(
    model_path="Qwen/Qwen3-30B-A3B-Instruct-2507",
    tp_size=2,
    speculative_algorithm="EAGLE3",
    speculative_draft_model_path="lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex",
    speculative_num_steps=3,
    speculative_eagle_topk=1,
    speculative_num_draft_tokens=4,
    max_running_requests=64,
)

engine_6 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    speculative_algorithm="EAGLE3",
    speculative_draft="Tengyunw/qwen3_8b_eagle3",
)

engine_7 = sgl.Engine(
    model_path="meta-llama/Llama-3.1-8B-Instruct",
    context_length=8192,
    chunked_prefill_size=4096,
    host="0.0.0.0",
)

engine_8 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    speculative_algorithm="EAGLE3",
    speculative_draft_model_path="Tengyunw/qwen3_8b_eagle3",
    speculative_num_steps=3,
    host="0.0.0.0",
)

engine_9 = sgl.Engine(
    model_path="Qwen/Qwen3-8B",
    mem_frac=0.8,
    host="0.0.0.0",
)
