//! The shape every granted capability has (after Spin's factors and wasmtime-wasi's ctx/view
//! split): its manifest section, its grant resolved once at load, its per-call context built from
//! that grant by cloning, its linker wiring and the imports it links. The table in `caps/mod.rs`
//! lists the capabilities; `Grant`, `HostState`, linking and `is_linked` iterate it.
//!
//! A capability depends on this core (the load and call environments, errors, the services it
//! owns), never on the host, the runtime or another capability.

use std::fmt;

use chitin_registry::capability::Section;
use chitin_registry::manifest::Capabilities;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::WasiCtxBuilder;

use crate::call::Call;
use crate::policy::Policy;
use crate::services::Services;

/// One capability: the WIT it links, the section it grants, and the two phases of its state.
pub trait Capability: Sized + 'static {
    /// The manifest section it grants (its `NAME` is the capability's name).
    type Section: Section;
    /// The grant resolved at load: plain data and shared handles, cloned into every call.
    type Config: Clone + Default + fmt::Debug + Send + Sync;
    /// The per-call state its host functions see.
    type Ctx: Send;
    /// The interface prefixes it links (`chitin:host/secrets@`, `wasi:http/`).
    const LINKS: &'static [&'static str];

    /// Resolve the section the policy let through against the host; `None`: not granted. Each
    /// part the policy or the host cuts is recorded in `cuts`.
    fn configure(
        section: Option<&Self::Section>,
        load: &Load<'_>,
        cuts: &mut Vec<Cut>,
    ) -> Result<Self::Config, CapabilityError>;

    /// The call's state under `config`: clones and counters, no parsing, no I/O.
    fn ctx(config: &Self::Config, call: &Call<'_>) -> Self::Ctx;

    /// What the grant adds to the call's WASI context (preopens, environment); most add nothing.
    fn wasi(config: &Self::Config, builder: &mut WasiCtxBuilder) -> std::io::Result<()> {
        let _ = (config, builder);
        Ok(())
    }

    /// Link its interfaces into a linker whose store state holds its context.
    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()>;

    /// Finish what the call left in flight before its result is given out (a write applied
    /// but not yet committed); a failure is recorded as the call's host fault. Most have
    /// nothing to finish.
    fn settle(ctx: &mut Self::Ctx) -> impl std::future::Future<Output = ()> + Send {
        let _ = ctx;
        async {}
    }
}

/// A store state that holds capability `C`'s per-call context (the view wasmtime's bindings
/// are handed).
pub trait Holds<C: Capability>: Send + 'static {
    /// The context and the call's resource table.
    fn parts(&mut self) -> (&mut C::Ctx, &mut ResourceTable);
}

/// What a capability is resolved against at load.
pub struct Load<'a> {
    /// The component's `namespace/name`.
    pub id: &'a str,
    /// The operator's policy.
    pub policy: &'a Policy,
    /// The host's services.
    pub services: &'a Services,
    /// Every section the policy let through (a capability may read another's section, never
    /// its resolved state: HTTP credentials must name a granted secret).
    pub granted: &'a Capabilities,
}

/// Something the manifest asked for that the policy cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// The manifest key (`capabilities.env`, `limits.memory_bytes`).
    pub what: String,
    /// Why it was cut.
    pub reason: String,
}

/// A capability's grant could not be resolved at load; converts into the load error, which
/// names the component.
#[derive(Debug)]
pub struct CapabilityError {
    /// The capability (`files`, `http`).
    pub capability: &'static str,
    /// Its own typed error, whose message names what to fix.
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl CapabilityError {
    /// `source`, raised by the capability `C`.
    pub fn new<C: Capability>(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            capability: <C::Section as Section>::NAME,
            source: Box::new(source),
        }
    }
}

impl fmt::Display for CapabilityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The capability's own message already says which grant it is about.
        self.source.fmt(f)
    }
}

impl std::error::Error for CapabilityError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// The name of capability `C` (its manifest section's key).
pub fn name<C: Capability>() -> &'static str {
    <C::Section as Section>::NAME
}
