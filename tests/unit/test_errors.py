"""statectl.errors: the one exit-code table, and the classes that carry its codes."""

from __future__ import annotations

import pytest

from statectl import errors


def test_the_table_holds_every_documented_code_once():
    constants = {name: value for name, value in vars(errors).items()
                 if name.startswith("EXIT_") and isinstance(value, int)}
    codes = [c.code for c in errors.EXIT_CODES]
    assert sorted(codes) == sorted(constants.values()) == [0, 1, 2, 3, 10, 11, 12, 13, 14, 130]
    assert len(set(codes)) == len(codes) and codes == sorted(codes)
    assert len({c.name for c in errors.EXIT_CODES}) == len(codes)
    for c in errors.EXIT_CODES:
        assert c.meaning.endswith(".") and c.meaning.startswith(c.name.split()[0]), c


def test_describe_exit_codes():
    assert errors.describe_exit_codes() == ("0 ok, 1 failure, 2 usage, 3 partial, 10 not found, 11 lock held, "
                                            "12 auth, 13 missing dependency, 14 discarded, 130 interrupted")
    assert errors.describe_exit_codes([0, (1, "different"), 10]) == "0 ok, 1 different, 10 not found"
    assert errors.describe_exit_codes([0, 1], meanings={1: "failure (x)"}) == "0 ok, 1 failure (x)"
    for bad in ([42], [(42, "made up")]):
        with pytest.raises(ValueError, match="42 is not in statectl.errors.EXIT_CODES"):
            errors.describe_exit_codes(bad)


@pytest.mark.parametrize("cls, code", [
    (errors.StatectlError, 1), (errors.UsageError, 2), (errors.ConfigError, 2), (errors.PartialError, 3),
    (errors.NotFoundError, 10), (errors.SnapshotNotFoundError, 10), (errors.BlobNotFoundError, 10),
    (errors.LockHeldError, 11), (errors.AuthError, 12), (errors.MissingDependencyError, 13),
    (errors.DiscardedError, 14),
    (errors.CorruptSnapshotError, 1), (errors.DiskFullError, 1),
    # A lease lost while holding it fails this run (it stopped before committing): 1, not "could not start" 11.
    (errors.LeaseLostError, 1),
])
def test_each_error_class_carries_a_code_of_the_table(cls, code):
    assert cls.exit_code == code
    errors.exit_code(cls.exit_code)


def test_every_error_class_has_a_code_of_the_table():
    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    for cls in subclasses(errors.StatectlError):
        errors.exit_code(cls.exit_code)


def test_interrupts_are_keyboard_interrupts_not_an_error_class():
    """Ctrl-C stays a KeyboardInterrupt (no ``except Exception`` may swallow it); the CLI edge maps it to 130."""
    assert not hasattr(errors, "OperationInterruptedError")
    assert errors.exit_code(errors.EXIT_INTERRUPTED).name == "interrupted"


def test_is_disk_full_reads_the_errors_a_failure_was_raised_from_or_while_handling():
    import errno

    from statectl.errors import is_disk_full

    rocks = Exception("IO error: No space left on device: While appending to file: /s/000008.sst")
    assert is_disk_full(rocks) and is_disk_full(OSError(errno.EDQUOT, "quota"))
    try:
        try:
            raise rocks
        except Exception:
            raise RuntimeError("Writer has previous error")  # what a store's close says after it
    except RuntimeError as e:
        assert is_disk_full(e)
    try:
        try:
            raise rocks
        except Exception:
            raise ValueError("another thing") from None  # the first error deliberately dropped
    except ValueError as e:
        assert not is_disk_full(e)
    assert not is_disk_full(OSError(errno.EACCES, "denied")) and not is_disk_full(None)
