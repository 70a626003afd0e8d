//! Tool descriptions for typed exports, from the doc comments of the WIT the component was
//! built from. A component as `cargo build --target wasm32-wasip2` links it keeps no doc
//! comments, so `chitin manifest embed --wit DIR` reads them from the WIT sources and records
//! them in the signed manifest.

use std::collections::HashMap;
use std::path::Path;

use wit_parser::{Resolve, WorldItem};

/// Doc comments by function, keyed as [`super::TypedFunc::export`] names it.
#[derive(Debug, Clone, Default)]
pub struct Docs(HashMap<String, String>);

impl Docs {
    /// The doc comments of every function in the WIT package at `path` (a directory or a
    /// `.wit` file) and the packages it uses.
    pub fn from_wit(path: &Path) -> anyhow::Result<Self> {
        let mut resolve = Resolve::default();
        resolve.push_path(path)?;
        let mut docs = HashMap::new();
        for (_, world) in &resolve.worlds {
            for item in world.exports.values() {
                if let WorldItem::Function(f) = item
                    && let Some(text) = &f.docs.contents
                {
                    docs.entry(f.name.clone())
                        .or_insert_with(|| text.trim().to_owned());
                }
            }
        }
        for (id, interface) in &resolve.interfaces {
            let Some(name) = resolve.id_of(id) else {
                continue;
            };
            for (function, f) in &interface.functions {
                if let Some(text) = &f.docs.contents {
                    docs.insert(format!("{name}#{function}"), text.trim().to_owned());
                }
            }
        }
        Ok(Self(docs))
    }

    /// The doc comment of `export`, if it has one.
    pub fn get(&self, export: &str) -> Option<&str> {
        self.0.get(export).map(String::as_str)
    }
}
