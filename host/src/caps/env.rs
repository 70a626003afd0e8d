//! Environment: `wasi:cli/environment` shows a component only the keys its manifest names, with
//! the host's values read once at load. Nothing else of the host's environment is visible.

use chitin_registry::manifest::EnvGrant;

/// The variables a component sees, in the order its manifest names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvConfig {
    /// Name and value of each granted variable that is set on the host.
    pub vars: Vec<(String, String)>,
}

/// Read the granted keys from the host environment; unset keys are left out.
pub fn configure(grant: Option<&EnvGrant>) -> EnvConfig {
    let vars = grant
        .map(|g| {
            g.keys
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
                .collect()
        })
        .unwrap_or_default();
    EnvConfig { vars }
}
