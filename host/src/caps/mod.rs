//! Capabilities the host links into components, one module each. The granted ones are listed in
//! one table (`capability_table!` below): the grant ([`Granted`]), the per-call contexts
//! ([`Contexts`]), the WASI contributions, linking and [`is_linked`] all iterate it. The base
//! every component gets (WASI, log, progress, approval) is linked beside it.
//!
//! Adding a capability: its WIT, its module (a [`Capability`] impl), one line in the table and
//! its manifest section in `chitin_registry::capability`.

pub mod approval;
pub mod client;
pub mod env;
pub mod files;
pub mod http;
pub mod invoke;
pub mod kv;
pub mod log;
#[cfg(feature = "test-capability")]
pub mod probe;
pub mod process;
pub mod progress;
pub mod secrets;
pub mod wasi;

use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::{WasiCtxBuilder, WasiView};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};

/// The table: generates [`Granted`], [`Contexts`], a `Holds` impl per capability for every
/// [`CallStore`], and the loops over them. The order is the order grants are resolved in.
macro_rules! capability_table {
    ($($(#[$attr:meta])* $field:ident: $cap:ty;)*) => {
        /// Each capability's grant, resolved at load (an ungranted one holds its default, which
        /// grants nothing).
        #[derive(Debug, Clone, Default)]
        pub struct Granted {
            $(
                $(#[$attr])*
                #[doc = concat!("The `", stringify!($field), "` grant.")]
                pub $field: <$cap as Capability>::Config,
            )*
        }

        /// Each capability's per-call context.
        pub struct Contexts {
            $(
                $(#[$attr])*
                #[doc = concat!("The `", stringify!($field), "` context.")]
                pub $field: <$cap as Capability>::Ctx,
            )*
        }

        impl Granted {
            /// Resolve every section of `load.granted`, recording what is cut in `cuts`.
            pub fn resolve(load: &Load<'_>, cuts: &mut Vec<Cut>) -> Result<Self, CapabilityError> {
                Ok(Self {
                    $(
                        $(#[$attr])*
                        $field: <$cap as Capability>::configure(
                            load.granted.$field.as_ref(),
                            load,
                            cuts,
                        )?,
                    )*
                })
            }

            /// The call's contexts under these grants.
            pub fn contexts(&self, call: &Call<'_>) -> Contexts {
                Contexts {
                    $(
                        $(#[$attr])*
                        $field: <$cap as Capability>::ctx(&self.$field, call),
                    )*
                }
            }

            /// Add what the grants put into the call's WASI context.
            pub fn wasi(&self, builder: &mut WasiCtxBuilder) -> std::io::Result<()> {
                $(
                    $(#[$attr])*
                    <$cap as Capability>::wasi(&self.$field, builder)?;
                )*
                Ok(())
            }
        }

        impl Contexts {
            /// Finish what each capability left in flight (see [`Capability::settle`]).
            pub async fn settle(&mut self) {
                $(
                    $(#[$attr])*
                    <$cap as Capability>::settle(&mut self.$field).await;
                )*
            }
        }

        $(
            $(#[$attr])*
            impl<S: CallStore> Holds<$cap> for S {
                fn parts(&mut self) -> (&mut <$cap as Capability>::Ctx, &mut ResourceTable) {
                    let (contexts, table) = self.contexts();
                    (&mut contexts.$field, table)
                }
            }
        )*

        /// Link every capability of the table.
        fn link_table<T: CallStore>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
            $(
                $(#[$attr])*
                <$cap as Capability>::add_to_linker(linker)?;
            )*
            Ok(())
        }

        /// The interface prefixes the table's capabilities link.
        const TABLE_LINKS: &[&[&str]] = &[
            $(
                $(#[$attr])*
                <$cap as Capability>::LINKS,
            )*
        ];
    };
}

capability_table! {
    secrets: secrets::Secrets;
    http: http::Http;
    files: files::Files;
    env: env::Env;
    kv: kv::Kv;
    process: process::Process;
    invoke: invoke::Invoke;
    client: client::Client;
    #[cfg(feature = "test-capability")]
    probe: probe::Probe;
}

/// A call's store state: the WASI context, the base capabilities' contexts and the table's.
pub trait CallStore: WasiView + wasi::open_files::CountsOpenFiles + Send + 'static {
    /// The table's contexts and the call's resource table.
    fn contexts(&mut self) -> (&mut Contexts, &mut ResourceTable);
    /// The log capability's context.
    fn log(&mut self) -> &mut log::LogCtx;
    /// The progress capability's context.
    fn progress(&mut self) -> &mut progress::ProgressCtx;
    /// The approval capability's context.
    fn approval(&mut self) -> &mut approval::ApprovalCtx;
}

/// Link every capability the host offers. What a given component may use is decided per call
/// from its grant; the linker itself is shared by all components.
pub fn add_to_linker<T: CallStore>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    // `chitin:tool/types` holds only types; a component that uses them imports the interface
    // as an instance with nothing to call, which an empty instance satisfies.
    linker.instance(TOOL_TYPES)?;
    wasi::add_to_linker(linker)?;
    log::add_to_linker(linker, T::log)?;
    progress::add_to_linker(linker, T::progress)?;
    approval::add_to_linker(linker, T::approval)?;
    link_table(linker)
}

/// The contract's type-only interface, linked as an empty instance.
const TOOL_TYPES: &str = "chitin:tool/types@0.1.0";

/// Whether an import name is something the host links (used to explain unmet imports).
pub fn is_linked(import: &str) -> bool {
    let base: [&[&str]; 4] = [wasi::LINKS, log::LINKS, progress::LINKS, approval::LINKS];
    import.starts_with("chitin:tool/types@")
        || base
            .iter()
            .chain(TABLE_LINKS)
            .flat_map(|links| links.iter())
            .any(|prefix| import.starts_with(prefix))
}
