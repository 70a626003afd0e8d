//! Imports versus manifest: every WIT interface a component imports must be covered by the WASI
//! base every component gets, by a capability its manifest declares, or be a standard WASI 0.2
//! interface the host links with every use refused.
//!
//! The base is what the Rust standard library imports for any program and what grants nothing
//! by itself: `wasi:io`, `wasi:cli` (environment, exit, stdio, terminal), `wasi:clocks`,
//! `wasi:random`, the type-only `chitin:tool` interfaces, `chitin:host/log`,
//! `chitin:host/progress` (reports to the caller) and `chitin:host/approval` (asks a person; it
//! can add a question before a call goes on, never skip one). An empty
//! environment is linked unless an `env` grant names keys.
//!
//! Ordinary toolchains (componentize-py, jco, wasi-sdk, TinyGo) import the whole `wasi:cli`
//! world, file access and sockets included, whether or not the tool uses them. Those standard
//! interfaces are linked deny-by-default instead of refused ([`Coverage::NoGrant`]):
//! `wasi:filesystem` without a `files` section gets no preopens, `wasi:http` without an `http`
//! section gets every request refused, and `wasi:sockets` is never granted at all (no address
//! passes, no name lookup), whatever else the manifest declares. An auditor sees them listed as
//! "linked, every use refused (no grant)".
//!
//! Only WASI 0.2.x is linked: any other `wasi:` version is refused. `wasi:keyvalue` (a draft no
//! toolchain emits by itself) and every `chitin:host` capability still need their section.
//!
//! Any other interface (neither `wasi:` nor `chitin:host`) can only come from a library
//! component, so it is covered when the manifest declares `[[dependencies]]`; the host resolves
//! each such import to a trusted library at load, and refuses the component if none fits.

use crate::capability::SECTIONS;
use crate::manifest::{Capabilities, Manifest};

