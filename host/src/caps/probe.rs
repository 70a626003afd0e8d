//! `chitin:probe/probe`: test only (the `test-capability` feature, never in a release). Proves
//! that a capability is its WIT, this module and one line in the table: it hands a component
//! the level its `[capabilities.probe]` grant holds.

use chitin_registry::manifest::probe::ProbeGrant;
use wasmtime::component::{HasData, Linker};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};

/// Host bindings of `chitin:probe/probe`.
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/test/probe.wit",
        world: "probe-host",
    });
}

/// The per-call state: the granted level.
pub struct ProbeCtx {
    level: u32,
}

impl bindings::chitin::probe::probe::Host for &mut ProbeCtx {
    fn level(&mut self) -> u32 {
        self.level
    }
}

/// The probe capability (and its `HasData` marker).
pub struct Probe;

impl HasData for Probe {
    type Data<'a> = &'a mut ProbeCtx;
}

impl Capability for Probe {
    type Section = ProbeGrant;
    /// The granted level; 0 when not granted.
    type Config = u32;
    type Ctx = ProbeCtx;
    const LINKS: &'static [&'static str] = &["chitin:probe/probe@"];

    fn configure(
        section: Option<&ProbeGrant>,
        _load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<u32, CapabilityError> {
        Ok(section.map_or(0, |s| s.level))
    }

    fn ctx(config: &u32, _call: &Call<'_>) -> ProbeCtx {
        ProbeCtx { level: *config }
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn get<T: Holds<Probe>>(state: &mut T) -> &mut ProbeCtx {
            state.parts().0
        }
        bindings::chitin::probe::probe::add_to_linker::<T, Probe>(linker, get)
    }
}
