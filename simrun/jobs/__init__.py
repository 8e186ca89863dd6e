"""The jobs: one library function each, called alike by the CLI (`simrun.cli`), by the
library entry (`simrun.api`) and by batch's tasks (`simrun.batch.jobs`).

    run.py           run_job: a run folder (frames, energies, pictures)
    check.py         check_job: `simrun check` (compile, KEYs, optimize parameters)
    grad_folder.py   grad_request, grad_job: `simrun grad`, reverse or forward mode, --check,
                     --method ensemble; grad.py the gradients, grad_check.py the check
                     against finite differences, horizon.py the sensitivity's growth
    ensemble.py      ensemble_gradient: derivatives of canonical averages (one run)
    optimize.py      optimize_scene: the training loop over trajectory gradients
    fit.py           fit_by_reweighting: ensemble targets fitted by DiffTRe
    finish.py        finish: how every job records success (guards first)

This package sits above stepper, adjoint, ensemble and optimize, and below batch, api and
cli; it imports nothing at start-up, so the CLI loads each job only when it runs."""
