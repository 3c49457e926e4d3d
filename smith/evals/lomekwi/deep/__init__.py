"""Deep Lomekwi (lomekwi.tex, "Notable Variations": Deep Lomekwi; released deep_lomekwi.py and its sweep).

The same budgeted coupon game as Lomekwi, with a build tree two steps deep and different nouns. n locked
containers c_1..c_n each hold one kind of wood; the goal is to hold every kind. `examine <container>`
(1 action) puts a random container's key and one random tree resource straight into the inventory (no
ground, no pickup). The T resources are a look-alike family `{stem}1..{stem}T` (one random letter, numbered
in a random order), two of them (r0, r1) the recipe:

    combine r0 r1      -> 1 part   (both consumed)
    combine part part  -> 1 axe    (both parts consumed; so the axe costs two r0 and two r1)

`use axe <container>` yields that container's key (the axe stays), `use key_i c_i` opens c_i and gives its
wood. Crafting consumes its inputs, unlike Lomekwi's shards. Budget round(1.2 (n H_n + n)) as in Lomekwi,
turn cap max(400, 1.5 B), no no-progress guard (the released sweep turns it off: the coupon tail is
legitimately stale). The released sweep plays T in 2..6 x n in 10..30, one episode per cell, every episode
with relabel seed = drop seed = the repetition index (0).

One file per job, as in Lomekwi's package: env.py (the world and its state machine), importer.py (reading
the texts back, released rows in and out), metrics.py (R1 and R2), costs.py (build vs grind), agents.py
(the reference agents).
"""
