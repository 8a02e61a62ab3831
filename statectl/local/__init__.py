"""The local side of a store: dir layout, and StagedStore, the one way a store dir is replaced."""
