//! End-to-end tests of the `shale` binary: every test runs the built tool as a process on a
//! database in a temporary directory and checks its output, files and exit code.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const EXIT_NOT_FOUND: i32 = 1;
const EXIT_USAGE: i32 = 2;
const EXIT_CORRUPTION: i32 = 3;
const EXIT_OTHER: i32 = 5;

/// Runs the tool with `args`, feeding it `input` on stdin (or a closed stdin).
fn run_with_input<S: AsRef<OsStr>>(args: &[S], input: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shale");
    if let Some(input) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(input).expect("write stdin");
    }
    child.wait_with_output().expect("wait for shale")
}

fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    run_with_input(args, None)
}

fn code(output: &Output) -> i32 {
    output.status.code().expect("exit code")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs the tool and insists on success; returns stdout.
fn ok<S: AsRef<OsStr>>(args: &[S]) -> Vec<u8> {
    ok_with_input(args, None)
}

fn ok_with_input<S: AsRef<OsStr>>(args: &[S], input: Option<&[u8]>) -> Vec<u8> {
    let out = run_with_input(args, input);
    assert_eq!(
        code(&out),
        0,
        "shale {:?} failed: {}",
        args.iter()
            .map(|a| a.as_ref().to_owned())
            .collect::<Vec<_>>(),
        stderr(&out)
    );
    out.stdout
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Hex TSV input for `load --hex`, built here independently of the tool's own encoder.
fn hex_tsv(records: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut out = String::new();
    for (k, v) in records {
        out.push_str(&format!("{}\t{}\n", hex(k), hex(v)));
    }
    out.into_bytes()
}

/// Loads `records` into `db` through hex input.
fn load(db: &Path, records: &[(Vec<u8>, Vec<u8>)]) {
    let db = db.to_str().expect("utf-8 path");
    ok_with_input(&["load", "--hex", db], Some(&hex_tsv(records)));
}

/// The records of `db`, read through `dump --hex` and decoded here.
fn contents(db: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let out = ok(&[OsStr::new("dump"), OsStr::new("--hex"), db.as_os_str()]);
    let unhex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    };
    String::from_utf8(out)
        .expect("hex output is ASCII")
        .lines()
        .map(|line| {
            let (k, v) = line.split_once('\t').expect("KEY<TAB>VALUE");
            (unhex(k), unhex(v))
        })
        .collect()
}

/// Keys and values made of every byte value, tabs, newlines, backslashes and non-UTF-8.
fn binary_records() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut records: Vec<(Vec<u8>, Vec<u8>)> = (0..=255u8)
        .map(|b| (vec![b'k', b], vec![b, b'\t', b'\n', b'\\', 0xff, b'x', b]))
        .collect();
    records.push(((0..=255u8).collect(), (0..=255u8).rev().collect()));
    records.push((b"\t\n\r\\x41\\".to_vec(), Vec::new()));
    records.push((Vec::new(), b"the empty key".to_vec()));
    records.push((
        "ключ ✓".as_bytes().to_vec(),
        "\u{2028}\u{a0}".as_bytes().to_vec(),
    ));
    records.sort();
    records.dedup_by(|a, b| a.0 == b.0);
    records
}

fn file_with_suffix(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(suffix))
        })
        .collect();
    files.sort();
    files
}

fn flip_byte(path: &Path, offset: usize) {
    let mut data = std::fs::read(path).expect("read");
    assert!(offset < data.len(), "{} is too short", path.display());
    data[offset] ^= 0x20;
    std::fs::write(path, data).expect("write");
}

