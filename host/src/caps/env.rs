//! Environment: `wasi:cli/environment` shows a component only the keys its manifest names, with
//! the host's values read once at load. Nothing else of the host's environment is visible.

use chitin_registry::manifest::EnvGrant;
use wasmtime::component::Linker;
use wasmtime_wasi::WasiCtxBuilder;

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};

/// The env capability: `wasi:cli/environment` is linked for every component by the WASI base
/// (`caps::wasi`), empty unless this grant names keys.
pub struct Env;

impl Capability for Env {
    type Section = EnvGrant;
    type Config = EnvConfig;
    type Ctx = ();
    const LINKS: &'static [&'static str] = &[];

    fn configure(
        section: Option<&EnvGrant>,
        _load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<EnvConfig, CapabilityError> {
        Ok(configure(section))
    }

    fn ctx(_config: &EnvConfig, _call: &Call<'_>) {}

    fn wasi(config: &EnvConfig, builder: &mut WasiCtxBuilder) -> std::io::Result<()> {
        builder.envs(&config.vars);
        Ok(())
    }

    fn add_to_linker<T: Holds<Self>>(_linker: &mut Linker<T>) -> wasmtime::Result<()> {
        Ok(())
    }
}

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
