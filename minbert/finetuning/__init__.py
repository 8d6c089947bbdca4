"""What trains: --fine-tune-mode (modes.py and one module per method), PALs (--pals) and freezing
(--freeze_layers, --gradual_unfreeze)."""