#[test]
fn load_and_dump_round_trip_binary_keys_in_every_encoding_and_format() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let source = tmp.path().join("source");
    let records = binary_records();
    load(&source, &records);
    assert_eq!(contents(&source), records);

    for encoding in [None, Some("--hex"), Some("--base64")] {
        for format in ["tsv", "jsonl"] {
            let name = format!("copy-{}-{format}", encoding.unwrap_or("text"));
            let copy = tmp.path().join(&name);
            let mut dump_args = vec![
                OsStr::new("dump"),
                OsStr::new("--format"),
                OsStr::new(format),
            ];
            let mut load_args = vec![
                OsStr::new("load"),
                OsStr::new("--format"),
                OsStr::new(format),
            ];
            if let Some(flag) = encoding {
                dump_args.push(OsStr::new(flag));
                load_args.push(OsStr::new(flag));
            }
            dump_args.push(source.as_os_str());
            load_args.push(copy.as_os_str());
            let dumped = ok(&dump_args);
            // One line per record: no tab or newline inside a key or value escapes its field.
            assert_eq!(
                dumped.iter().filter(|&&b| b == b'\n').count(),
                records.len(),
                "{name}"
            );
            if format == "tsv" {
                for line in dumped.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                    assert_eq!(line.iter().filter(|&&b| b == b'\t').count(), 1, "{name}");
                }
            }
            let loaded = ok_with_input(&load_args, Some(&dumped));
            assert!(loaded.is_empty(), "load prints its summary on stderr only");
            assert_eq!(contents(&copy), records, "{name}");
        }
    }
}

#[test]
fn binary_keys_on_the_command_line_in_every_encoding() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let db = db.to_str().expect("utf-8");
    ok(&["put", db, "bin\\x00\\t\\\\key", "v\\nv"]);
    assert_eq!(ok(&["get", db, "bin\\x00\\t\\\\key"]), b"v\\nv\n");
    assert_eq!(ok(&["get", "--hex", db, "62696e00095c6b6579"]), b"760a76\n");
    assert_eq!(ok(&["get", "--base64", db, "YmluAAlca2V5"]), b"dgp2\n");
    assert_eq!(ok(&["get", "--raw", db, "bin\\x00\\t\\\\key"]), b"v\nv");
    // Keys that look like flags: after `--` as arguments, directly as option values.
    ok(&["put", db, "--", "-5", "-x"]);
    assert_eq!(ok(&["get", db, "--", "-5"]), b"-x\n");
    assert_eq!(ok(&["scan", db, "--from", "-5", "--to", "-6"]), b"-5\t-x\n");
    ok(&["put", "--hex", db, "ff00", "00ff"]);
    assert_eq!(ok(&["get", db, "\\xff\\x00"]), b"\\x00\\xff\n");
}

fn scan_fixture(tmp: &Path) -> PathBuf {
    let db = tmp.join("db");
    let keys = ["a", "ab", "abc", "abd", "ac", "b", "ba", "c"];
    let records: Vec<(Vec<u8>, Vec<u8>)> = keys
        .iter()
        .map(|k| (k.as_bytes().to_vec(), format!("v-{k}").into_bytes()))
        .collect();
    load(&db, &records);
    db
}

fn scan_keys(db: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        OsStr::new("scan"),
        db.as_os_str(),
        OsStr::new("--keys-only"),
    ];
    args.extend(extra.iter().map(OsStr::new));
    stdout(&run(&args)).lines().map(str::to_string).collect()
}

#[test]
fn scan_ranges_and_prefixes_in_both_directions_with_limits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = scan_fixture(tmp.path());
    let all = ["a", "ab", "abc", "abd", "ac", "b", "ba", "c"];
    assert_eq!(scan_keys(&db, &[]), all);
    assert_eq!(
        scan_keys(&db, &["--reverse"]),
        all.iter().rev().copied().collect::<Vec<_>>()
    );
    assert_eq!(
        scan_keys(&db, &["--from", "ab", "--to", "b"]),
        ["ab", "abc", "abd", "ac"]
    );
    assert_eq!(
        scan_keys(&db, &["--from", "ab", "--to", "b", "--reverse"]),
        ["ac", "abd", "abc", "ab"]
    );
    assert_eq!(scan_keys(&db, &["--prefix", "ab"]), ["ab", "abc", "abd"]);
    assert_eq!(
        scan_keys(&db, &["--prefix", "ab", "--reverse"]),
        ["abd", "abc", "ab"]
    );
    assert_eq!(
        scan_keys(&db, &["--prefix", "ab", "--limit", "2"]),
        ["ab", "abc"]
    );
    assert_eq!(
        scan_keys(&db, &["--prefix", "ab", "--reverse", "--limit", "2"]),
        ["abd", "abc"]
    );
    assert_eq!(
        scan_keys(&db, &["--prefix", "a", "--from", "abc", "--to", "ac"]),
        ["abc", "abd"]
    );
    assert_eq!(
        scan_keys(&db, &["--from", "b", "--limit", "1", "--reverse"]),
        ["c"]
    );
    assert!(scan_keys(&db, &["--prefix", "zz"]).is_empty());
    assert!(scan_keys(&db, &["--from", "c", "--to", "a"]).is_empty());
    assert!(scan_keys(&db, &["--limit", "0"]).is_empty());
    let with_values = ok(&[
        OsStr::new("scan"),
        db.as_os_str(),
        OsStr::new("--prefix"),
        OsStr::new("b"),
    ]);
    assert_eq!(with_values, b"b\tv-b\nba\tv-ba\n");
    let counted = ok(&[
        OsStr::new("count"),
        db.as_os_str(),
        OsStr::new("--prefix"),
        OsStr::new("ab"),
    ]);
    assert_eq!(counted, b"3\n");
}

