"""Packing Lab's lab: what a teacher runs, over the library ``packing_core``.

It imports the library and is never imported by it (a test holds the direction):

    advice/   the cheatsheet, loss weights, schedules, batch composition, the longest documents
    demos/    the training pair and its cache, the bucketing demo, the loss lesson, ``warm``
    zoo/      the bug catalogue: bugs reported in real projects, reproduced live; planted faults
    viz/      the figures the pages draw (plotly)
    bench/    the attention benchmark and the machine it ran on
    cli/      the ``packing-lab`` command: the library's commands and the lab's (``zoo``, ``warm``)

The pages (``app_pages/``) draw these; ``packing_core`` computes every number they show.
"""
