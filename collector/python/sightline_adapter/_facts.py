"""What a batch entering a model holds: real and padded tokens, its sequences and their lengths,
whether they are packed into rows and whether their boundaries come with them, and the tokens the
loss ignores. Pure functions over numpy arrays (host copies of the batch's tensors): nothing here
touches a device. The rules are in docs/adapter.md."""
import numpy as np

IGNORE_INDEX = -100
MAX_LENGTHS = 1024  # sequences listed in one annotation; more are left out of the text


class Facts:
    __slots__ = ("rows", "columns", "real", "sequences", "ignored", "packed", "boundaries", "cu_seqlens", "seq_idx",
                 "lengths")

    def __init__(self, rows, columns):
        self.rows, self.columns = rows, columns
        self.real = self.sequences = self.ignored = None
        self.packed = self.boundaries = self.cu_seqlens = self.seq_idx = False
        self.lengths = []

    @property
    def padded(self):
        return self.rows * self.columns


def _as_rows(a, rows, columns):
    """The array as (rows, columns), or None when it does not hold one value per token."""
    if a is None:
        return None
    a = np.asarray(a)
    if a.ndim == 3 and a.shape[1:] == (rows, columns):  # multimodal rotary positions: the text row first
        a = a[0]
    if a.size != rows * columns or a.ndim > 2:
        return None
    return a.reshape(rows, columns)


def _split(valid, starts):
    """Sequence lengths from per-token flags: `starts` marks where a new sequence begins among
    the valid tokens of each row (the first valid token of a row always does)."""
    lengths = []
    for v_row, s_row in zip(valid, starts):
        idx = np.flatnonzero(v_row)
        if idx.size == 0:
            continue
        first = s_row[idx].copy()
        first[0] = True
        begin = np.flatnonzero(first)
        lengths.extend(np.diff(np.append(begin, idx.size)).tolist())
    return lengths


def _after(a, valid, fn):
    """Per token: fn(previous token, this token) where both are valid, else False."""
    out = np.zeros(a.shape, dtype=bool)
    both = valid[:, 1:] & valid[:, :-1]
    out[:, 1:] = both & fn(a[:, :-1], a[:, 1:])
    return out


def read_batch(rows, columns, mask=None, labels=None, position_ids=None, cu_seqlens=None, seq_idx=None,
               input_ids=None, eos_ids=()):
    """Facts of a batch of `rows` x `columns` tokens from the arrays that came with it."""
    f = Facts(rows, columns)
    m = _as_rows(mask, rows, columns)
    valid = (m != 0) if m is not None else np.ones((rows, columns), dtype=bool)
    f.real = int(valid.sum())
    rows_used = int(valid.any(axis=1).sum())
    pos, sid, ids = (_as_rows(a, rows, columns) for a in (position_ids, seq_idx, input_ids))
    # Where the positions restart (only asked when no cu_seqlens already give the boundaries).
    restarts = _after(pos, valid, lambda a, b: b != a + 1) if pos is not None and cu_seqlens is None else None
    if cu_seqlens is not None:
        cu = np.asarray(cu_seqlens).astype(np.int64).ravel()
        f.lengths = [int(x) for x in np.diff(cu) if x > 0]
        if m is None:
            f.real = int(cu[-1] - cu[0]) if cu.size else 0
        f.cu_seqlens = f.boundaries = True
    elif sid is not None:
        f.lengths = _split(valid, _after(sid, valid, lambda a, b: b != a))
    elif restarts is not None and restarts.any():
        f.lengths = _split(valid, restarts)
    elif ids is not None and len(eos_ids):
        eos = list(eos_ids)  # a new sequence after an end-of-sequence token followed by more real text
        f.lengths = _split(valid, _after(ids, valid, lambda a, b: np.isin(a, eos) & ~np.isin(b, eos)))
    else:
        f.lengths = [int(n) for n in valid.sum(axis=1) if n > 0]
    f.seq_idx = sid is not None
    f.sequences = len(f.lengths)
    f.packed = f.sequences > rows_used
    if restarts is not None and restarts.any():
        f.boundaries = True
    lab = _as_rows(labels, rows, columns)
    if lab is not None:
        f.ignored = int(((lab == IGNORE_INDEX) & valid).sum())
    return f


def annotation(f=None, padded=None, batch_id=None, stack=(), late=False, cont=False):
    """The sightline.batch text the analyzer reads (docs/metrics.md, "Token annotations")."""
    parts = ["sightline.batch"]
    if f is not None:
        parts.append(f"real_tokens={f.real}")
        if not cont:
            parts.append(f"padded_tokens={f.padded}")
        parts.append(f"sequences={f.sequences}")
        for key in ("packed", "boundaries", "cu_seqlens", "seq_idx"):
            if getattr(f, key):
                parts.append(f"{key}=1")
        if f.ignored is not None:
            parts.append(f"ignored_tokens={f.ignored}")
        if 0 < len(f.lengths) <= MAX_LENGTHS:
            parts.append("lengths=" + ",".join(str(n) for n in f.lengths))
    elif padded is not None:
        parts.append(f"padded_tokens={padded}")
    parts.extend(f"{s}=1" for s in stack)
    parts.append("auto=1")
    if batch_id is not None:
        parts.append(f"id={batch_id}")
    if late:
        parts.append("late=1")
    if cont:
        parts.append("cont=1")
    return " ".join(parts)
