"""Fixed batch shapes: the width a batch is padded to (--pad_multiple on a GPU; the few widths of the CUDA
graphs path) and the widths chosen from a dataset's lengths. datasets.py gives its TaskData these settings
(set_pad_multiple, set_fixed_shapes)."""


# On a GPU a batch padded to its own longest row is a new shape almost every step: kernels are chosen, and
# CUDA graphs or torch.compile would capture, once per shape. Rounding the width up to a multiple of 16 leaves
# max_length / 16 shapes per batch size (8 at --max_length 128), at the price of a few padded positions, which
# a GPU computes nearly for free. On a CPU every padded position costs its full compute, so there it is off.
GPU_PAD_MULTIPLE = 16


def padded_width(longest, multiple, max_length, widths=()):
    """The width a batch whose longest row is `longest` is padded to: the smallest of the fixed `widths` that
    holds it, or else that row's length rounded up to a multiple of `multiple`, but never past max_length (the
    longest a row can be) unless the row is longer."""
    fits = [w for w in widths if w >= longest]
    if fits:
        return min(fits)
    if not multiple:
        return longest
    return max(longest, min(-(-longest // multiple) * multiple, max_length))


def resolve_pad_multiple(requested, device):
    """--pad_multiple as the run uses it: not given (None), GPU_PAD_MULTIPLE on a GPU and 0 (off) elsewhere."""
    return (GPU_PAD_MULTIPLE if device.type == "cuda" else 0) if requested is None else requested


def choose_widths(lengths, max_length, smallest=32):
    """The fixed widths of a dataset's batches for CUDA graphs (one graph per shape): powers of two from
    `smallest` while a row is longer, then the longest row rounded up to a multiple of GPU_PAD_MULTIPLE (at
    most max_length). SST (rows up to 66 tokens at max_length 128) gets 32, 64, 80: three shapes a batch
    size."""
    longest = min(int(max(lengths, default=1)), max_length)
    widths, w = [], smallest
    while w < longest:
        widths.append(w)
        w *= 2
    widths.append(min(-(-longest // GPU_PAD_MULTIPLE) * GPU_PAD_MULTIPLE, max(max_length, longest)))
    return tuple(sorted(set(widths)))
