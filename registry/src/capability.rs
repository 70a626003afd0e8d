//! The capability table: every manifest capability section, in one list. The
//! [`Capabilities`](crate::manifest::Capabilities) struct, section validation, import coverage
//! (`imports.rs`) and widening (`widening.rs`) are all driven by [`SECTIONS`]; adding a
//! capability is its section module, its [`Section`] impl and one line in `capability_table!`.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::manifest::{AuditLine, ManifestError};

/// A manifest capability section (`[capabilities.NAME]`).
pub trait Section: Clone + PartialEq + Eq + Serialize + DeserializeOwned {
    /// Its key under `[capabilities]`, and the name policies use for it.
    const NAME: &'static str;
    /// The imports a declared section covers: a package (`wasi:filesystem`) covers all its
    /// interfaces, an interface (`chitin:host/secrets`) itself only; versions are not compared.
    const IMPORTS: &'static [&'static str];
    /// Whether its imports are standard WASI that the host links with every use refused when
    /// the section is absent (ordinary toolchains import them whether or not a tool uses them).
    const LINKED_WITHOUT_GRANT: bool = false;

    /// Check every value the types alone cannot; `all` is the whole manifest's capabilities, for
    /// checks that span sections.
    fn check(&self, all: &Capabilities) -> Result<(), ManifestError>;

    /// Each widening from `old` (absent: not granted before) to `self`, as `key: what changed`.
    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>);

    /// The section in plain words, with the risk of each part, for audits and lockfiles.
    fn audit_lines(&self) -> Vec<AuditLine>;
}

/// One row of the table: a section's name and what the generic code needs of it.
#[derive(Clone, Copy)]
pub struct SectionEntry {
    /// The section's key ([`Section::NAME`]).
    pub name: &'static str,
    /// The imports it covers ([`Section::IMPORTS`]).
    pub imports: &'static [&'static str],
    /// [`Section::LINKED_WITHOUT_GRANT`].
    pub linked_without_grant: bool,
    /// Whether `caps` declares the section.
    pub present: fn(&Capabilities) -> bool,
    /// Remove the section from `caps` (a policy cut).
    pub remove: fn(&mut Capabilities),
    /// [`Section::check`] of the section when present.
    pub check: fn(&Capabilities) -> Result<(), ManifestError>,
    /// [`Section::widenings`] from `old` to `new` when `new` declares the section.
    pub widenings: fn(&Capabilities, &Capabilities, &mut Vec<String>),
    /// [`Section::audit_lines`] of the section when present.
    pub audit_lines: fn(&Capabilities) -> Vec<AuditLine>,
}

impl SectionEntry {
    /// Whether the section covers `import` (`package/interface`, version stripped).
    pub fn covers(&self, unversioned: &str) -> bool {
        let package = unversioned.split_once('/').map_or(unversioned, |(p, _)| p);
        self.imports
            .iter()
            .any(|i| *i == unversioned || *i == package)
    }
}

/// The table: generates `Capabilities` (one optional field per section) and [`SECTIONS`].
macro_rules! capability_table {
    ($($(#[$attr:meta])* $field:ident: $section:ty, $doc:literal;)*) => {
        /// Every capability section. Absent means not granted.
        #[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct Capabilities {
            $(
                $(#[$attr])*
                #[doc = $doc]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<$section>,
            )*
        }

        /// Every section, in the order manifests, audits and policies list them.
        pub const SECTIONS: &[SectionEntry] = &[
            $(
                $(#[$attr])*
                SectionEntry {
                    name: <$section as Section>::NAME,
                    imports: <$section as Section>::IMPORTS,
                    linked_without_grant: <$section as Section>::LINKED_WITHOUT_GRANT,
                    present: |c| c.$field.is_some(),
                    remove: |c| c.$field = None,
                    check: |c| c.$field.as_ref().map_or(Ok(()), |s| s.check(c)),
                    widenings: |old, new, out| {
                        if let Some(n) = &new.$field {
                            n.widenings(old.$field.as_ref(), out);
                        }
                    },
                    audit_lines: |c| {
                        c.$field.as_ref().map(Section::audit_lines).unwrap_or_default()
                    },
                },
            )*
        ];
    };
}

use crate::manifest::{
    ClientGrant, EnvGrant, FilesGrant, HttpGrant, InvokeGrant, KvGrant, ProcessGrant, SecretsGrant,
};

capability_table! {
    files: FilesGrant, "Workspace files (`wasi:filesystem` preopens).";
    kv: KvGrant, "Key-value buckets (`wasi:keyvalue`).";
    http: HttpGrant, "Outbound HTTP (`wasi:http/outgoing-handler`).";
    secrets: SecretsGrant, "Secret names the component may ask about (`chitin:host/secrets`).";
    process: ProcessGrant, "Programs it may run (`chitin:host/process`).";
    env: EnvGrant, "Environment variables it may read (`wasi:cli/environment`).";
    invoke: InvokeGrant, "Other tools it may call, by alias (`chitin:host/invoke`).";
    client: ClientGrant, "Questions it may put to the calling MCP client (`chitin:host/client`).";
    #[cfg(feature = "test-capability")]
    probe: crate::manifest::probe::ProbeGrant, "Test only: a level the component may read (`chitin:probe/probe`).";
}

/// The name of every section, in table order.
pub fn names() -> impl Iterator<Item = &'static str> {
    SECTIONS.iter().map(|s| s.name)
}

/// The table row named `name`.
pub fn section(name: &str) -> Option<&'static SectionEntry> {
    SECTIONS.iter().find(|s| s.name == name)
}
