//! What `wasi:io/error.to-debug-string` tells a component: the error's messages, cause by cause,
//! never wasmtime-wasi's `Debug` text, which carries the host's stack backtrace (and with it the
//! paths of its build) whenever `RUST_BACKTRACE` is set where chitin runs. A component hands
//! such text on to the agent as its error.

use wasmtime::component::{Linker, Resource, ResourceTable};
use wasmtime_wasi::WasiView;

/// The interface the function is in.
const IO_ERROR: &str = "wasi:io/error@0.2.12";

/// The function replaced.
pub(super) const TO_DEBUG_STRING: &str = "[method]error.to-debug-string";

/// Replace wasmtime-wasi's `to-debug-string` (linked before this).
pub fn add_to_linker<T: WasiView + 'static>(l: &mut Linker<T>) -> wasmtime::Result<()> {
    l.allow_shadowing(true);
    let replaced = l.instance(IO_ERROR).and_then(|mut instance| {
        instance.func_wrap(
            TO_DEBUG_STRING,
            |mut store, (error,): (Resource<wasmtime::Error>,)| {
                let table: &mut ResourceTable = store.data_mut().ctx().table;
                Ok((text(table.get(&error)?),))
            },
        )
    });
    l.allow_shadowing(false);
    replaced
}

/// The error's message and its causes', joined (`anyhow`'s alternate display: no backtrace).
fn text(error: &wasmtime::Error) -> String {
    format!("{error:#}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::caps::wasi::tests::Wasi;

    #[test]
    fn the_text_is_the_messages_without_a_backtrace() {
        let error = std::io::Error::other("connection reset");
        let error = wasmtime::Error::new(error).context("reading the response body");
        let shown = text(&error);
        assert_eq!(shown, "reading the response body: connection reset");
    }

    #[test]
    fn the_replaced_function_is_the_one_wasmtime_wasi_links() {
        let engine = wasmtime::Engine::default();
        let mut linker = Linker::<Wasi>::new(&engine);
        wasmtime_wasi::p2::bindings::io::error::add_to_linker::<Wasi, crate::caps::wasi::Io>(
            &mut linker,
            |t| t.ctx().table,
        )
        .expect("wasmtime-wasi links");
        // Defining the name again without shadowing is refused: wasmtime-wasi defines it there.
        let mut instance = linker.instance(IO_ERROR).expect("instance");
        assert!(
            instance
                .func_wrap(TO_DEBUG_STRING, |_, (): ()| Ok(()))
                .is_err()
        );
        add_to_linker(&mut linker).expect("replaced");
    }
}
