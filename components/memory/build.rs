//! Links the component with 4 MiB of linear memory from the start. A search over 10,000
//! documents uses some 2.1 MiB; grown from the linker's default (the 1 MiB stack and the data),
//! it took 16 `memory.grow`s a call, each an `mprotect` in the host, and one more to take the
//! memory back when the next call reused the slot. Pages never touched cost nothing.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory=4194304");
    }
}
