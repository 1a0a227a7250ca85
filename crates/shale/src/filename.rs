//! Names of the files in a database directory, and the parser that tells them apart.
//!
//! Owns the naming scheme only; what each file holds and when it is durable is described in
//! `docs/format/files.md`. Numbers come from one counter per database (the manifest's
//! `next_file_number`), so a number names at most one file of any type over the life of a
//! database, and is printed with at least six digits.
//!
//! ```text
//! CURRENT              name of the live manifest, one line: "MANIFEST-000005\n"
//! LOCK                 held (flock) while a process has the database open
//! MANIFEST-000005      log of version edits
//! 000012.log           write-ahead log
//! 000013.sst           table
//! 000012.blob          blob file: separated large values (numbered like its WAL)
//! CURRENT.dbtmp        temporary file, never read, removed at open (so is NNNNNN.dbtmp)
//! LOG, LOG.old         an info log: recognised, never written (diagnostics go to `tracing`)
//! ```
//!
//! Thread-safety: pure functions.

use std::path::{Path, PathBuf};

/// What a file in the database directory is, with its number where it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// A write-ahead log, `NNNNNN.log`.
    Wal(u64),
    /// A table, `NNNNNN.sst`.
    Table(u64),
    /// A manifest, `MANIFEST-NNNNNN`.
    Manifest(u64),
    /// A blob file of separated values, `NNNNNN.blob`.
    Blob(u64),
    /// The `CURRENT` pointer to the live manifest.
    Current,
    /// The `LOCK` file.
    Lock,
    /// A temporary file, `NNNNNN.dbtmp` or `<NAME>.dbtmp`; it is never read, and `open`
    /// removes any it finds (one can be left by a crash before its rename).
    Temp,
    /// An info log, `LOG` or `LOG.old`, as LevelDB names it. shale never writes one (its
    /// diagnostics go to `tracing`) and leaves any it finds alone.
    InfoLog,
}

/// Name of the file listing the live manifest.
pub const CURRENT_FILE: &str = "CURRENT";
/// Name of the lock file.
pub const LOCK_FILE: &str = "LOCK";
/// Prefix of manifest file names.
pub const MANIFEST_PREFIX: &str = "MANIFEST-";
/// Suffix of temporary files (as written by [`crate::env::write_file_atomic`]).
pub const TEMP_SUFFIX: &str = ".dbtmp";

/// `dir/NNNNNN.log`.
pub fn wal_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// `dir/NNNNNN.sst`.
pub fn table_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// `dir/NNNNNN.blob`.
pub fn blob_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob"))
}

/// `dir/MANIFEST-NNNNNN`.
pub fn manifest_file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{MANIFEST_PREFIX}{number:06}"))
}

/// `dir/CURRENT`.
pub fn current_file_name(dir: &Path) -> PathBuf {
    dir.join(CURRENT_FILE)
}

/// `dir/LOCK`.
pub fn lock_file_name(dir: &Path) -> PathBuf {
    dir.join(LOCK_FILE)
}

/// Tells what a directory entry is from its name alone; `None` for names shale never writes
/// (those are left alone by garbage collection).
pub fn parse_file_name(name: &str) -> Option<FileType> {
    match name {
        CURRENT_FILE => return Some(FileType::Current),
        LOCK_FILE => return Some(FileType::Lock),
        "LOG" | "LOG.old" => return Some(FileType::InfoLog),
        _ => {}
    }
    if let Some(digits) = name.strip_prefix(MANIFEST_PREFIX) {
        return parse_number(digits).map(FileType::Manifest);
    }
    let (stem, suffix) = name.rsplit_once('.')?;
    match suffix {
        "log" => parse_number(stem).map(FileType::Wal),
        "sst" => parse_number(stem).map(FileType::Table),
        "blob" => parse_number(stem).map(FileType::Blob),
        "dbtmp" if stem == CURRENT_FILE || parse_number(stem).is_some() => Some(FileType::Temp),
        _ => None,
    }
}

/// The largest file number shale hands out; a name with a larger one is not shale's. The
/// bound keeps `next_file_number + 1` from overflowing however the directory was filled (a
/// file named `18446744073709551615.sst` would otherwise wrap the counter to 0).
pub const MAX_FILE_NUMBER: u64 = 1 << 62;

