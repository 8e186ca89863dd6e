"""The IR: ops, nodes, builder, emitter, printer, verify.

builder is imported here because it installs the operators of IR values (nodes.Arith.alu):
nodes sits below builder, so an expression's `a + b` works once any IR module is loaded."""

from . import builder as builder
