//! The chitin package layer: what a component artifact is and how to read it, who signed it
//! and whether the trust store vouches for them; the registries components are published to
//! and installed from, and the lockfile of what is installed.

#![deny(missing_docs)]

pub mod artifact;
pub mod audit;
pub mod capability;
pub mod compose;
pub mod imports;
pub mod keys;
pub mod lockfile;
pub mod manifest;
pub mod path_prefix;
pub mod private_file;
pub mod signature;
pub mod store;
pub mod trust_store;
pub mod widening;