#[test]
fn get_put_delete_exit_codes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let db = db.to_str().expect("utf-8");
    let missing_db = tmp.path().join("nothing-here");
    let missing_db = missing_db.to_str().expect("utf-8");

    let out = run(&["get", missing_db, "k"]);
    assert_eq!(code(&out), EXIT_OTHER);
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));

    assert_eq!(code(&run(&["put", db, "k", "v"])), 0);
    assert_eq!(ok(&["get", db, "k"]), b"v\n");
    let out = run(&["get", db, "other\\x01"]);
    assert_eq!(code(&out), EXIT_NOT_FOUND);
    assert!(
        stderr(&out).contains("\"other\\x01\" not found"),
        "{}",
        stderr(&out)
    );
    assert_eq!(code(&run(&["delete", db, "k"])), 0);
    assert_eq!(code(&run(&["get", db, "k"])), EXIT_NOT_FOUND);
    assert_eq!(code(&run(&["delete", db, "never-there"])), 0);

    let out = run(&["get", db, "bad\\q"]);
    assert_eq!(code(&out), EXIT_USAGE);
    assert!(stderr(&out).contains("unknown escape"), "{}", stderr(&out));
    assert_eq!(code(&run(&["get", "--hex", db, "xyz"])), EXIT_USAGE);
    assert_eq!(code(&run(&["get", db])), EXIT_USAGE);
    assert_eq!(code(&run(&["frobnicate", db])), EXIT_USAGE);
    assert_eq!(
        code(&run(&["get", "--hex", "--base64", db, "00"])),
        EXIT_USAGE
    );

    let out = run_with_input(&["load", db], Some(b"good\tline\nno tab\n"));
    assert_eq!(code(&out), EXIT_USAGE);
    assert!(stderr(&out).contains("input line 2"), "{}", stderr(&out));
    assert_eq!(
        ok(&["get", db, "good"]),
        b"line\n",
        "records before a bad line are kept"
    );
}

#[test]
fn a_database_held_by_another_process_refuses_writes_but_serves_reads() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("db");
    let db = shale::Db::open(&path, shale::Options::default()).expect("open");
    db.put(b"k", b"v").expect("put");
    let p = path.to_str().expect("utf-8");
    let out = run(&["put", p, "k2", "v2"]);
    assert_eq!(code(&out), EXIT_OTHER);
    assert!(
        stderr(&out).contains("in use by another process"),
        "{}",
        stderr(&out)
    );
    // Read-only commands take no lock.
    assert_eq!(ok(&["get", p, "k"]), b"v\n");
    assert_eq!(ok(&["count", p]), b"1\n");
    drop(db);
    ok(&["put", p, "k2", "v2"]);
}

/// A database with one table (the first load, flushed when the second load opens it) and a
/// live WAL (the second load).
fn checked_fixture(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let first: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
        .map(|i| {
            (
                format!("a{i:05}").into_bytes(),
                format!("value {i}").into_bytes(),
            )
        })
        .collect();
    let second: Vec<(Vec<u8>, Vec<u8>)> = (0..100)
        .map(|i| {
            (
                format!("b{i:05}").into_bytes(),
                format!("later {i}").into_bytes(),
            )
        })
        .collect();
    load(dir, &first);
    load(dir, &second);
    first.into_iter().chain(second).collect()
}

