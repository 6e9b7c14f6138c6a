"""A table of GPUs: memory as the CUDA runtime reports it, HBM bandwidth, dense BF16 compute.

Used by the memory planner and the performance model. Figures are vendor data sheet values
(dense, no sparsity); ``memory_mib`` is the total that ``torch.cuda.get_device_properties``
reports, which is what SGLang's heuristics see (nvidia-smi's total, which SGLang's
``get_nvgpu_memory_capacity`` reads, for the PCIe and workstation cards; the two agree on
Hopper and later, and differ by ~1% on the A100). ``context_overhead_gib`` is what the CUDA
context and NCCL take before weights load. ``capability`` is the CUDA compute capability, which
SGLang's attention-backend and page-size defaults branch on (sm80 Ampere, sm86/sm89 Ampere/Ada,
sm90 Hopper, sm100 Blackwell, sm103 Blackwell Ultra, sm121 GB10). AMD Instinct cards (``rocm``)
report the gfx target as PyTorch on ROCm does (gfx942: (9, 4), gfx950: (9, 5)); SGLang branches
on ``is_hip`` for them before it looks at the capability
(``sglang.serverargs.default_attention_backend``).
``fp8_tflops`` / ``fp4_tflops`` are the dense FP8 and FP4 (NVFP4 / OCP MXFP4) matrix rates where the
card has them (0: none); the performance model prices compute at ``bf16_tflops`` today (an FP8
or FP4 checkpoint's GEMMs are priced at the BF16 rate: docs/advisor.md, what is not modelled),
so they are held for the plan's notes and for the model that will price them.
``generation`` names the architecture whose small-kernel floor and launch path the performance
model prices (``perf.parallelism``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Gpu:
    """One accelerator model."""

    name: str
    memory_mib: int
    bandwidth_gbs: float
    bf16_tflops: float
    capability: tuple[int, int] = (8, 0)
    context_overhead_gib: float = 0.8
    unified_memory: bool = False
    #: GPU-to-GPU bandwidth inside a node, one direction, GB/s: NVLink where the card has it
    #: (data sheet: total NVLink bandwidth / 2), else PCIe 4.0 x16 (~25 GB/s achievable).
    link_gbs: float = 25.0
    #: ROCm/HIP (AMD Instinct): SGLang's ``is_hip`` paths (aiter/triton attention, HIP graphs,
    #: RCCL and the aiter custom all-reduce).
    rocm: bool = False
    #: GPUs a node's fabric connects all-to-all: NVSwitch (8 on HGX), a fully connected
    #: Infinity Fabric mesh (8 on MI300X/MI325X/MI350X/MI355X platforms); 1 for PCIe-only
    #: cards.
    node_gpus: int = 8
    #: Every GPU of a node is one hop from every other over NVLink/NVSwitch (or, on AMD,
    #: Infinity Fabric): SGLang's ``is_full_nvlink``, without which its custom all-reduce runs
    #: on at most two GPUs (``perf.parallelism.custom_allreduce_off``). PCIe-only cards: False.
    full_nvlink: bool = False
    #: The driver allows GPU peer-to-peer access over PCIe (GeForce drivers do not): without
    #: it SGLang's P2P test fails and its custom all-reduce is off at any group size.
    p2p: bool = True
    #: Dense FP8 and FP4 matrix rates, TFLOPS (0: the card has no such tensor path).
    fp8_tflops: float = 0.0
    fp4_tflops: float = 0.0
    #: The data sheet the figures come from.
    source: str = ""

    @property
    def generation(self) -> str:
        """The architecture: ampere, ada, hopper, blackwell, cdna3 or cdna4."""
        if self.rocm:
            return "cdna4" if self.capability >= (9, 5) else "cdna3"
        major = self.capability[0]
        if major >= 10:
            return "blackwell"
        if major == 9:
            return "hopper"
        return "ada" if self.sm >= 89 else "ampere"

    @property
    def sm(self) -> int:
        """``get_device_sm()``: major * 10 + minor."""
        return self.capability[0] * 10 + self.capability[1]

    @property
    def memory_gib(self) -> float:
        return self.memory_mib / 1024


#: PCIe 5.0 x16's achievable bandwidth one way, GB/s (PCIe 4.0's is ``Gpu.link_gbs``' default).
PCIE5_GBS = 50.0

#: AMD's Instinct product pages (specifications tab: peak dense rates, HBM, Infinity Fabric).
_AMD = "https://www.amd.com/en/products/accelerators/instinct/"


def _nvlink(
    name: str,
    memory_mib: int,
    bandwidth_gbs: float,
    rates: tuple[float, float, float],
    capability: tuple[int, int],
    link_gbs: float,
) -> Gpu:
    """A card on a board whose GPUs are each one hop from the others (NVLink/NVSwitch on HGX
    and DGX, Infinity Fabric on Instinct platforms: ``full_nvlink``); ``rates`` its dense
    BF16, FP8 and FP4 TFLOPS (0: none)."""
    bf16, fp8, fp4 = rates
    return Gpu(
        name,
        memory_mib,
        bandwidth_gbs,
        bf16,
        capability,
        link_gbs=link_gbs,
        full_nvlink=True,
        fp8_tflops=fp8,
        fp4_tflops=fp4,
    )


def _instinct(card: Gpu, page: str) -> Gpu:
    """``card`` as an AMD Instinct card: ROCm, its figures from its product page (``page``
    under ``_AMD``)."""
    return replace(card, rocm=True, source=f"{_AMD}{page}.html")


def _grace_blackwell(
    name: str, memory_mib: int, capability: tuple[int, int], fp4_tflops: float
) -> Gpu:
    """A Grace Blackwell GPU (GB200, GB300): 8 TB/s, 2.5 PF BF16 and 5 PF FP8 dense, NVLink 5
    (900 GB/s one way); 4 to a compute tray (``cli.plannodes.USUAL_GPUS_PER_NODE``)."""
    return _nvlink(name, memory_mib, 8000, (2500, 5000, fp4_tflops), capability, 900)


GPUS: dict[str, Gpu] = {
    g.name: g
    for g in (
        Gpu("L4", 23034, 300, 121, (8, 9), fp8_tflops=242),
        Gpu("A10G", 23028, 600, 70, (8, 6)),
        Gpu("A10", 23028, 600, 125, (8, 6)),
        Gpu("A6000", 48676, 768, 155, (8, 6)),
        Gpu("L40S", 46068, 864, 362, (8, 9), fp8_tflops=733),
        # L20: the L40S's board (48 GB, ECC on) with a third of its compute (119.5 TFLOPS).
        Gpu("L20", 46068, 864, 119.5, (8, 9), fp8_tflops=239),
        # RTX 6000 Ada: 48 GB with ECC off (the workstation default), full-rate FP32 accumulate.
        Gpu("RTX-6000-ADA", 49140, 960, 364.2, (8, 9), fp8_tflops=728.5),
        # GeForce: half-rate BF16/FP8 with FP32 accumulate (what PyTorch's GEMMs use), and a
        # driver that allows no peer-to-peer access (SGLang's custom all-reduce stays off).
        Gpu("RTX-4090", 24564, 1008, 165.2, (8, 9), fp8_tflops=330.3, p2p=False),
        Gpu(
            "RTX-5090",
            32607,
            1792,
            209.5,
            (12, 0),
            link_gbs=PCIE5_GBS,
            p2p=False,
            fp8_tflops=419,
            fp4_tflops=1676,
        ),
        # RTX PRO 6000 Blackwell Workstation Edition (the Server Edition: 1,597 GB/s).
        Gpu(
            "RTX-PRO-6000",
            97887,
            1792,
            503.8,
            (12, 0),
            link_gbs=PCIE5_GBS,
            fp8_tflops=1007.6,
            fp4_tflops=2015.2,
        ),
        _nvlink("A100-40G", 40536, 1555, (312, 0, 0), (8, 0), 300),
        _nvlink("A100-80G", 81051, 2039, (312, 0, 0), (8, 0), 300),
        # A800: the A100's silicon and memory, its NVLink capped at 400 GB/s both ways.
        _nvlink("A800", 81051, 2039, (312, 0, 0), (8, 0), 200),
        _nvlink("H20", 97871, 4000, (148, 296, 0), (9, 0), 450),
        _nvlink("H100", 81559, 3350, (989, 1979, 0), (9, 0), 450),
        # H100 PCIe: HBM2e, fewer SMs at a lower clock, PCIe Gen5 and no NVSwitch.
        Gpu("H100-PCIE", 81559, 2000, 756, (9, 0), link_gbs=PCIE5_GBS, fp8_tflops=1513),
        _nvlink("H200", 143771, 4800, (989, 1979, 0), (9, 0), 450),
        # H800: the H100's silicon, memory and rates, its NVLink capped at 400 GB/s both ways.
        _nvlink("H800", 81559, 3350, (989, 1979, 0), (9, 0), 200),
        _nvlink("B200", 183359, 8000, (2250, 4500, 9000), (10, 0), 900),
        # Blackwell Ultra (sm103: SGLang's Blackwell paths branch on the major, 10, alike).
        _nvlink("B300", 275040, 8000, (2250, 4500, 14000), (10, 3), 900),
        # Grace Blackwell: 4 GPUs to a compute tray (a node), NVLink 5 across the NVL72 rack.
        _grace_blackwell("GB200", 189471, (10, 0), fp4_tflops=10000),
        _grace_blackwell("GB300", 284208, (10, 3), fp4_tflops=15000),
        _nvlink("GH200", 97871, 4000, (989, 1979, 0), (9, 0), 450),
        # DGX Spark: 128 GB LPDDR5x shared with the CPU; the runtime sees most of it.
        Gpu("GB10", 122572, 273, 62, (12, 1), context_overhead_gib=2.0, unified_memory=True),
        # AMD Instinct (product pages: dense BF16/FP8/MXFP4, no sparsity; Infinity Fabric, a
        # fully connected mesh of 8: 7 peer links of 128 GB/s both directions on CDNA 3, their
        # one-direction total as link_gbs). Memory as ROCm reports it.
        _instinct(
            _nvlink("MI300X", 196592, 5300, (1307.4, 2614.9, 0), (9, 4), 448), "mi300/mi300x"
        ),
        _instinct(
            _nvlink("MI325X", 261120, 6000, (1307.4, 2614.9, 0), (9, 4), 448), "mi300/mi325x"
        ),
        # CDNA 4: 7 Infinity Fabric links of 153.6 GB/s (both directions) -> 537 one way. The
        # MI350X is the MI355X (256 CUs, 4,096 dense BF16 FLOP a CU a clock) at a 2.2 GHz peak
        # engine clock instead of 2.4: 2,306.9 TFLOPS BF16 (AMD's page rounds it to 2.3 PF).
        _instinct(
            _nvlink("MI350X", 294896, 8000, (2306.9, 4613.7, 9227.5), (9, 5), 537), "mi350/mi350x"
        ),
        _instinct(
            _nvlink("MI355X", 294896, 8000, (2516.6, 5033.2, 10066.3), (9, 5), 537), "mi350/mi355x"
        ),
    )
}

_ALIASES = {
    "A100": "A100-80G",
    "A100-80GB": "A100-80G",
    "A100-40GB": "A100-40G",
    "H100-80G": "H100",
    "H100-SXM": "H100",
    "RTX-A6000": "A6000",
    "L40": "L40S",
    "DGX-SPARK": "GB10",
    "MI300": "MI300X",
    "MI325": "MI325X",
    "MI350": "MI350X",
    "MI355": "MI355X",
    "H800-SXM": "H800",
    "A800-80G": "A800",
    "A800-SXM": "A800",
    "H100-PCIE-80G": "H100-PCIE",
    "RTX4090": "RTX-4090",
    "GEFORCE-RTX-4090": "RTX-4090",
    "RTX5090": "RTX-5090",
    "GEFORCE-RTX-5090": "RTX-5090",
    "RTX-PRO-6000-BLACKWELL": "RTX-PRO-6000",
    "RTX-6000ADA": "RTX-6000-ADA",
}


class UnknownGpuError(KeyError):
    """A GPU name that is not in the table."""

    def __str__(self) -> str:
        return f"unknown GPU {self.args[0]!r}; known: {', '.join(sorted(GPUS))}"


def lookup_gpu(name: str) -> Gpu:
    """Find a GPU by name, case-insensitively, with common aliases."""
    key = name.strip().upper().replace(" ", "-").replace("_", "-")
    key = _ALIASES.get(key, key)
    for gpu_name, gpu in GPUS.items():
        if gpu_name.upper() == key:
            return gpu
    raise UnknownGpuError(name)
