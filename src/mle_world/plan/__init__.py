"""Planning: configs, the sweep expansion and the rendered trial commands. Pure: no subprocess or clients."""