#[test]
fn check_names_a_flipped_byte_in_a_table_a_wal_and_the_manifest() {
    let tmp = tempfile::tempdir().expect("tempdir");
    for kind in ["table", "wal", "manifest"] {
        let db = tmp.path().join(kind);
        checked_fixture(&db);
        let out = run(&[OsStr::new("check"), db.as_os_str()]);
        assert_eq!(code(&out), 0, "{kind}: {}{}", stdout(&out), stderr(&out));
        assert!(stdout(&out).contains("check passed"), "{}", stdout(&out));

        let victim = match kind {
            "table" => file_with_suffix(&db, ".sst").remove(0),
            "wal" => file_with_suffix(&db, ".log").pop().expect("a WAL"),
            _ => {
                let current = std::fs::read_to_string(db.join("CURRENT")).expect("CURRENT");
                db.join(current.trim())
            }
        };
        let len = std::fs::metadata(&victim).expect("metadata").len() as usize;
        // Past the log header record (28 bytes) in logs; inside the first data block in tables.
        let offset = if kind == "table" {
            10
        } else {
            28 + (len - 28) / 2
        };
        flip_byte(&victim, offset);

        let out = run(&[OsStr::new("check"), db.as_os_str()]);
        let name = victim.file_name().and_then(|n| n.to_str()).expect("name");
        assert_eq!(code(&out), EXIT_CORRUPTION, "{kind}: {}", stdout(&out));
        assert!(
            stderr(&out).contains(name) && stderr(&out).contains("offset"),
            "{kind}: the message must name {name} and an offset: {}",
            stderr(&out)
        );
    }
}

#[test]
fn check_follows_blob_references_and_names_a_damaged_blob_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("blobs");
    // Values over the default 16 KiB separation threshold live in blob files: half flushed to a
    // table (the second load opens, and so flushes, the first), half in the live WAL.
    let big = |tag: &str, i: usize| {
        (
            format!("{tag}{i:03}").into_bytes(),
            vec![b'x' + (i % 3) as u8; 20_000],
        )
    };
    load(&db, &(0..5).map(|i| big("a", i)).collect::<Vec<_>>());
    load(&db, &(0..5).map(|i| big("b", i)).collect::<Vec<_>>());
    let out = run(&[OsStr::new("check"), db.as_os_str()]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).contains("references"), "{}", stdout(&out));
    assert!(stdout(&out).contains(".blob"), "{}", stdout(&out));

    // Damage a value the table references: the blob file of the first load's WAL.
    let mut blob_files = file_with_suffix(&db, ".blob");
    blob_files.sort();
    let victim = blob_files.remove(0);
    flip_byte(&victim, 20 + 17 + 4 + 100);
    let out = run(&[OsStr::new("check"), db.as_os_str()]);
    let name = victim.file_name().and_then(|n| n.to_str()).expect("name");
    assert_eq!(code(&out), EXIT_CORRUPTION, "{}", stdout(&out));
    assert!(
        stderr(&out).contains(name) && stderr(&out).contains("offset"),
        "the message must name {name} and an offset: {}",
        stderr(&out)
    );
}

