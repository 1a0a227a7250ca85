//! Fuzz target bodies, as plain functions: `fuzz/fuzz_targets/*.rs` call them under
//! `cargo +nightly fuzz run`, and [`replay`] runs them on stable over a seeded corpus (valid
//! encodings made by the engine, then mutated: bit flips, byte overwrites, truncations,
//! insertions, splices). A target fails by panicking; bytes from disk must never make the engine
//! panic, and a decoder that accepts its input must round-trip it.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use shale::blob::{decode_record, encode_record_header, BlobRef};
use shale::env::{Fs, MemFs, WritableFile};
use shale::iter::InternalIterator;
use shale::key::{make_internal_key, InternalKeyComparator, ValueKind};
use shale::sstable::block::{Block, BlockIter};
use shale::sstable::format::{decode_block, decode_footer};
use shale::sstable::{ReadFlags, TableBuilder, TableOptions, TableReader};
use shale::version::VersionEdit;
use shale::wal::{LogKind, LogReader, LogWriter};
use shale::{BytewiseComparator, Compression, Db, Options, WriteBatch};

/// A fuzz target body.
pub type Target = fn(&[u8]);

/// Every target, by name.
pub const TARGETS: [(&str, Target); 8] = [
    ("wal_reader", wal_reader),
    ("table_block", table_block),
    ("table_footer", table_footer),
    ("table_file", table_file),
    ("version_edit", version_edit),
    ("write_batch", write_batch),
    ("blob_record", blob_record),
    ("whole_db", whole_db),
];

fn icmp() -> InternalKeyComparator {
    InternalKeyComparator::new(Arc::new(BytewiseComparator))
}

fn table_options() -> TableOptions {
    TableOptions {
        icmp: icmp(),
        block_size: 256,
        block_restart_interval: 4,
        bloom_bits_per_key: 10,
        compression: Compression::None,
        lz4_acceleration: 1,
    }
}

/// The WAL reader over arbitrary file bytes, and each record as a write batch.
pub fn wal_reader(data: &[u8]) {
    let fs = MemFs::new();
    let path = PathBuf::from("/f/000001.log");
    fs.set_contents(&path, data.to_vec());
    let Ok(file) = fs.open_sequential(&path) else {
        return;
    };
    let mut reader = LogReader::new(file, path.clone(), LogKind::Wal, None);
    for _ in 0..10_000 {
        match reader.read_record() {
            Ok(Some(record)) => {
                if let Ok(batch) = WriteBatch::from_data(record, &path, 0) {
                    // Decode every record; malformed ones are errors, never panics.
                    batch.iter().for_each(drop);
                }
            }
            Ok(None) | Err(_) => return,
        }
    }
}

/// Block decoding (checksum, decompression) and iteration over arbitrary block bytes.
pub fn table_block(data: &[u8]) {
    let path = Path::new("/f/000001.sst");
    for verify in [true, false] {
        let _ = decode_block(path, 0, data.to_vec(), verify);
    }
    let Ok(block) = Block::new(data.to_vec()) else {
        return;
    };
    let mut it = BlockIter::new(Arc::new(block), icmp());
    it.seek_to_first();
    let mut steps = 0;
    while it.valid() && steps < 10_000 {
        let _ = (it.key().len(), it.value().len());
        it.next();
        steps += 1;
    }
    it.seek_to_last();
    while it.valid() && steps < 20_000 {
        it.prev();
        steps += 1;
    }
    it.seek(&make_internal_key(b"m", 1 << 40, ValueKind::Value));
    it.seek_for_prev(&make_internal_key(b"m", 1 << 40, ValueKind::Value));
}

/// The table footer decoder.
pub fn table_footer(data: &[u8]) {
    let _ = decode_footer(Path::new("/f/000001.sst"), 0, data);
}

/// A whole table: open (footer, index, filter, properties) and iterate, seek and verify.
pub fn table_file(data: &[u8]) {
    let fs = MemFs::new();
    let path = PathBuf::from("/f/000001.sst");
    fs.set_contents(&path, data.to_vec());
    let Ok(file) = fs.open_random(&path) else {
        return;
    };
    let Ok(reader) = TableReader::open(table_options(), file, path, 1, None) else {
        return;
    };
    let reader = Arc::new(reader);
    let _ = reader.verify();
    let mut it = reader.iter(ReadFlags::default());
    it.seek_to_first();
    let mut steps = 0;
    while it.valid() && steps < 10_000 {
        it.next();
        steps += 1;
    }
    let _ = it.status();
    it.seek(&make_internal_key(b"k", 1 << 40, ValueKind::Value));
    it.seek_to_last();
    if it.valid() {
        it.prev();
    }
    let _ = reader.may_contain(b"k");
}

/// The manifest's version edit decoder; an accepted edit must re-encode to an equal edit.
pub fn version_edit(data: &[u8]) {
    if let Ok(edit) = VersionEdit::decode(data) {
        let again = VersionEdit::decode(&edit.encode());
        assert_eq!(again.as_ref(), Ok(&edit), "a decoded edit must round-trip");
    }
}

