"""The running operator: caches, reconciler, writer and the process around them."""
