//! The chitin package layer: what a component artifact is and how to read it, who signed it
//! and whether the trust store vouches for them. Registries build on this.

#![deny(missing_docs)]

pub mod artifact;
pub mod compose;
pub mod imports;
pub mod keys;
pub mod manifest;
pub mod signature;
pub mod trust;
pub mod widening;
