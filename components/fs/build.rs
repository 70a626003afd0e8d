//! Links the component with 4 MiB of linear memory from the start. A `read_file` of 1 MiB uses
//! some 3.3 MiB (the read buffer and the JSON result beside the 1 MiB stack and the data); grown
//! from the linker's default it took a `memory.grow` per 64 KiB, each an `mprotect` in the host,
//! and one more to take the memory back when the next call reused the slot. Pages never touched
//! cost nothing, and the pool keeps 4 MiB of a slot resident between calls.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() == Ok("wasm32") {
        println!("cargo:rustc-link-arg-cdylib=--initial-memory=4194304");
    }
}
