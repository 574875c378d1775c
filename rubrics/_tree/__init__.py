"""The rubric tree's machinery: `Rubric` (module) and what it calls into, split for size.

`module` holds the node class; under it, how a node is scored (`scoring`), grouped
(`grouping`), scored per turn (`turns`), re-scored where it failed (`rescore`), drawn
(`render`) and what a batch returns (`batch`). The node kinds (`rubrics._leaf`,
`_containers`, `_group`) and the trainer adapters (`rubrics._trl`, `_verl`) build on it.
"""