/// A file number as shale prints it: ASCII digits only (no sign, no spaces), six of them or
/// more without a leading zero (`000012`, `1234567`), at most [`MAX_FILE_NUMBER`]. Only the
/// printed form parses because every file is opened under the name shale prints for its
/// number: `12.log` read as WAL 12 would send recovery to a `000012.log` that is not there.
fn parse_number(digits: &str) -> Option<u64> {
    let canonical = digits.len() == 6 || (digits.len() > 6 && !digits.starts_with('0'));
    if !canonical || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&n| n <= MAX_FILE_NUMBER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(path: PathBuf) -> String {
        path.file_name()
            .expect("file name")
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn formats_are_fixed() {
        let dir = Path::new("/db");
        assert_eq!(wal_file_name(dir, 12), PathBuf::from("/db/000012.log"));
        assert_eq!(table_file_name(dir, 12), PathBuf::from("/db/000012.sst"));
        assert_eq!(blob_file_name(dir, 12), PathBuf::from("/db/000012.blob"));
        assert_eq!(parse_file_name("000012.blob"), Some(FileType::Blob(12)));
        assert_eq!(
            manifest_file_name(dir, 12),
            PathBuf::from("/db/MANIFEST-000012")
        );
        assert_eq!(current_file_name(dir), PathBuf::from("/db/CURRENT"));
        assert_eq!(lock_file_name(dir), PathBuf::from("/db/LOCK"));
        // Numbers wider than six digits are printed in full.
        assert_eq!(
            table_file_name(dir, 12_345_678),
            PathBuf::from("/db/12345678.sst")
        );
    }

    #[test]
    fn format_then_parse_round_trips() {
        let dir = Path::new("/db");
        for n in [0, 1, 12, 999_999, 1_000_000, MAX_FILE_NUMBER] {
            assert_eq!(
                parse_file_name(&name_of(wal_file_name(dir, n))),
                Some(FileType::Wal(n))
            );
            assert_eq!(
                parse_file_name(&name_of(table_file_name(dir, n))),
                Some(FileType::Table(n))
            );
            assert_eq!(
                parse_file_name(&name_of(manifest_file_name(dir, n))),
                Some(FileType::Manifest(n))
            );
            assert_eq!(
                parse_file_name(&format!("{n:06}{TEMP_SUFFIX}")),
                Some(FileType::Temp)
            );
        }
        assert_eq!(
            parse_file_name(&name_of(current_file_name(dir))),
            Some(FileType::Current)
        );
        assert_eq!(
            parse_file_name(&name_of(lock_file_name(dir))),
            Some(FileType::Lock)
        );
        assert_eq!(parse_file_name("LOG"), Some(FileType::InfoLog));
        assert_eq!(parse_file_name("LOG.old"), Some(FileType::InfoLog));
        assert_eq!(parse_file_name("CURRENT.dbtmp"), Some(FileType::Temp));
        assert_eq!(
            parse_file_name("1234567.sst"),
            Some(FileType::Table(1_234_567))
        );
    }

    #[test]
    fn junk_is_rejected() {
        for junk in [
            "",
            ".",
            "foo",
            "CURRENTX",
            "current",
            "LOCK.old",
            "MANIFEST",
            "MANIFEST-",
            "MANIFEST-12x",
            "MANIFEST--1",
            "MANIFEST-+1",
            "MANIFEST- 1",
            ".log",
            "12.LOG",
            "12.log.bak",
            // Not as shale prints numbers: it would open them as `000012.log`.
            "12.log",
            "7.sst",
            "00012.blob",
            "0000012.log",
            "01234567.sst",
            "MANIFEST-1",
            "MANIFEST-0000001",
            "12.dbtmp",
            "x12.log",
            "-1.log",
            "+1.sst",
            " 1.sst",
            "1 .sst",
            "12.ldb",
            "12",
            "99999999999999999999.sst", // does not fit in a u64
            "18446744073709551616.log", // u64::MAX + 1
            "18446744073709551615.sst", // u64::MAX: above MAX_FILE_NUMBER
            "4611686018427387905.log",  // MAX_FILE_NUMBER + 1
            "abc.dbtmp",
            "12.sst.dbtmp",
            "١٢.sst", // non-ASCII digits
        ] {
            assert_eq!(parse_file_name(junk), None, "{junk:?} must be rejected");
        }
    }
}
