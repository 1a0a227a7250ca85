"""Tests of the shale Python binding: run by scripts/test-python.sh against an installed wheel."""

import gc
import glob
import os
import struct
import threading

import pytest

import shale


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    with shale.DB(path) as handle:
        yield handle


def u64(n):
    return struct.pack("<Q", n)


def test_put_get_delete(db):
    db.put(b"apple", b"red")
    db.put(b"", b"")
    db.put(b"nul\x00key", b"x\x00y", sync=True)
    assert db.get(b"apple") == b"red"
    assert db.get(b"") == b""
    assert db.get(b"nul\x00key") == b"x\x00y"
    assert db.get(b"pear") is None
    db.delete(b"apple")
    assert db.get(b"apple") is None
    db.delete(b"never-there")


def test_keys_and_values_must_be_bytes(db):
    with pytest.raises(TypeError):
        db.put("text", b"v")
    with pytest.raises(TypeError):
        db.put(b"k", 42)
    with pytest.raises(TypeError):
        db.get(None)


def test_data_survives_reopen(path):
    with shale.DB(path) as db:
        for i in range(500):
            db.put(b"key%04d" % i, b"value%d" % i)
    with shale.DB(path, create_if_missing=False) as db:
        assert db.get(b"key0042") == b"value42"
        assert len(list(db.range())) == 500


def test_context_manager_closes_and_closed_handle_raises(path):
    with shale.DB(path) as db:
        db.put(b"k", b"v")
        assert not db.closed
        assert os.fspath(db.path) == path
    assert db.closed
    assert "closed" in repr(db)
    with pytest.raises(shale.ClosedError):
        db.get(b"k")
    with pytest.raises(shale.Error):
        db.put(b"k", b"v")
    db.close()  # a second close does nothing
    # The lock was released: the directory opens again.
    with shale.DB(path) as again:
        assert again.get(b"k") == b"v"


def test_open_errors_map_to_exception_classes(path):
    with pytest.raises(shale.ExistsError, match="does not exist"):
        shale.DB(path, create_if_missing=False)
    with shale.DB(path):
        with pytest.raises(shale.LockedError):
            shale.DB(path)
    with pytest.raises(shale.ExistsError, match="already exists"):
        shale.DB(path, error_if_exists=True)
    with pytest.raises(shale.InvalidArgumentError, match="unknown compression"):
        shale.DB(path, compression="gzip")
    with pytest.raises(shale.InvalidArgumentError, match="unknown merge operator"):
        shale.DB(path, merge_operator="sum")
    with pytest.raises(shale.InvalidArgumentError, match="write_buffer_size"):
        shale.DB(path, write_buffer_size=10)
    with pytest.raises(shale.InvalidArgumentError, match="flush_lz4_acceleration"):
        shale.DB(path, flush_lz4_acceleration=0)
    with pytest.raises(TypeError):
        shale.DB(path, no_such_option=True)


def test_exception_hierarchy():
    for name in [
        "CorruptionError",
        "IoError",
        "InvalidArgumentError",
        "LockedError",
        "ExistsError",
        "MergeError",
        "PoisonedError",
        "UnsupportedFormatError",
        "ClosedError",
    ]:
        cls = getattr(shale, name)
        assert issubclass(cls, shale.Error), name
    assert issubclass(shale.Error, Exception)


def test_options_are_applied(path):
    options = dict(
        write_buffer_size=64 * 1024,
        max_open_files=100,
        block_size=1024,
        block_cache_capacity=0,
        bloom_bits_per_key=0,
        compression="zstd:5",
        flush_lz4_acceleration=4,
        max_file_size=64 * 1024,
        paranoid_checks=True,
    )
    with shale.DB(path, **options) as db:
        value = b"v" * 100
        for i in range(2000):
            db.put(b"key%05d" % i, value)
        db.flush()
        assert int(db.property("shale.total-sst-size")) > 0
        assert db.get(b"key01999") == value


@pytest.mark.parametrize(
    "operator, operands, expected",
    [
        ("uint64add", [u64(1), u64(2), u64(39)], u64(42)),
        ("stringappend", [b"a", b"b", b"c"], b"a,b,c"),
        ("max", [b"m", b"z", b"c"], b"z"),
    ],
)
def test_merge_operators(path, operator, operands, expected):
    with shale.DB(path, merge_operator=operator) as db:
        for operand in operands:
            db.merge(b"k", operand)
        assert db.get(b"k") == expected
        db.flush()
        db.compact_range()
        assert db.get(b"k") == expected


