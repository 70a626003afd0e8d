//! The `chitin` binary.

fn main() -> std::process::ExitCode {
    chitin_host::cli::main()
}
