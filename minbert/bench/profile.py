"""Where a training step's time goes (bench.py --profile N): N steps of a bench.candidate.Candidate under
torch's profiler, after a warm-up, the time sorted by phase (forward, backward, the optimizer step with
zero_grad) and by what the operators do. An operator's self time counts once, in the first category that names
it; what no category names is "other" (mostly elementwise arithmetic, the autograd engine's own work and the
phases' own Python time). On a GPU the times are those of the kernels each operator launched (CUDA's
activity), so their sum is the time the GPU is busy in a step: what a step recorded as a CUDA graph, with no
launch gaps, would still take."""
import collections

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

PHASES = ("forward", "backward", "optimizer")
CATEGORIES = [
    ("matmuls", ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
                 "aten::_scaled_dot_product_flash_attention_cpu",
                 "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::mkldnn_linear")),
    ("optimizer arithmetic", ("aten::_fused_adamw_", "aten::_foreach_", "aten::sqrt", "aten::addcdiv_",
                              "aten::addcmul_", "aten::lerp_", "Optimizer.step#AdamW.step")),
    ("dropout "
     "masks", ("aten::bernoulli_", "aten::random_", "aten::uniform_", "aten::native_dropout", "aten::ge.",
                       "aten::ge", "NativeDropoutBackward0")),
    ("copies and "
     "dtype casts", ("aten::_to_copy", "aten::copy_", "aten::to", "aten::clone", "aten::contiguous")),
    ("softmax, layer "
     "norm, GELU", ("aten::_softmax", "aten::_log_softmax", "aten::native_layer_norm", "aten::gelu",
                                   "aten::_softmax_backward_data", "aten::_log_softmax_backward_data",
                                   "aten::native_layer_norm_backward", "aten::gelu_backward", "aten::tanh")),
    ("zeroing, fills "
     "and allocation", ("aten::fill_", "aten::zero_", "aten::zeros", "aten::zeros_like", "aten::empty",
                                       "aten::empty_strided", "Optimizer.zero_grad#AdamW.zero_grad")),
]


def category(name):
    """The category of an operator: a name listed ends with "_" or "." is a prefix, any other is the exact name."""
    for label, names in CATEGORIES:
        if name in names or any(n.endswith(("_", ".")) and name.startswith(n) for n in names):
            return label
    return "other"


def profile_steps(candidate, steps, warmup=3):
    """{"ms_per_step", "phases": {phase: ms/step}, "categories": {category: ms/step}, "top": [(op,
    ms/step)], "padded_tokens_per_step"} of `steps` training steps of `candidate` (a
    bench.candidate.Candidate) over its timed batches in order (cycling), after `warmup` untimed ones. Fewer
    steps than timed batches profile the first ones only, whose size can differ from the timed steps' mean:
    compare ms per step at the same padded tokens."""
    c = candidate
    c.train(True)
    batches = c.batches
    for b in batches[:warmup]:
        c.train_step(b)
    timed = [batches[warmup + i % max(1, len(batches) - warmup)] for i in range(steps)]
    gpu = c.device.type == "cuda"
    with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * gpu) as prof:
        for b in timed:
            c.train_step(b)
    # (an operator's events on the host; on a GPU, the time of the kernels it launched)
    events = [e for e in prof.key_averages() if e.device_type == DeviceType.CPU]
    total, own = (("device_time_total", "self_device_time_total") if gpu else
                  ("cpu_time_total", "self_cpu_time_total"))
    # (on a GPU the backward pass's kernels are launched from autograd's own thread, outside the "backward"
    # range: they count in the kinds below, and that phase is left out)
    phases = {e.key: getattr(e, total) / 1000 / steps for e in events
              if e.key in PHASES and not (gpu and e.key == "backward")}
    by_category, ops = collections.Counter(), collections.Counter()
    for e in events:
        if e.key in PHASES or not getattr(e, own):
            continue
        ms = getattr(e, own) / 1000 / steps
        by_category[category(e.key)] += ms
        ops[e.key] += ms
    return {"ms_per_step": sum(by_category.values()), "phases": phases,
            "categories": dict(by_category.most_common()), "top": ops.most_common(12),
            "padded_tokens_per_step": sum(b["x"]["input_ids"].numel() for b in timed) / steps}