def test_merge_errors(path):
    with shale.DB(path) as db:
        with pytest.raises(shale.InvalidArgumentError, match="merge"):
            db.merge(b"k", b"v")
    with shale.DB(path, merge_operator="uint64add") as db:
        db.merge(b"k", b"abc")
        with pytest.raises(shale.MergeError, match="uint64add"):
            db.get(b"k")


def test_write_batch_is_atomic_and_reusable(path):
    with shale.DB(path, merge_operator="uint64add") as db:
        db.put(b"gone", b"x")
        batch = shale.WriteBatch()
        batch.put(b"a", b"1")
        batch.put(b"b", b"2")
        batch.delete(b"gone")
        batch.merge(b"n", u64(5))
        assert len(batch) == 4
        db.write(batch, sync=True)
        assert len(batch) == 4
        assert db.get(b"a") == b"1"
        assert db.get(b"b") == b"2"
        assert db.get(b"gone") is None
        db.write(batch)
        assert db.get(b"n") == u64(10)
        batch.clear()
        assert len(batch) == 0
        db.write(batch)  # an empty batch is a no-op


def test_range_forward_reverse_and_bounds(db):
    for key in [b"a", b"b", b"c", b"d", b"e"]:
        db.put(key, key.upper())
    assert list(db.range()) == [(k, k.upper()) for k in [b"a", b"b", b"c", b"d", b"e"]]
    assert [k for k, _ in db.range(b"b", b"d")] == [b"b", b"c"]
    assert [k for k, _ in db.range(b"b", b"d", reverse=True)] == [b"c", b"b"]
    assert [k for k, _ in db.range(start=b"c")] == [b"c", b"d", b"e"]
    assert [k for k, _ in db.range(end=b"c", reverse=True)] == [b"b", b"a"]
    assert list(db.range(b"x")) == []
    empty_range = db.range(b"c", b"c")
    assert list(empty_range) == []
    assert list(empty_range) == []  # exhausted stays exhausted


def test_iterator_cursor(db):
    for key in [b"a", b"c", b"e"]:
        db.put(key, b"v" + key)
    it = db.iterator()
    assert not it.valid()
    with pytest.raises(shale.InvalidArgumentError):
        it.key()
    it.seek(b"b")
    assert it.valid() and it.key() == b"c" and it.value() == b"vc"
    it.next()
    assert it.key() == b"e"
    it.next()
    assert not it.valid()
    it.check()
    it.next()  # moving an invalid cursor does nothing
    it.seek_to_last()
    assert it.key() == b"e"
    it.prev()
    assert it.key() == b"c"
    it.seek_for_prev(b"b")
    assert it.key() == b"a"
    it.seek_to_first()
    assert it.key() == b"a"
    # Python iteration continues from the cursor's position.
    it.seek(b"c")
    assert [k for k, _ in it] == [b"c", b"e"]
    # A fresh cursor iterates from the first key.
    assert [k for k, _ in db.iterator()] == [b"a", b"c", b"e"]
    bounded = db.iterator(lower_bound=b"b", upper_bound=b"e")
    assert [k for k, _ in bounded] == [b"c"]


def test_snapshots(db):
    db.put(b"k", b"old")
    with db.snapshot() as snapshot:
        assert snapshot.sequence >= 1
        db.put(b"k", b"new")
        db.put(b"k2", b"new")
        assert db.get(b"k", snapshot=snapshot) == b"old"
        assert db.get(b"k2", snapshot=snapshot) is None
        assert db.get(b"k") == b"new"
        assert list(db.range(snapshot=snapshot)) == [(b"k", b"old")]
        it = db.iterator(snapshot=snapshot)
    # A cursor made with a snapshot keeps its view after the release.
    assert [(k, v) for k, v in it] == [(b"k", b"old")]
    with pytest.raises(shale.ClosedError):
        db.get(b"k", snapshot=snapshot)
    with pytest.raises(shale.ClosedError):
        snapshot.sequence
    snapshot.release()  # a second release does nothing


