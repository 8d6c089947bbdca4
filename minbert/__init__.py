"""minbert: the library behind the handout's scripts and our commands (docs/architecture.md).

    cli.py scoring.py specs.py flag.py files.py hub.py course_data.py precision.py
                  the one-line error and parser, metrics, settings and flag rows, files, downloads,
                  precision (the lowest layer)
    finetuning/   what --fine-tune-mode trains (LoRA, DoRA, Houlsby adapters, prefix tuning), PALs, freezing
    runs/         run folders and their lock, outputs and publishing, logs, checkpoints, and which
                  flags define a run
    tasks/        the Part 1 and Part 2 models, task samplers and streams, extra data sets, masked LM
    objectives/   the training losses, sentence-embedding losses, the regularisers' table (R-Drop, SMART),
                  distillation, PCGrad, GradVac
    training/     the one training step, eager or recorded; the epoch protocol (fit), schedules, the
                  TensorBoard monitor
    flags/        flag types and groups, the rules that refuse conflicting flags, building the settings
    pipelines/    what classifier.py, multitask_classifier.py, pretrain.py and ensemble.py run
    sweeps/ reports/ bench/   sweep.py, report.py and bench.py

A module imports only from its own layer or lower (the handout's files sit in the second layer);
nothing here imports a script.
"""
