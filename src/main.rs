//! The `opledger` binary: a thin command-line adapter over the `opledger` library.

mod cli;

/// mimalloc instead of glibc's allocator: a claim allocates many small short-lived buffers
/// across threads, and the claims benchmark spent about 15% of its time in glibc malloc/free
/// (8 partitions in-process: 41k -> 59k claims/s measured on the 2-core machine).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    cli::main()
}