#[test]
fn inspect_commands_decode_files_and_report_damage() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    checked_fixture(&db);
    let table = file_with_suffix(&db, ".sst").remove(0);
    let wal = file_with_suffix(&db, ".log").pop().expect("a WAL");

    let out = stdout(&run(&[
        OsStr::new("sst-dump"),
        table.as_os_str(),
        OsStr::new("--verify"),
        OsStr::new("--entries"),
    ]));
    assert!(out.contains("entries            300"), "{out}");
    assert!(out.contains("bloom filter: cache-local"), "{out}");
    assert!(out.contains("\tvalue\ta00042\tvalue 42"), "{out}");
    assert!(out.contains("verified: 300 entries"), "{out}");

    let out = stdout(&run(&[OsStr::new("wal-dump"), wal.as_os_str()]));
    assert!(out.contains("100 entries"), "{out}");
    assert!(out.contains("\tvalue\tb00099\tlater 99"), "{out}");
    assert!(out.contains("no torn tail"), "{out}");

    let out = stdout(&run(&[OsStr::new("manifest-dump"), db.as_os_str()]));
    assert!(out.contains("comparator shale.BytewiseComparator"), "{out}");
    assert!(out.contains("level 0: 1 files"), "{out}");
    assert!(out.contains("keys a00000 @"), "{out}");

    // A WAL cut short shows where its torn tail begins.
    let len = std::fs::metadata(&wal).expect("metadata").len();
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .expect("open wal");
    file.set_len(len - 5).expect("truncate");
    let out = run(&[OsStr::new("wal-dump"), wal.as_os_str()]);
    assert_eq!(code(&out), 0);
    assert!(
        stdout(&out).contains("torn tail at offset"),
        "{}",
        stdout(&out)
    );

    flip_byte(&table, 10);
    let out = run(&[
        OsStr::new("sst-dump"),
        table.as_os_str(),
        OsStr::new("--verify"),
    ]);
    assert_eq!(code(&out), EXIT_CORRUPTION);
    assert!(stderr(&out).contains("offset"), "{}", stderr(&out));

    // A file named like a log that is not one is refused, not dumped as an empty torn log.
    let foreign = tmp.path().join("20240601.log");
    std::fs::write(&foreign, b"GET / HTTP/1.1 200 a web server's log line\n").expect("write");
    let out = run(&[OsStr::new("wal-dump"), foreign.as_os_str()]);
    assert_eq!(code(&out), EXIT_CORRUPTION, "{}", stdout(&out));
    assert!(stderr(&out).contains("not a shale log"), "{}", stderr(&out));
    let fake_manifest = tmp.path().join("MANIFEST-000009");
    std::fs::write(&fake_manifest, b"not a manifest at all, just text").expect("write");
    let out = run(&[OsStr::new("manifest-dump"), fake_manifest.as_os_str()]);
    assert_eq!(code(&out), EXIT_CORRUPTION, "{}", stdout(&out));
    let out = run(&[
        OsStr::new("wal-dump"),
        tmp.path().join("000077.log").as_os_str(),
    ]);
    assert_eq!(code(&out), EXIT_OTHER, "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    let missing = tmp.path().join("MANIFEST-000010");
    let out = run(&[OsStr::new("manifest-dump"), missing.as_os_str()]);
    assert_eq!(code(&out), EXIT_OTHER, "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
}

/// A reader that goes away early: `scan` stops quietly (as `head` expects), but a `dump` cut
/// short is no backup, so it does not report success. (`check` is mapped the same way, but its
/// output is too short to fill a pipe, so whether it meets the closed pipe depends on timing.)
#[test]
fn a_closed_output_fails_dump_but_not_scan() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000)
        .map(|i| (format!("key{i:06}").into_bytes(), vec![b'v'; 64]))
        .collect();
    load(&db, &records);
    let closed_early = |args: &[&OsStr]| -> i32 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shale"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn shale");
        // Read one chunk, then close the pipe: the tool's next writes fail with EPIPE.
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 16];
        std::io::Read::read(&mut stdout, &mut first).expect("first bytes");
        drop(stdout);
        child.wait().expect("wait").code().expect("exit code")
    };
    let dir = db.as_os_str();
    assert_eq!(closed_early(&[OsStr::new("scan"), dir]), 0);
    assert_eq!(closed_early(&[OsStr::new("dump"), dir]), 4);
}

