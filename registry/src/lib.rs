//! The chitin package layer: what a component artifact is and how to read it. Manifests,
//! signatures, trust and registries build on this.

#![deny(missing_docs)]

pub mod artifact;
pub mod manifest;
