"""verifiers harness id `autoenv-inprocess`: the null harness's chat program run in-process.

verifiers resolves a harness id it does not ship by importing the top-level module of that
name (dashes become underscores) and taking the one Harness subclass in its `__all__`;
this module is that entry point. The implementation and its reasons live in autoenv.child.inprocess.
"""

from autoenv.child.inprocess import harness_class

InProcessHarness = harness_class()

__all__ = ["InProcessHarness"]