/// Which part of a manifest covers an import, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// The WASI base every component gets.
    Base,
    /// The named capability section, declared in the manifest.
    Capability(&'static str),
    /// A standard WASI interface linked with every use refused, because the named capability
    /// is not declared (`sockets`: never grantable).
    NoGrant(&'static str),
    /// The named capability section would cover it, but the manifest does not declare it.
    Undeclared(&'static str),
    /// A library the manifest depends on must export it (checked when the host loads).
    Dependency,
    /// Nothing can cover it.
    Never,
}

/// How `import` (e.g. `wasi:http/outgoing-handler@0.2.6`) is covered by `manifest`.
pub fn coverage(import: &str, manifest: Option<&Manifest>) -> Coverage {
    let caps = manifest.map(|m| &m.capabilities);
    match capability_coverage(import, caps) {
        Coverage::Never
            if !import.starts_with("wasi:")
                && !import.starts_with("chitin:host/")
                && manifest.is_some_and(|m| !m.dependencies.is_empty()) =>
        {
            Coverage::Dependency
        }
        other => other,
    }
}

/// How `import` is covered by the base or a capability section of `caps`.
fn capability_coverage(import: &str, caps: Option<&Capabilities>) -> Coverage {
    let unversioned = import.split('@').next().unwrap_or(import);
    let (package, interface) = unversioned.split_once('/').unwrap_or((unversioned, ""));
    if package.starts_with("wasi:") && !is_wasi_02(import) {
        return Coverage::Never;
    }
    match package {
        "wasi:io" | "wasi:clocks" | "wasi:random" | "wasi:cli" | "chitin:tool" => {
            return Coverage::Base;
        }
        "wasi:sockets" => return Coverage::NoGrant("sockets"),
        "chitin:host" if matches!(interface, "log" | "progress" | "approval") => {
            return Coverage::Base;
        }
        _ => {}
    }
    let Some(section) = SECTIONS.iter().find(|s| s.covers(unversioned)) else {
        return Coverage::Never;
    };
    match (
        caps.is_some_and(section.present),
        section.linked_without_grant,
    ) {
        (true, _) => Coverage::Capability(section.name),
        (false, true) => Coverage::NoGrant(section.name),
        (false, false) => Coverage::Undeclared(section.name),
    }
}

/// Whether a `wasi:` import names WASI 0.2.x (`wasi:io/streams@0.2.6`), the only version linked.
fn is_wasi_02(import: &str) -> bool {
    import
        .split_once('@')
        .and_then(|(_, version)| semver::Version::parse(version).ok())
        .is_some_and(|v| v.major == 0 && v.minor == 2)
}

/// The imports not covered, each with what would cover it (`None`: nothing can).
pub fn uncovered(
    imports: &[String],
    manifest: Option<&Manifest>,
) -> Vec<(String, Option<&'static str>)> {
    imports
        .iter()
        .filter_map(|import| match coverage(import, manifest) {
            Coverage::Base
            | Coverage::Capability(_)
            | Coverage::NoGrant(_)
            | Coverage::Dependency => None,
            Coverage::Undeclared(cap) => Some((import.clone(), Some(cap))),
            Coverage::Never => Some((import.clone(), None)),
        })
        .collect()
}

/// The standard WASI imports linked with every use refused because nothing grants them, each
/// with the capability that would (`sockets`: none can).
pub fn linked_without_grant(
    imports: &[String],
    manifest: Option<&Manifest>,
) -> Vec<(String, &'static str)> {
    imports
        .iter()
        .filter_map(|import| match coverage(import, manifest) {
            Coverage::NoGrant(cap) => Some((import.clone(), cap)),
            _ => None,
        })
        .collect()
}

/// One line per import linked without a grant, for audits and install approvals.
pub fn describe_linked_without_grant(list: &[(String, &'static str)]) -> Vec<String> {
    list.iter()
        .map(|(import, cap)| match *cap {
            "sockets" => format!(
                "{import}: linked, every use refused (no grant; chitin never grants raw sockets)"
            ),
            cap => format!(
                "{import}: linked, every use refused (no grant; a [capabilities.{cap}] section \
                 would grant it)"
            ),
        })
        .collect()
}

/// One line per uncovered import, for error messages and audits.
pub fn describe_uncovered(list: &[(String, Option<&'static str>)]) -> String {
    list.iter()
        .map(|(import, cap)| match cap {
            Some(cap) => format!("{import} (needs a [capabilities.{cap}] section)"),
            None if import.starts_with("wasi:") && !is_wasi_02(import) => {
                format!("{import} (only WASI 0.2.x is linked)")
            }
            None if import.starts_with("wasi:") || import.starts_with("chitin:host/") => {
                format!("{import} (chitin never grants it)")
            }
            None => format!(
                "{import} (no capability covers it; a library's interface needs a \
                 [[dependencies]] entry)"
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Manifest;

    #[test]
    fn the_base_is_always_covered() {
        for import in [
            "wasi:io/streams@0.2.6",
            "wasi:cli/environment@0.2.6",
            "wasi:clocks/wall-clock@0.2.6",
            "wasi:random/insecure-seed@0.2.6",
            "chitin:tool/types@0.1.0",
            "chitin:host/log@0.1.0",
        ] {
            assert_eq!(coverage(import, None), Coverage::Base, "{import}");
        }
    }

    #[test]
    fn standard_wasi_imports_without_a_section_are_linked_without_a_grant() {
        let import = "wasi:filesystem/preopens@0.2.6";
        assert_eq!(coverage(import, None), Coverage::NoGrant("files"));
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"a\"\nnamespace = \"b\"\nversion = \"1.0.0\"\n\
             publisher = \"b\"\n[capabilities.files]\npaths = [{ path = \".\", access = \"read-only\" }]\n",
        )
        .unwrap();
        assert_eq!(
            coverage(import, Some(&manifest)),
            Coverage::Capability("files")
        );
        assert_eq!(
            coverage("wasi:http/outgoing-handler@0.2.6", Some(&manifest)),
            Coverage::NoGrant("http")
        );
        assert_eq!(
            coverage("wasi:keyvalue/store@0.2.0-draft", Some(&manifest)),
            Coverage::Undeclared("kv")
        );
        let imports = vec![import.to_owned(), "wasi:sockets/tcp@0.2.0".to_owned()];
        assert!(uncovered(&imports, None).is_empty());
        let lines = describe_linked_without_grant(&linked_without_grant(&imports, None));
        assert_eq!(
            lines,
            [
                "wasi:filesystem/preopens@0.2.6: linked, every use refused (no grant; a \
                 [capabilities.files] section would grant it)",
                "wasi:sockets/tcp@0.2.0: linked, every use refused (no grant; chitin never \
                 grants raw sockets)"
            ]
        );
    }

    #[test]
    fn the_client_interface_needs_a_client_section() {
        let import = "chitin:host/client@0.1.0";
        assert_eq!(coverage(import, None), Coverage::Undeclared("client"));
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"a\"\nnamespace = \"b\"\nversion = \"1.0.0\"\n\
             publisher = \"b\"\n[capabilities.client]\nmethods = [\"elicit\"]\n",
        )
        .unwrap();
        assert_eq!(
            coverage(import, Some(&manifest)),
            Coverage::Capability("client")
        );
    }

    #[test]
    fn the_secrets_interface_needs_a_secrets_section() {
        let import = "chitin:host/secrets@0.1.0";
        assert_eq!(coverage(import, None), Coverage::Undeclared("secrets"));
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"a\"\nnamespace = \"b\"\nversion = \"1.0.0\"\n\
             publisher = \"b\"\n[capabilities.secrets]\nnames = [\"github_*\"]\n",
        )
        .unwrap();
        assert_eq!(
            coverage(import, Some(&manifest)),
            Coverage::Capability("secrets")
        );
        let text = describe_uncovered(&uncovered(&[import.to_owned()], None));
        assert!(
            text.contains("needs a [capabilities.secrets] section"),
            "{text}"
        );
    }

    #[test]
    fn other_wasi_versions_and_unknown_interfaces_are_never_covered() {
        let imports = vec![
            "wasi:sockets/tcp@0.3.0-rc-2025-08-15".to_owned(),
            "wasi:io/streams".to_owned(),
            "wasi:nn/graph@0.2.0-rc-2024-10-28".to_owned(),
            "acme:evil/backdoor".to_owned(),
            "wasi:io/poll@0.2.6".to_owned(),
        ];
        let list = uncovered(&imports, None);
        assert_eq!(list.len(), 4);
        let text = describe_uncovered(&list);
        assert!(
            text.contains("wasi:sockets/tcp@0.3.0-rc-2025-08-15 (only WASI 0.2.x is linked)"),
            "{text}"
        );
        assert!(
            text.contains("wasi:io/streams (only WASI 0.2.x is linked)"),
            "{text}"
        );
        assert!(
            text.contains("wasi:nn/graph@0.2.0-rc-2024-10-28 (chitin never grants it)"),
            "{text}"
        );
        assert!(text.contains("acme:evil/backdoor (no capability"), "{text}");
    }

    #[test]
    fn only_interfaces_the_table_lists_are_covered_by_a_section() {
        // `chitin:host/kv` and `chitin:host/http` never existed: kv is `wasi:keyvalue`, HTTP
        // is `wasi:http`.
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"a\"\nnamespace = \"b\"\nversion = \"1.0.0\"\n\
             publisher = \"b\"\n[capabilities.kv]\nbuckets = [\"x\"]\n",
        )
        .unwrap();
        for import in ["chitin:host/kv@0.1.0", "chitin:host/http@0.1.0"] {
            assert_eq!(
                coverage(import, Some(&manifest)),
                Coverage::Never,
                "{import}"
            );
        }
        assert_eq!(
            coverage("wasi:keyvalue/store@0.2.0-draft", Some(&manifest)),
            Coverage::Capability("kv")
        );
    }

    #[test]
    fn library_interfaces_need_dependencies_and_sockets_stay_ungranted() {
        let manifest = Manifest::parse(
            "schema = 1\n[component]\nname = \"a\"\nnamespace = \"b\"\nversion = \"1.0.0\"\n\
             publisher = \"b\"\n[[dependencies]]\nname = \"b/lib\"\nversion = \"^1\"\n",
        )
        .unwrap();
        assert_eq!(
            coverage("acme:text/upper@0.1.0", Some(&manifest)),
            Coverage::Dependency
        );
        assert_eq!(
            coverage("wasi:sockets/tcp@0.2.6", Some(&manifest)),
            Coverage::NoGrant("sockets")
        );
        assert_eq!(
            coverage("chitin:host/nope@0.1.0", Some(&manifest)),
            Coverage::Never
        );
    }
}
