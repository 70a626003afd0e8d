//! Outbound HTTP (`wasi:http/outgoing-handler`): what the host checks and adds on the way out.

pub mod credentials;
