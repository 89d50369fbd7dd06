"""One package per target symgrad emits code for (`symgrad.targets.REGISTRY` lists them): its
printer, its runtime helpers, and its `render_module` and `derived_source`."""
