//! The `shale-bench` command: see the library's documentation and `docs/benchmarks.md`.

fn main() {
    std::process::exit(shale_bench::main_with_args(std::env::args_os()));
}
