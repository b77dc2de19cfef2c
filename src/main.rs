//! The `opledger` binary: a thin command-line adapter over the `opledger` library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
