//! Host-side bindings of the `chitin:tool` contract, generated from `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "chitin:tool/tool-component",
    exports: { default: async },
});
