"""Freezing BERT's lower layers, for a whole run (--freeze_layers K) or at first (--gradual_unfreeze STEPS).

A BERT of L layers is L + 1 groups from the bottom: the embeddings, then layer 0 ... layer L-1. BertModel runs
its lowest `frozen_groups` groups without a graph (torch.no_grad): no gradient reaches them, the optimizer
leaves them as they are (it skips parameters without a gradient), and their backward is never computed.
Nothing about the model's parameters changes, so checkpoints and --eval_only are as without freezing.

--freeze_layers K keeps the embeddings and the K lowest layers frozen for the whole run: the general features
of the lower layers are kept, and each step costs less. (Lee et al. 2019, "What Would Elsa Do? Freezing Layers
During Transformer Fine-Tuning", find most of BERT's fine-tuning quality with the lower layers frozen.)

--gradual_unfreeze STEPS is ULMFiT's gradual unfreezing (Howard and Ruder 2018, section 3.2): training starts
with all of BERT frozen (the pooler and the task heads train), then one more group is unfrozen from the top
every STEPS optimizer steps, the embeddings last, so that the new heads settle before their gradients reach
the pretrained layers ("catastrophic forgetting"). ULMFiT unfreezes one group per epoch: STEPS = an epoch's
steps. With both flags, the K lowest layers are never unfrozen. The state follows from the number of optimizer
steps taken, so a resumed run freezes what the uninterrupted one did.
"""
from minbert.cli import MinbertError
from minbert.finetuning.lora import layer_part

class GradualUnfreezing:
    """Called with the number of optimizer steps taken; sets how many groups are frozen then."""

    def __init__(self, bert, every, floor=0):
        self.bert, self.every, self.floor = bert, every, floor
        self.groups = bert.config.num_hidden_layers + 1

    def frozen_at(self, updates):
        return max(self.floor, self.groups - updates // self.every)

    def __call__(self, updates):
        self.bert.frozen_groups = self.frozen_at(updates)


def frozen_parameters(bert, freeze_layers):
    """The parameters --freeze_layers keeps frozen for the whole run: the embeddings' and the lowest layers'."""
    if not freeze_layers:
        return []
    lowest = bert.layers[:freeze_layers]
    return [p for m in [*bert.embeddings, *lowest] for p in m.parameters()]


def setup_freezing(bert, freeze_layers=0, gradual_unfreeze=0, log=print):
    """Freeze what --freeze_layers asks for; returns the GradualUnfreezing schedule (or None) the trainer calls."""
    layers = bert.config.num_hidden_layers
    if freeze_layers > layers:
        raise MinbertError(f"--freeze_layers {freeze_layers}: the model has {layers} layers")
    prefixed = ("prefix" in bert.LAYER_PARTS
                and getattr(*layer_part(bert, bert.layers[0], "prefix")) is not None)
    if freeze_layers == layers and prefixed:
        # A frozen layer runs without a graph, so no gradient reaches the prefix it reads: with every layer
        # frozen the prefix would not train at all, although it is counted as trainable.
        raise MinbertError(f"--freeze_layers {freeze_layers} with --fine-tune-mode prefix: every layer "
                           "frozen leaves the prefixes without a gradient, so only the heads would train; "
                           "freeze fewer layers, or use --fine-tune-mode last-linear-layer")
    floor = freeze_layers + 1 if freeze_layers else 0
    bert.frozen_groups = floor
    if floor:
        log(f"freezing: the embeddings and layers 0-{freeze_layers - 1} "
            f"of {layers} stay frozen (--freeze_layers)")
    if not gradual_unfreeze:
        return None
    schedule = GradualUnfreezing(bert, gradual_unfreeze, floor)
    schedule(0)
    log(f"gradual unfreezing: BERT frozen at the start, one more group from the top every {gradual_unfreeze} "
        f"optimizer steps, {'the embeddings last' if not floor else f'down to layer {freeze_layers}'} (all "
        f"unfrozen after {(schedule.groups - floor) * gradual_unfreeze} steps)")
    return schedule
