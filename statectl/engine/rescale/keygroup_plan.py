"""The plan of a key-group rescale (ClipDB + IngestDB, on snapshots): which source files go into
a target snapshot by server-side copy, unread, and which are read and rewritten by the executors.

Each source task ``i`` of ``N`` owns key groups O_i, each target ``t`` of ``M`` owns R_t
(statectl.formats.keygroups). A live SST file of source ``i`` (its key range from the snapshot's MANIFEST,
statectl.rocks.manifest) spans key groups [first, last]; for target ``t`` with S = O_i ∩ R_t:

- a file wholly inside S is *copied*: the target's MANIFEST lists it at its level with its sequence
  numbers, as the source's did;
- a file overlapping S and reaching outside it is a *boundary* file: *read*. Its keys in S are
  resolved (every level, deletions applied) by the executors and written into new SST files;
- a copied file whose key range overlaps a read one's is read too, until none does (the closure): a
  key is then resolved from every file of its source that may hold it, never half from a copied file
  and half from a rewritten one.

A source whose snapshot has a non-empty WAL is read whole (its MANIFEST does not say what the WAL holds).
Copied files keep their levels; files of different sources never share a key group, so a level above 0
stays free of overlaps in the target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from statectl.errors import StatectlError
from statectl.formats.keygroups import KeyGroupError, key_group, task_range
from statectl.rocks.manifest import LiveFile, Manifest


class KeyGroupStoreError(StatectlError):
    """A source snapshot that is not a key-group store of the given key-group count (exit 1)."""


@dataclass(frozen=True)
class SourceFile:
    source: int
    file: LiveFile
    first: int  # key groups spanned
    last: int

    @property
    def size(self) -> int:
        return self.file.size


@dataclass
class TargetPlan:
    task: int
    first: int  # its key groups, inclusive
    last: int
    copies: list[SourceFile] = field(default_factory=list)
    reads: list[SourceFile] = field(default_factory=list)
    whole: list[int] = field(default_factory=list)  # sources read whole that reach into this target

    @property
    def bytes_copied(self) -> int:
        return sum(f.size for f in self.copies)


@dataclass
class KeyGroupPlan:
    groups: int
    targets: list[TargetPlan]
    reads: dict[int, list[SourceFile]]  # per source: the files the executors read (not for whole sources)
    whole: set[int]

    @property
    def bytes_copied(self) -> int:
        return sum(t.bytes_copied for t in self.targets)

    def bytes_read(self, source_bytes: dict[int, int]) -> int:
        """Bytes the executors read: each source's read files once, a whole source's every file."""
        return sum(f.size for fs in self.reads.values() for f in fs) + sum(source_bytes[i] for i in self.whole)


def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def plan(manifests: list[Manifest | None], from_tasks: int, to_tasks: int, groups: int) -> KeyGroupPlan:
    """The plan for sources ``manifests`` (per source task in order; None: read it whole). Raises
    KeyGroupStoreError for a file whose smallest or largest key has no valid key-group prefix."""
    targets = [TargetPlan(t, *task_range(t, to_tasks, groups)) for t in range(to_tasks)]
    reads: dict[int, dict[int, SourceFile]] = {}
    whole: set[int] = set()
    for i, m in enumerate(manifests):
        owned = task_range(i, from_tasks, groups)
        if m is None:
            whole.add(i)
            for t in targets:
                if _overlaps(owned, (t.first, t.last)):
                    t.whole.append(i)
            continue
        files = []
        for f in m.live_files:
            try:
                files.append(SourceFile(i, f, key_group(f.smallest_key, groups), key_group(f.largest_key, groups)))
            except KeyGroupError as e:
                raise KeyGroupStoreError(f"source task {i}: SST {f.name}: {e}",
                                         hint="is --key-groups the store's number of key groups (Flink's max "
                                              "parallelism)? Without key-group prefixes, leave --key-groups out") \
                    from None
        for t in targets:
            s = (max(owned[0], t.first), min(owned[1], t.last))
            if s[0] > s[1]:
                continue
            mine = [f for f in files if _overlaps((f.first, f.last), s)]
            read = [f for f in mine if not (s[0] <= f.first and f.last <= s[1])]
            copy = [f for f in mine if s[0] <= f.first and f.last <= s[1]]
            # The closure by key ranges, not key groups: compaction cuts files anywhere, so neighbours
            # share a key group without sharing a key. A copied file lies inside S, so a read file's whole
            # range tests it as well as the part inside S would.
            region = [(f.file.smallest_key, f.file.largest_key) for f in read]
            changed = True
            while changed:
                changed = False
                for f in list(copy):
                    if any(f.file.smallest_key <= hi and lo <= f.file.largest_key for lo, hi in region):
                        copy.remove(f)
                        read.append(f)
                        region.append((f.file.smallest_key, f.file.largest_key))
                        changed = True
            t.copies += copy
            t.reads += read
            for f in read:
                reads.setdefault(i, {})[f.file.number] = f
    return KeyGroupPlan(groups, targets, {i: list(fs.values()) for i, fs in sorted(reads.items())}, whole)


def partial_level(copies: list[LiveFile], ranges: list[tuple[bytes, bytes]], max_level: int = 6) -> int:
    """The deepest level (``max_level`` down to 1) where no copied file's key range overlaps any of
    ``ranges`` (the rewritten files' smallest and largest keys), 0 when every level has one: where the
    rewritten files go in the target's MANIFEST."""
    for level in range(max_level, 0, -1):
        if not any(c.level == level and c.smallest_key <= hi and lo <= c.largest_key
                   for c in copies for lo, hi in ranges):
            return level
    return 0


def check_target(files: list[LiveFile], first: int, last: int, groups: int) -> list[str]:
    """Problems of a target's file set: a file with keys outside key groups ``first..last``, or two files
    of one level above 0 whose key ranges overlap (RocksDB would refuse to open it)."""
    problems = []
    for f in files:
        try:
            a, b = key_group(f.smallest_key, groups), key_group(f.largest_key, groups)
        except KeyGroupError as e:
            problems.append(f"SST {f.name}: {e}")
            continue
        if a < first or b > last:
            problems.append(f"SST {f.name} spans key groups {a}..{b}, the target owns {first}..{last}")
    by_level: dict[int, list[LiveFile]] = {}
    for f in files:
        if f.level > 0:
            by_level.setdefault(f.level, []).append(f)
    for level, fs in by_level.items():
        fs.sort(key=lambda f: f.smallest_key)
        for x, y in zip(fs, fs[1:]):
            if y.smallest_key <= x.largest_key:
                problems.append(f"SST {x.name} and {y.name} overlap in level {level}")
    return problems