#[test]
fn repair_restores_every_undamaged_key_after_a_table_is_truncated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let group = |prefix: &str| -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..200)
            .map(|i| {
                (
                    format!("{prefix}{i:05}").into_bytes(),
                    vec![b'v'; 20 + i % 7],
                )
            })
            .collect()
    };
    let (a, b, c) = (group("a"), group("b"), group("c"));
    // Each load opens the database, which flushes what the previous one left in the WAL: a and
    // b end up in one table each, c in the WAL.
    load(&db, &a);
    load(&db, &b);
    load(&db, &c);
    let tables = file_with_suffix(&db, ".sst");
    assert_eq!(tables.len(), 2, "{tables:?}");
    let damaged = &tables[1];
    let len = std::fs::metadata(damaged).expect("metadata").len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(damaged)
        .expect("open")
        .set_len(len / 2)
        .expect("truncate");

    let out = run(&[OsStr::new("check"), db.as_os_str()]);
    assert_eq!(code(&out), EXIT_CORRUPTION, "{}", stdout(&out));
    let out = run(&[OsStr::new("repair"), db.as_os_str()]);
    assert_eq!(
        code(&out),
        EXIT_CORRUPTION,
        "data was lost: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("losses could not be salvaged"),
        "{}",
        stderr(&out)
    );
    let name = damaged.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(
        stdout(&out).contains(name),
        "the report names the lost table: {}",
        stdout(&out)
    );
    assert!(
        db.join("lost").join(name).exists(),
        "the damaged table is kept in lost/"
    );

    let after = contents(&db);
    let expected: Vec<_> = a.iter().chain(c.iter()).cloned().collect();
    for record in &expected {
        assert!(
            after.contains(record),
            "lost {:?}",
            String::from_utf8_lossy(&record.0)
        );
    }
    let out = run(&[OsStr::new("check"), db.as_os_str()]);
    assert_eq!(
        code(&out),
        0,
        "a repaired database checks clean: {}",
        stderr(&out)
    );
}

/// Repair and writes refuse directories they would damage: one that is not a database (its
/// files untouched), a database that lost `CURRENT` (a write used to create a new database over
/// it and delete its tables), and a database ordered by a comparator the tool cannot load.
#[test]
fn repair_and_writes_refuse_what_they_would_damage() {
    let tmp = tempfile::tempdir().expect("tempdir");

    let other = tmp.path().join("logs");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("20240601.log"), b"GET / 200\n").expect("write");
    let out = run(&[OsStr::new("repair"), other.as_os_str()]);
    assert_eq!(code(&out), EXIT_OTHER, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no shale database files"),
        "{}",
        stderr(&out)
    );
    let mut names: Vec<_> = std::fs::read_dir(&other)
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["20240601.log"],
        "a refused repair leaves the directory alone"
    );
    assert_eq!(
        std::fs::read(other.join("20240601.log")).expect("read"),
        b"GET / 200\n"
    );

    let db = tmp.path().join("db");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..300)
        .map(|i| (format!("k{i:04}").into_bytes(), vec![b'v'; 40]))
        .collect();
    load(&db, &records);
    load(&db, &[(b"z".to_vec(), b"last".to_vec())]);
    assert!(!file_with_suffix(&db, ".sst").is_empty());
    std::fs::remove_file(db.join("CURRENT")).expect("remove CURRENT");
    let out = run(&[
        OsStr::new("put"),
        db.as_os_str(),
        OsStr::new("x"),
        OsStr::new("y"),
    ]);
    assert_eq!(code(&out), EXIT_CORRUPTION, "{}", stderr(&out));
    assert!(stderr(&out).contains("repair"), "{}", stderr(&out));
    let out = run(&[OsStr::new("repair"), db.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let after = contents(&db);
    assert_eq!(after.len(), records.len() + 1);
    assert!(records.iter().all(|r| after.contains(r)));

    struct Reversed;
    impl shale::Comparator for Reversed {
        fn name(&self) -> &str {
            "test.Reversed"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
            b.cmp(a)
        }
    }
    let custom = tmp.path().join("custom");
    {
        let options = shale::Options {
            comparator: std::sync::Arc::new(Reversed),
            ..shale::Options::default()
        };
        let handle = shale::Db::open(&custom, options).expect("open");
        handle.put(b"a", b"1").expect("put");
        handle.flush().expect("flush");
    }
    let out = run(&[OsStr::new("check"), custom.as_os_str()]);
    assert_eq!(code(&out), EXIT_OTHER, "{}", stdout(&out));
    assert!(stderr(&out).contains("test.Reversed"), "{}", stderr(&out));
    let tables = file_with_suffix(&custom, ".sst");
    let out = run(&[OsStr::new("repair"), custom.as_os_str()]);
    assert_ne!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stderr(&out).contains("nothing was changed"),
        "{}",
        stderr(&out)
    );
    assert_eq!(file_with_suffix(&custom, ".sst"), tables);
    assert!(!custom.join("lost").exists());
}

