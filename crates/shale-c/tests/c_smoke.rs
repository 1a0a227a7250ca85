//! Compiles `tests/c/smoke.c` with the system C compiler against `include/shale.h` and the
//! shared library cargo built for this test (`libshale_c.so`, beside the test binary's `deps/`
//! directory), runs it on a temporary directory and compares what it prints.
//!
//! Also checks that the header declares exactly the functions the crate exports, so the two
//! cannot drift apart.

use std::path::{Path, PathBuf};
use std::process::Command;

const EXPECTED_OUTPUT: &str = r#"open without create_if_missing: does not exist
open with an unknown merge operator: unknown merge operator
open with a NULL path: path is NULL
second open of the same directory: locked
get apple: "red" (3 bytes)
get pear: missing
get empty: "" (0 bytes)
get nul\x00key: "x\x00y" (3 bytes)
counter visits: 3
batch count: 3
batch count after write: 3
batch count after clear: 0
get banana after batch: missing
counter visits: 5
get date at snapshot: missing
get date now: "brown" (5 bytes)
forward at snapshot: apple cherry empty nul\x00key visits
backward now: visits nul\x00key empty date cherry apple
seek c: cherry date empty nul\x00key visits
seek_for_prev d: cherry apple
bounded [b, e): cherry date
bounded [b, e) backward: date cherry
last sequence: 11
get cherry after compaction: "dark red" (8 bytes)
counter visits: 5
put on a NULL database: database handle is NULL
get with a NULL key: key is NULL
write of a NULL batch: write batch is NULL
seek with a NULL key: shale_iter_seek: key is NULL
write of a batch with a NULL key: write batch entry 1 (put): key is NULL
get k after the refused batch: missing
get of a counter with a bad operand: merge operator uint64add failed
read-only get apple: "red" (3 bytes)
read-only put: refused
open after destroy: does not exist
ok
"#;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory holding `libshale_c.so`: cargo puts the library's outputs in the profile
/// directory (`target/debug`) and in its `deps/`, where this test binary lives.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    let deps = exe.parent().expect("the test binary is in deps/");
    let candidates = [
        deps.to_path_buf(),
        deps.parent().unwrap_or(deps).to_path_buf(),
    ];
    candidates
        .iter()
        .find(|dir| dir.join("libshale_c.so").is_file())
        .cloned()
        .unwrap_or_else(|| panic!("libshale_c.so not found in {candidates:?}"))
}

fn compile(out_dir: &Path) -> PathBuf {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let lib_dir = library_dir();
    let binary = out_dir.join("smoke");
    let output = Command::new(&compiler)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg(crate_dir().join("include"))
        .arg(crate_dir().join("tests/c/smoke.c"))
        .arg("-o")
        .arg(&binary)
        .arg("-L")
        .arg(&lib_dir)
        .arg("-lshale_c")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .output()
        .unwrap_or_else(|e| panic!("running the C compiler {compiler:?}: {e}"));
    assert!(
        output.status.success(),
        "compiling smoke.c failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    binary
}

#[test]
fn c_program_uses_the_api_end_to_end() {
    let dir = tempfile::tempdir().expect("tempdir");
    let binary = compile(dir.path());
    let output = Command::new(&binary)
        .arg(dir.path())
        .output()
        .expect("run the smoke program");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "smoke program failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(stdout, EXPECTED_OUTPUT);
}

/// The names of the functions declared in the header: every identifier directly followed by
/// `(` that starts with `shale_`, on lines that are not comments.
fn header_functions() -> Vec<String> {
    let header =
        std::fs::read_to_string(crate_dir().join("include/shale.h")).expect("read shale.h");
    let mut names: Vec<String> = header
        .lines()
        .filter(|line| {
            let trimmed = line.trim_start();
            !(trimmed.starts_with("/*") || trimmed.starts_with('*'))
        })
        .flat_map(|line| {
            line.match_indices("shale_")
                .filter_map(move |(start, _)| {
                    let rest = &line[start..];
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                        .unwrap_or(rest.len());
                    rest[end..]
                        .starts_with('(')
                        .then(|| rest[..end].to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The names of the functions the crate exports: `extern "C" fn NAME` in its sources.
fn exported_functions() -> Vec<String> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(crate_dir().join("src")).expect("read src/") {
        let path = entry.expect("directory entry").path();
        let source = std::fs::read_to_string(&path).expect("read a source file");
        for (start, marker) in source.match_indices("extern \"C\" fn ") {
            let rest = &source[start + marker.len()..];
            let end = rest.find('(').expect("a function name is followed by (");
            names.push(rest[..end].to_string());
        }
    }
    names.sort();
    names
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let header = header_functions();
    let exported = exported_functions();
    assert!(exported.len() > 40, "found only {exported:?}");
    assert_eq!(header, exported);
}

/// The helpers through which exported functions run their bodies; each must itself run its
/// body behind `guard`/`guard_quiet` or another of them (checked below).
const GUARDED_HELPERS: [&str; 9] = [
    "with_handle(",
    "reposition(",
    "seek_with(",
    "current(",
    "with_batch(",
    "with_options(",
    "with_read_handle(",
    "with_read_options(",
    "with_write_options(",
];

/// The guards themselves (`boundary.rs`), which catch the panic.
const GUARDS: [&str; 2] = ["guard(", "guard_quiet("];

/// True if `body`, with its `//` comments removed, calls `call` (a name and its opening
/// parenthesis) as a free function: not as part of a longer name, nor as a method.
fn calls(body: &str, call: &str) -> bool {
    body.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .any(|code| {
            code.match_indices(call).any(|(at, _)| {
                !code[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            })
        })
}

/// Each function in `source` as (name, body): from `fn NAME` up to the first line that is just
/// `}` (rustfmt puts a top-level function's closing brace alone at column 0).
fn functions(source: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (start, _) in source.match_indices("fn ") {
        let rest = &source[start + 3..];
        let Some(end) = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) else {
            continue;
        };
        let name = rest[..end].to_string();
        let body_end = rest.find("\n}\n").unwrap_or(rest.len());
        out.push((name, rest[end..body_end].to_string()));
    }
    out
}

/// The header promises that no call lets a panic escape: a panic unwinding out of an
/// `extern "C"` function aborts the host. Every exported function must run its work inside the
/// panic guard, directly or through a helper that does.
#[test]
fn every_exported_function_runs_behind_the_panic_guard() {
    let mut unguarded = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(crate_dir().join("src")).expect("read src/") {
        let path = entry.expect("directory entry").path();
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("read a source file");
        for (name, body) in functions(&source) {
            let exported = source.contains(&format!("extern \"C\" fn {name}("));
            let helper = GUARDED_HELPERS.contains(&format!("{name}(").as_str());
            if !(exported || helper) {
                continue;
            }
            checked += 1;
            // A helper may delegate to another helper, never only to itself.
            let own = format!("{name}(");
            let guarded = GUARDS
                .iter()
                .chain(GUARDED_HELPERS.iter())
                .any(|h| *h != own && calls(&body, h));
            if !guarded {
                unguarded.push(format!("{}: {name}", path.display()));
            }
        }
    }
    assert!(checked > 40, "found only {checked} functions");
    assert!(unguarded.is_empty(), "no panic guard in {unguarded:?}");
}
