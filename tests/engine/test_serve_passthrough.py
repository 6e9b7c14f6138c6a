"""``specserver-engine serve`` passes every flag SGLang 0.5.23's parser accepts, and refuses
what it refuses with argparse's own message (the flag table is SGLang's real parser, dumped)."""

from __future__ import annotations

import pytest

from sglangflags import HAND_REGISTERED_AND_DEPRECATED
from specserver_advisor.sglang.flagtable import Flag, flag_table, option_strings
from specserver_engine.launch import LaunchError, compose


def _value(flag: Flag) -> list[str]:
    if flag.is_bool:
        return []
    if flag.choices:
        return [flag.choices[0]]
    if flag.type in ("int", "human_readable_int"):
        return ["1"]
    if flag.type == "float":
        return ["0.5"]
    return ["x"]


def test_every_option_string_sglang_registers_passes() -> None:
    options = option_strings()
    assert len(options) > 400
    refused = []
    for option, flag in options.items():
        if flag.action == "_HelpAction" or option == "--model-path":
            continue
        args = ["--model-path", "m", option, *_value(flag)]
        try:
            assert compose(args)[2:] == args
        except LaunchError as exc:
            refused.append(f"{option}: {exc}")
    assert not refused, refused[:10]


@pytest.mark.parametrize("flag", HAND_REGISTERED_AND_DEPRECATED)
def test_hand_registered_and_deprecated_flags_pass(flag: list[str]) -> None:
    assert compose(["--model-path", "m", *flag])[2:] == ["--model-path", "m", *flag]


def test_deprecated_spellings_are_exact_matches_not_prefixes() -> None:
    from specserver_advisor.sglang.flags import parse_server_argv

    parsed = parse_server_argv(
        ["--model-path", "m", "--disable-cuda-graph", "--enable-dp-attention"]
    )
    assert parsed.values["disable_cuda_graph"] is True
    assert "disable_cuda_graph_padding" not in parsed.values
    assert parsed.values["enable_dp_attention"] is True
    assert set(parsed.deprecated) == {"--disable-cuda-graph", "--enable-dp-attention"}
    assert "disable_cuda_graph" in flag_table()


def test_refusals_carry_argparses_text() -> None:
    with pytest.raises(
        LaunchError,
        match=r"^ambiguous option: --cuda-graph-max-bs could match "
        r"--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill$",
    ):
        compose(["--model-path", "m", "--cuda-graph-max-bs", "8"])
    with pytest.raises(LaunchError, match=r"^argument --sampling-backend: invalid choice: 'nope'"):
        compose(["--model-path", "m", "--sampling-backend", "nope"])
    with pytest.raises(LaunchError, match=r"^the following arguments are required: "):
        compose(["--tp-size", "2"])
