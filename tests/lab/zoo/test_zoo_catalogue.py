"""One catalogue: each bug's caught_by findings fire on the bug and not on the fix (no model needed)."""
import pytest

import packing_core as pc
from packing_core.check.rules import RULES
from packing_lab.zoo import PLANTED, REPRODUCED, ZOO, Bug, broken_batch, example_checks, zoo_entry


def instruction_batch():
    docs = [[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24], [31, 32]]
    return pc.PackedBatch.from_documents(docs, 8, "next-fit", prompt_lengths=[2, 1, 2, 0])


@pytest.mark.parametrize("name", [b.name for b in ZOO if b.planted])
def test_a_planted_faults_findings_fire_on_it_and_not_on_the_sound_batch(name):
    bug = zoo_entry(name)
    good = instruction_batch()
    found = pc.check_batch(broken_batch(good, name), bug.read_by).names     # the implementation that shows it
    assert set(bug.caught_by) <= set(found), found
    assert not set(bug.caught_by) & set(pc.check_batch(good, bug.read_by).names)


@pytest.mark.parametrize("name", [b.name for b in ZOO if b.example is not None])
def test_a_reproduced_bugs_findings_fire_on_its_example_and_not_on_the_fix(name):
    broken, fixed = example_checks(name)
    caught_by = set(zoo_entry(name).caught_by)
    assert caught_by and caught_by <= set(broken.names), broken.format_table()
    assert not caught_by & set(fixed.names), fixed.format_table()


def test_every_caught_by_is_a_finding_of_the_one_table_and_has_a_title():
    for bug in ZOO:
        assert all(n in RULES for n in bug.caught_by)
        assert len(bug.caught_by_titles) == len(bug.caught_by)
    with pytest.raises(ValueError, match="unknown findings"):
        Bug("x", "t", "w", (), "f", "nothing", ("no_such_finding",))


def test_the_planted_faults_are_the_zoos_model_free_entries():
    assert PLANTED[1:] == tuple(b.name for b in ZOO if b.planted)
    assert all(b.needs == "nothing" for b in ZOO if b.name in PLANTED)
    assert set(REPRODUCED).isdisjoint(PLANTED)
