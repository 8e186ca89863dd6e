"""`has_pytorch()`: False, as simrun has no PyTorch interop (to_torch/from_torch)."""


def has_pytorch() -> bool:
    return False