def test_flush_compaction_and_properties(db):
    for i in range(1000):
        db.put(b"key%04d" % i, b"x" * 50)
    for i in range(0, 1000, 2):
        db.delete(b"key%04d" % i)
    db.flush()
    db.compact_range(b"key0000", b"key0500")
    db.compact_range()
    assert db.property("shale.last-sequence") == "1500"
    assert "level" in db.property("shale.stats").lower()
    assert db.property("shale.no-such-property") is None
    assert len(list(db.range())) == 500


def test_read_only(path):
    with shale.DB(path) as db:
        db.put(b"k", b"v")
        # A read-only handle takes no lock: it opens beside the writer.
        with shale.DB(path, read_only=True) as reader:
            assert reader.get(b"k") == b"v"
            assert "read-only" in repr(reader)
            with pytest.raises(shale.InvalidArgumentError, match="read-only"):
                reader.put(b"k2", b"v")


def test_corruption_is_reported(path):
    with shale.DB(path, compression="none", block_cache_capacity=0) as db:
        for i in range(200):
            db.put(b"key%04d" % i, b"value %d " % i * 10)
        db.flush()
    tables = glob.glob(os.path.join(path, "*.sst"))
    assert tables, os.listdir(path)
    with open(tables[0], "r+b") as f:
        f.seek(100)  # inside the first data block
        f.write(b"\xff" * 16)
    with shale.DB(path, block_cache_capacity=0) as db:
        with pytest.raises(shale.CorruptionError, match="sst"):
            list(db.range())


def test_threads_share_a_database(db):
    def writer(thread):
        for i in range(200):
            db.put(b"t%d-%03d" % (thread, i), b"%d" % i)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(db.range())) == 800
    assert db.get(b"t3-199") == b"199"


def test_module_metadata():
    assert isinstance(shale.__version__, str)
    assert "DB" in dir(shale)
    assert repr(shale.WriteBatch()) == "<shale.WriteBatch of 0 operations>"


def test_io_error_is_an_os_error(tmp_path):
    assert issubclass(shale.IoError, shale.Error)
    assert issubclass(shale.IoError, OSError)
    assert shale.IoError.__module__ == "shale"
    # A database directory under a regular file cannot be created.
    blocker = tmp_path / "file"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(shale.IoError) as raised:
        shale.DB(str(blocker / "db"))
    assert isinstance(raised.value, OSError)
    assert str(blocker) in str(raised.value)


def test_exists_error_covers_both_cases():
    doc = shale.ExistsError.__doc__
    assert "does not exist" in doc and "already exists" in doc


def corrupt_blob_file(path):
    """Writes a value kept in a blob file under b"big" (and b"small" beside it), then damages
    the blob file so that reading the value fails its checksum."""
    with shale.DB(path, compression="none") as db:
        db.put(b"big", b"v" * (64 * 1024))  # over the 16 KiB blob threshold
        db.put(b"small", b"s")
        db.flush()
    blobs = glob.glob(os.path.join(path, "*.blob"))
    assert blobs, os.listdir(path)
    with open(blobs[0], "r+b") as f:
        # Inside the value: after the 20-byte file header, the 17-byte record header and the
        # key (the file may end in zeros past the record, docs/format/blob.md).
        f.seek(20 + 17 + len(b"big") + 1000)
        f.write(b"\xff" * 16)


def test_iterator_value_raises_when_the_blob_cannot_be_read(path):
    corrupt_blob_file(path)
    with shale.DB(path, block_cache_capacity=0) as db:
        it = db.iterator()
        it.seek_to_first()
        assert it.valid() and it.key() == b"big"  # keys are readable without their values
        with pytest.raises(shale.CorruptionError, match="blob"):
            it.value()
        assert not it.valid()
        with pytest.raises(shale.CorruptionError):
            it.check()
        it.seek(b"small")
        assert it.value() == b"s"
        with pytest.raises(shale.CorruptionError):
            list(db.iterator())
        with pytest.raises(shale.CorruptionError):
            list(db.range())


def test_next_on_an_unpositioned_cursor_starts_at_the_first_key(db):
    for key in [b"a", b"b", b"c"]:
        db.put(key, key)
    it = db.iterator()
    it.next()
    assert it.valid() and it.key() == b"a"
    assert [k for k, _ in it] == [b"a", b"b", b"c"]
    backward = db.iterator()
    backward.prev()
    assert backward.key() == b"c"
    empty = db.iterator(lower_bound=b"x")
    empty.next()
    assert not empty.valid()
    assert list(empty) == []


