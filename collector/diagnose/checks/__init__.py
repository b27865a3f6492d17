"""The diagnosis checks, one module per small family; `registry.CHECKS` lists them all."""
