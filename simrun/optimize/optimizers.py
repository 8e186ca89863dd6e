"""First-order optimisers on one flat parameter vector, with global gradient-norm clipping
and bounds by projection. Each is a pure function of (parameters, gradient, its own state),
so a training replayed from its record takes exactly the same steps."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def clip_norm(grad: np.ndarray, clip: float | None, epsilon: float = 0.0) -> np.ndarray:
    """The gradient scaled down to norm `clip` when it is longer (global norm clipping); with
    `epsilon`, by min(1, clip / (|g| + epsilon)), as DiffTaichi's rigid_body.py does."""
    norm = float(np.linalg.norm(grad))
    if clip is None or norm + epsilon <= clip:
        return grad
    return grad * (clip / (norm + epsilon))


def normalized(grad: np.ndarray) -> np.ndarray:
    """g / |g| (zero stays zero): steps of length lr whatever the gradient's size."""
    norm = float(np.linalg.norm(grad))
    return grad / norm if norm > 0 else grad


def project(params: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """The nearest point inside the box [low, high]."""
    return np.minimum(np.maximum(params, low), high)


@dataclass
class Adam:
    """Kingma & Ba (2015), with bias correction; `weight_decay` is decoupled as in AdamW
    (Loshchilov & Hutter 2019): params shrink by lr * weight_decay * params each step, apart
    from the adaptive step, so the decay is not rescaled by the gradient's history."""

    lr: float
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = 0.0
    eps: float = 1e-8
    t: int = 0
    m: np.ndarray | None = None
    v: np.ndarray | None = None

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float | None = None) -> np.ndarray:
        """One step, at rate `lr` (a schedule's value) or the constant `self.lr`."""
        lr = self.lr if lr is None else lr
        b1, b2 = self.betas
        if self.m is None:
            self.m, self.v = np.zeros_like(grad), np.zeros_like(grad)
        self.t += 1
        self.m = b1 * self.m + (1 - b1) * grad
        self.v = b2 * self.v + (1 - b2) * grad * grad
        m_hat = self.m / (1 - b1 ** self.t)
        v_hat = self.v / (1 - b2 ** self.t)
        decayed = params - lr * self.weight_decay * params if self.weight_decay else params
        return decayed - lr * m_hat / (np.sqrt(v_hat) + self.eps)


@dataclass
class SGD:
    """Gradient descent with optional (Nesterov) momentum, as PyTorch defines it:
    b = momentum b + g; step along b, or along g + momentum b with Nesterov. `weight_decay`
    is an L2 penalty weight_decay/2 |p|^2: g becomes g + weight_decay * p."""

    lr: float
    momentum: float = 0.0
    nesterov: bool = False
    weight_decay: float = 0.0
    buf: np.ndarray | None = field(default=None)

    def step(self, params: np.ndarray, grad: np.ndarray, lr: float | None = None) -> np.ndarray:
        """One step, at rate `lr` (a schedule's value) or the constant `self.lr`."""
        lr = self.lr if lr is None else lr
        if self.weight_decay:
            grad = grad + self.weight_decay * params
        if self.momentum == 0:
            return params - lr * grad
        self.buf = grad.copy() if self.buf is None else self.momentum * self.buf + grad
        direction = grad + self.momentum * self.buf if self.nesterov else self.buf
        return params - lr * direction
