"""ti.ad: Tape, FwdMode, grad_replaced/grad_for, no_grad, clear_all_gradients."""