#[test]
fn checkpoint_produces_a_database_that_opens_and_equals_the_source() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    let records = checked_fixture(&db);
    let copy = tmp.path().join("copy");
    ok(&[OsStr::new("checkpoint"), db.as_os_str(), copy.as_os_str()]);
    assert_eq!(contents(&copy), records);
    assert_eq!(contents(&db), records);
    let out = run(&[OsStr::new("check"), copy.as_os_str()]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The copy is a database of its own.
    ok(&[
        OsStr::new("put"),
        copy.as_os_str(),
        OsStr::new("new"),
        OsStr::new("1"),
    ]);
    assert_eq!(contents(&copy).len(), records.len() + 1);
    assert_eq!(contents(&db).len(), records.len());
    // A destination in use is refused.
    let out = run(&[OsStr::new("checkpoint"), db.as_os_str(), copy.as_os_str()]);
    assert_eq!(code(&out), EXIT_OTHER);
    assert!(stderr(&out).contains("not empty"), "{}", stderr(&out));
}

#[test]
fn destroy_asks_and_refuses_without_confirmation() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    load(&db, &[(b"k".to_vec(), b"v".to_vec())]);
    let args = [OsStr::new("destroy"), db.as_os_str()];

    let out = run(&args);
    assert_eq!(code(&out), EXIT_OTHER, "closed stdin must refuse");
    assert!(stderr(&out).contains("not confirmed"), "{}", stderr(&out));
    assert!(db.join("CURRENT").exists());

    let out = run_with_input(&args, Some(b"no\n"));
    assert_eq!(code(&out), EXIT_OTHER);
    assert!(db.join("CURRENT").exists());

    ok_with_input(&args, Some(b"yes\n"));
    assert!(!db.exists());

    load(&db, &[(b"k".to_vec(), b"v".to_vec())]);
    ok(&[OsStr::new("destroy"), OsStr::new("--yes"), db.as_os_str()]);
    assert!(!db.exists());

    // A directory that is not a database is never touched.
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).expect("mkdir");
    std::fs::write(other.join("precious.txt"), b"data").expect("write");
    let out = run(&[
        OsStr::new("destroy"),
        OsStr::new("--yes"),
        other.as_os_str(),
    ]);
    assert_eq!(code(&out), EXIT_OTHER);
    assert!(other.join("precious.txt").exists());
}

#[test]
fn stats_and_compact_report_levels() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let db = tmp.path().join("db");
    checked_fixture(&db);
    let out = stdout(&run(&[OsStr::new("stats"), db.as_os_str()]));
    assert!(out.contains("Level  Files"), "{out}");
    assert!(out.contains("level 0: 1 files"), "{out}");
    assert!(out.contains("last_sequence: 400"), "{out}");
    // Every field of Db::stats() is printed, as the README promises (the field names come
    // from the struct's Debug output, so a new field fails this test until it is printed).
    let debug = format!("{:?}", shale::DbStats::default());
    let fields: Vec<&str> = debug
        .split(['{', ',', '}'])
        .filter_map(|part| part.split(':').next())
        .map(str::trim)
        .filter(|name| !name.is_empty() && *name != "DbStats" && *name != "levels")
        .collect();
    assert!(fields.len() > 25, "{fields:?}");
    for name in fields {
        assert!(
            out.contains(&format!("\n{name}: ")),
            "stats lacks {name}: {out}"
        );
    }
    let out = stdout(&run(&[OsStr::new("compact"), db.as_os_str()]));
    assert!(out.contains("before: L0: 2 files"), "{out}");
    assert!(!out.contains("after:  L0"), "{out}");
    assert_eq!(contents(&db).len(), 400);
}

#[test]
fn every_command_has_help_with_an_example() {
    let commands = [
        "get",
        "put",
        "delete",
        "scan",
        "count",
        "load",
        "dump",
        "sst-dump",
        "wal-dump",
        "manifest-dump",
        "stats",
        "check",
        "compact",
        "repair",
        "checkpoint",
        "destroy",
    ];
    let top = stdout(&run(&["--help"]));
    for command in commands {
        assert!(top.contains(command), "top-level help lists {command}");
        let out = run(&[command, "--help"]);
        assert_eq!(code(&out), 0);
        assert!(
            stdout(&out).contains("Example"),
            "{command} --help has an example"
        );
    }
    assert!(top.contains("Exit codes"), "{top}");
}