def test_iterator_and_range_close(db):
    db.put(b"a", b"1")
    db.put(b"b", b"2")
    with db.iterator() as it:
        it.seek_to_first()
        assert it.key() == b"a"
    for use in [
        it.valid,
        it.seek_to_first,
        it.next,
        it.prev,
        it.key,
        it.value,
        it.check,
        lambda: it.seek(b"a"),
        lambda: next(it),
    ]:
        with pytest.raises(shale.ClosedError):
            use()
    it.close()  # a second close does nothing

    with db.range() as r:
        assert next(r) == (b"a", b"1")
    with pytest.raises(shale.ClosedError):
        next(r)
    r.close()

    explicit = db.iterator()
    explicit.close()
    with pytest.raises(shale.ClosedError):
        list(explicit)


def test_close_waits_for_calls_in_flight(path):
    """However the threads interleave with close(), every call either completes or raises
    ClosedError, and once close() returns the directory's lock is free."""
    db = shale.DB(path, write_buffer_size=64 * 1024)
    start = threading.Barrier(5)
    outcomes = []

    def worker(thread):
        start.wait()
        try:
            for i in range(10_000):
                db.put(b"t%d-%05d" % (thread, i), b"x" * 100)
                if i % 500 == 0:
                    db.flush()
        except shale.ClosedError:
            outcomes.append("closed")
        else:
            outcomes.append("done")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    start.wait()
    db.close()
    with shale.DB(path) as again:  # would raise LockedError if a call still held the database
        assert not again.closed
    for t in threads:
        t.join()
    assert sorted(set(outcomes)) <= ["closed", "done"] and len(outcomes) == 4


def test_an_unclosed_db_releases_its_lock_when_collected(path):
    db = shale.DB(path)
    db.put(b"k", b"v")
    del db
    gc.collect()
    with shale.DB(path) as again:
        assert again.get(b"k") == b"v"


def test_destroy_db_removes_the_database_and_leaves_other_files(tmp_path):
    path = tmp_path / "db"
    with shale.DB(path) as handle:
        handle.put(b"k", b"v")
        with pytest.raises(shale.LockedError):
            shale.destroy_db(path)
    shale.destroy_db(path)
    assert not path.exists()
    shale.destroy_db(path)  # already gone: nothing to do

    kept = tmp_path / "kept"
    with shale.DB(kept) as handle:
        handle.put(b"k", b"v")
    (kept / "notes.txt").write_text("mine")
    shale.destroy_db(str(kept))
    assert sorted(os.listdir(kept)) == ["notes.txt"]


def test_repair_db_reports_what_it_salvaged_and_lost(tmp_path):
    path = tmp_path / "db"
    with shale.DB(path, write_buffer_size=64 * 1024) as handle:
        for i in range(3000):
            handle.put(b"key%05d" % i, b"v" * 50)
        handle.flush()
        handle.put(b"late", b"in the WAL")
    tables = sorted(glob.glob(str(path / "*.sst")))
    assert len(tables) > 1

    # A table cut in half: repair says so, moves it aside and keeps everything else.
    table = tables[0]
    with open(table, "r+b") as f:
        f.truncate(os.path.getsize(table) // 2)
    report = shale.repair_db(path)
    assert len(report["problems"]) == 1, report
    assert os.path.basename(table) in report["problems"][0]
    assert any(p.endswith(os.path.basename(table)) for p in report["moved_to_lost"])
    assert report["tables_scanned"] == len(tables) and report["wals_scanned"] >= 1
    assert report["intermediate_tables"] == 0  # a few tables, none overlapping
    with shale.DB(path) as handle:
        survivors = dict(handle.range())
        assert handle.get(b"late") == b"in the WAL"
    assert 1 < len(survivors) < 3001
    assert len(survivors) == report["entries_recovered"]

    # Repairing a healthy database loses nothing.
    report = shale.repair_db(str(path))
    assert report["problems"] == [] and report["moved_to_lost"] == []
    with shale.DB(path) as handle:
        assert dict(handle.range()) == survivors

    with pytest.raises(shale.Error):
        shale.repair_db(tmp_path / "no-such-dir")
