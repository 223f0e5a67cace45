"""The one registry style: strategies, models and input formats are each a Registry, and their views stay live."""
import pickle

import pytest

from packing_core._registry import MappingView, NamesView, Registry
from packing_core._validate import InputError


@pytest.fixture
def colours():
    r = Registry("colour", fix=", or a hex code")
    r.register("red", "#f00")
    return r


def test_a_view_taken_before_a_registration_sees_it_and_forgets_it_after_unregister(colours):
    names, values = colours.names_view(), colours.mapping_view(str.upper)
    colours.register("blue", "#00f")
    assert names == ("red", "blue") and "blue" in names and len(names) == 2 and names[-1] == "blue"
    assert dict(values) == {"red": "#F00", "blue": "#00F"}
    assert colours.unregister("blue") == "#00f"
    assert names == ("red",) and "blue" not in values


def test_a_name_registers_once_and_an_unknown_name_is_one_input_error_naming_the_choices(colours):
    with pytest.raises(ValueError, match="a colour named 'red' is already registered") as e:
        colours.register("red", "#e00")
    assert not isinstance(e.value, InputError)      # registering twice is a bug of the code, not of the input
    with pytest.raises(InputError, match=r"^unknown colour 'green': choose one of red, or a hex code$"):
        colours.get("green")
    assert colours.find("green") is None and colours.find(["red"]) is None


def test_views_are_read_only_and_copy_or_pickle_as_plain_values(colours):
    names, values = colours.names_view(), colours.mapping_view(len)
    assert isinstance(names, NamesView) and isinstance(values, MappingView)
    with pytest.raises(TypeError):
        names[0] = "x"                                  # noqa: B018
    with pytest.raises(TypeError):
        hash(names)                                     # it changes with the registry: hash tuple(view)
    assert pickle.loads(pickle.dumps(names)) == ("red",) and type(pickle.loads(pickle.dumps(names))) is tuple
    assert type(pickle.loads(pickle.dumps(values))) is dict
    assert names + ("x",) == ("red", "x") and ("x",) + names == ("x", "red")


def test_strategies_models_and_formats_are_registries_of_one_class():
    from packing_core.data.sources import FORMATS
    from packing_core.models import registry as models
    from packing_core.packing import registry as strategies

    assert {type(FORMATS), type(models._REGISTRY), type(strategies._REGISTRY)} == {Registry}


def test_input_suffixes_follow_a_format_registered_after_import():
    from packing_core.data.sources import INPUT_SUFFIXES, register, unregister

    seen = INPUT_SUFFIXES           # imported once, as the CLI and the uploader do
    register("toy", (".TOY",), object())
    try:
        assert ".toy" in seen and ".toy" in INPUT_SUFFIXES
        with pytest.raises(ValueError, match="already belong to"):
            register("toy2", (".toy",), object())
    finally:
        unregister("toy")
    assert ".toy" not in seen


def test_a_strategy_view_and_the_info_mapping_follow_the_registry():
    from packing_core.packing import STRATEGIES, STRATEGY_INFO
    from packing_core.packing.registry import Strategy, get_strategy, register_strategy, unregister_strategy

    register_strategy(Strategy("toy-view", "A toy.", True, get_strategy("bfd").place, None))
    try:
        assert STRATEGIES[-1] == "toy-view" and STRATEGY_INFO["toy-view"] == "A toy."
    finally:
        unregister_strategy("toy-view")
    assert "toy-view" not in STRATEGIES and "toy-view" not in STRATEGY_INFO
