"""NVPTX codegen: the CPU's task bodies in grid-stride kernels, math through libdevice."""
