//! Static composition: plug library components into a tool component's imports with
//! `wac-graph`, so the result exports what the root exports and imports only what the root and
//! the libraries import beyond each other. Used by the host at load for capability-free
//! libraries and by `chitin compose` for authors.

use wac_graph::types::Package;
use wac_graph::{CompositionGraph, EncodeOptions};

/// A composition could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ComposeError {
    /// A part is not a component wac can read.
    #[error("cannot read `{name}` for composition: {reason}")]
    Part {
        /// The part's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// No import of the root matched the library's exports (or a type did not match).
    #[error("cannot plug `{library}` into `{root}`: {reason}")]
    Plug {
        /// The root component.
        root: String,
        /// The library.
        library: String,
        /// Why.
        reason: String,
    },
    /// The composed component could not be encoded or did not validate.
    #[error("cannot encode the composition of `{root}`: {reason}")]
    Encode {
        /// The root component.
        root: String,
        /// Why.
        reason: String,
    },
}

/// `root` with each of `libraries` (name, bytes) plugged into the imports it exports. The
/// libraries are applied one at a time, so a library may itself use another's exports only
/// if it comes later in the list than the library it needs.
pub fn plug(
    root_name: &str,
    root: &[u8],
    libraries: &[(&str, &[u8])],
) -> Result<Vec<u8>, ComposeError> {
    let mut bytes = root.to_vec();
    for (library, lib_bytes) in libraries {
        let mut graph = CompositionGraph::new();
        let socket = register(&mut graph, root_name, &bytes)?;
        let plug = register(&mut graph, library, lib_bytes)?;
        wac_graph::plug(&mut graph, vec![plug], socket).map_err(|e| ComposeError::Plug {
            root: root_name.to_owned(),
            library: (*library).to_owned(),
            reason: chain(&e),
        })?;
        bytes = graph
            .encode(EncodeOptions::default())
            .map_err(|e| ComposeError::Encode {
                root: root_name.to_owned(),
                reason: chain(&e),
            })?;
    }
    Ok(bytes)
}

fn register(
    graph: &mut CompositionGraph,
    name: &str,
    bytes: &[u8],
) -> Result<wac_graph::PackageId, ComposeError> {
    let part = |reason: String| ComposeError::Part {
        name: name.to_owned(),
        reason,
    };
    // wac names packages `namespace:name`; the part's own name is only a label here.
    let label = format!("part:{}", name.replace(['/', ':', '@'], "-"));
    let package = Package::from_bytes(&label, None, bytes.to_vec(), graph.types_mut())
        .map_err(|e| part(format!("{e:#}")))?;
    graph.register_package(package).map_err(|e| part(chain(&e)))
}

/// An error with its sources, on one line.
pub(crate) fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