/// The write-batch decoder; an accepted batch must iterate without errors.
pub fn write_batch(data: &[u8]) {
    if let Ok(batch) = WriteBatch::from_data(data.to_vec(), Path::new("/f/000001.log"), 0) {
        let mut n = 0u32;
        for entry in batch.iter() {
            assert!(entry.is_ok(), "a checked batch must iterate cleanly");
            n += 1;
        }
        assert_eq!(n, batch.count(), "a checked batch holds count records");
    }
}

/// The blob file record decoder and the blob reference decoder (`docs/format/blob.md`): an
/// accepted record or reference must re-encode to the same bytes.
pub fn blob_record(data: &[u8]) {
    if let Ok((key, value)) = decode_record(data) {
        let mut again = encode_record_header(key, value).to_vec();
        again.extend_from_slice(key);
        again.extend_from_slice(value);
        assert_eq!(again, data, "a decoded blob record must round-trip");
    }
    if let Some(r) = BlobRef::decode(data) {
        assert_eq!(r.encode(), data, "a decoded blob reference must round-trip");
    }
}

/// A whole database driven by the input bytes (puts, deletes, merges, flushes, compactions,
/// reopens, reads), checked against a `BTreeMap` after every read and at the end.
pub fn whole_db(data: &[u8]) {
    let fs = MemFs::new();
    let options = Options {
        write_buffer_size: 4096,
        max_file_size: 4096,
        block_size: 256,
        level0_file_num_compaction_trigger: 2,
        max_background_jobs: 1,
        // Compactions split into parts that run at once wherever they can.
        max_subcompactions: 3,
        merge_operator: Some(Arc::new(shale::StringAppendOperator::new(b"+"))),
        // Values of 16 bytes and more live in blob files.
        min_blob_size: Some(16),
        fs: Arc::new(fs),
        ..Options::default()
    };
    let Ok(mut db) = Db::open("/db", options.clone()) else {
        panic!("a fresh database must open");
    };
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut bytes = data.iter().copied();
    while let Some(op) = bytes.next() {
        let k = format!("k{}", bytes.next().unwrap_or(0) % 32).into_bytes();
        let vlen = usize::from(bytes.next().unwrap_or(0) % 64);
        let v: Vec<u8> = (&mut bytes).take(vlen).collect();
        match op % 16 {
            0..=5 => {
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
            6..=7 => {
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            8..=9 => {
                db.merge(&k, &v).expect("merge");
                let next = match model.get(&k) {
                    Some(old) => [old.as_slice(), b"+", &v].concat(),
                    None => v,
                };
                model.insert(k, next);
            }
            10 => db.flush().expect("flush"),
            11 => db.compact_range(None, None).expect("compact"),
            12 => {
                drop(db);
                db = Db::open("/db", options.clone()).expect("reopen");
            }
            _ => assert_eq!(db.get(&k).expect("get"), model.get(&k).cloned(), "get"),
        }
    }
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .range::<&[u8], _>(..)
        .collect::<Result<_, _>>()
        .expect("scan");
    let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
    assert_eq!(all, expected, "the database must equal the model");
}

/// Valid inputs for `target`, made by the engine: the corpus mutation starts from.
pub fn seeds(target: &str) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    match target {
        "wal_reader" => {
            let fs = MemFs::new();
            let path = PathBuf::from("/f/000001.log");
            if let Ok(file) = fs.create(&path) {
                if let Ok(mut w) = LogWriter::new(file, path.clone(), LogKind::Wal, 1) {
                    for i in 0..6u64 {
                        let mut b = WriteBatch::new();
                        b.put(format!("k{i}"), vec![b'v'; (i as usize) * 300]);
                        b.delete("x");
                        b.set_sequence(i * 10 + 1);
                        let _ = w.add_record(b.data());
                    }
                    let _ = w.close();
                }
            }
            out.extend(fs.contents(&path));
        }
        "table_block" | "table_footer" | "table_file" => {
            let table = build_table();
            if target == "table_file" {
                out.push(table.clone());
            } else if target == "table_footer" {
                out.push(table[table.len().saturating_sub(56)..].to_vec());
            } else {
                // The first data block with its trailer, and its contents alone.
                let path = Path::new("/f/000001.sst");
                for len in [200usize, 300, 400] {
                    let stored = table[..len.min(table.len())].to_vec();
                    out.push(stored.clone());
                    if let Ok(raw) = decode_block(path, 0, stored, false) {
                        out.push(raw);
                    }
                }
            }
        }
        "version_edit" => {
            let mut e = VersionEdit {
                comparator: Some("shale.BytewiseComparator".into()),
                log_number: Some(7),
                next_file_number: Some(9),
                last_sequence: Some(1234),
                ..VersionEdit::default()
            };
            e.delete_file(1, 3);
            e.compact_pointers
                .push((2, make_internal_key(b"p", 5, ValueKind::Value)));
            out.push(e.encode());
        }
        "blob_record" => {
            for (key, len) in [(&b"k"[..], 0usize), (b"user-key", 40), (b"", 300)] {
                let value = vec![b'v'; len];
                let mut record = encode_record_header(key, &value).to_vec();
                record.extend_from_slice(key);
                record.extend_from_slice(&value);
                out.push(record);
            }
            out.push(
                BlobRef {
                    file_number: 12,
                    offset: 20,
                    length: 1000,
                }
                .encode(),
            );
        }
        "write_batch" => {
            let mut b = WriteBatch::new();
            b.put("a", "1");
            b.delete("b");
            b.merge("c", "2");
            b.put_with_expiry("d", "3", 99);
            out.push(b.data().to_vec());
        }
        _ => {
            let mut rng = StdRng::seed_from_u64(7);
            for _ in 0..4 {
                out.push((0..300).map(|_| rng.gen()).collect());
            }
        }
    }
    out
}

fn build_table() -> Vec<u8> {
    let fs = MemFs::new();
    let path = PathBuf::from("/f/000001.sst");
    let Ok(file) = fs.create(&path) else {
        return Vec::new();
    };
    let file: Box<dyn WritableFile> = file;
    let mut b = TableBuilder::new(table_options(), file, path.clone());
    for i in 0..60u64 {
        let key = make_internal_key(format!("k{i:03}").as_bytes(), 100 - i, ValueKind::Value);
        if b.add(&key, format!("value{i}").as_bytes()).is_err() {
            return Vec::new();
        }
    }
    if b.finish().is_err() {
        return Vec::new();
    }
    fs.contents(&path).unwrap_or_default()
}

/// Applies one random mutation to `data`.
pub fn mutate(rng: &mut StdRng, data: &mut Vec<u8>, other: &[u8]) {
    let len = data.len();
    match rng.gen_range(0..6) {
        0 if len > 0 => {
            let i = rng.gen_range(0..len);
            data[i] ^= 1 << rng.gen_range(0..8);
        }
        1 if len > 0 => {
            let i = rng.gen_range(0..len);
            data[i] = rng.gen();
        }
        2 => data.truncate(rng.gen_range(0..=len)),
        3 => {
            let i = rng.gen_range(0..=len);
            let n = rng.gen_range(1..16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
            data.splice(i..i, bytes);
        }
        4 if !other.is_empty() => {
            let i = rng.gen_range(0..=len);
            let j = rng.gen_range(0..other.len());
            let k = rng.gen_range(j..=other.len());
            data.splice(i.., other[j..k].iter().copied());
        }
        _ if len > 4 => {
            // Interesting integers at a random spot.
            let i = rng.gen_range(0..len - 4);
            let v: u32 = [0, 1, 0x7f, 0xff, 0xffff, u32::MAX][rng.gen_range(0..6)];
            data[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        _ => data.push(rng.gen()),
    }
}

/// Result of replaying one target.
#[derive(Debug, Clone, Default)]
pub struct ReplayStats {
    /// Inputs run.
    pub executions: u64,
    /// Inputs that panicked (the contract says none).
    pub panics: u64,
    /// The first panicking input, hex-encoded, to reproduce.
    pub first_panic: Option<String>,
}

/// Runs `target` on its seeds and on `executions` mutated inputs derived from `seed`.
pub fn replay(name: &str, target: Target, executions: u64, seed: u64) -> ReplayStats {
    let corpus = seeds(name);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut stats = ReplayStats::default();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for i in 0..executions {
        let mut input = corpus
            .get(i as usize % corpus.len().max(1))
            .cloned()
            .unwrap_or_default();
        if i as usize >= corpus.len() {
            let other = corpus
                .get(rng.gen_range(0..corpus.len().max(1)))
                .cloned()
                .unwrap_or_default();
            for _ in 0..rng.gen_range(1..6) {
                mutate(&mut rng, &mut input, &other);
            }
        }
        stats.executions += 1;
        if catch_unwind(AssertUnwindSafe(|| target(&input))).is_err() {
            stats.panics += 1;
            if stats.first_panic.is_none() {
                stats.first_panic = Some(input.iter().map(|b| format!("{b:02x}")).collect());
            }
        }
    }
    std::panic::set_hook(previous);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panics_on_long_input(data: &[u8]) {
        assert!(data.len() < 40, "long input");
    }

    #[test]
    fn replay_counts_panics_and_keeps_the_input() {
        let stats = replay("version_edit", panics_on_long_input, 200, 1);
        assert_eq!(stats.executions, 200);
        assert!(stats.panics > 0);
        assert!(stats.first_panic.is_some());
    }

    #[test]
    fn every_target_has_seeds_that_are_accepted() {
        for (name, _) in TARGETS {
            assert!(!seeds(name).is_empty(), "{name}");
        }
        // The valid encodings decode, so mutations start from deep inside each decoder.
        assert!(VersionEdit::decode(&seeds("version_edit")[0]).is_ok());
        let batch = seeds("write_batch").remove(0);
        assert!(WriteBatch::from_data(batch, Path::new("/x"), 0).is_ok());
        let table = seeds("table_file").remove(0);
        assert!(table.len() > 500, "a real table: {} bytes", table.len());
    }
}
