//! Which versions of chitin's WIT contracts this host accepts, and the check a component must
//! pass before it is linked.

use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

/// The contract packages this host speaks, with the semver range it accepts for each.
pub const ACCEPTED: &[(&str, &str)] = &[("chitin:tool", "^0.1"), ("chitin:host", "^0.1")];

/// The interface a tool component must export.
pub const TOOL_INTERFACE: &str = "chitin:tool/tool";

/// How a component offers its tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Through the `chitin:tool/tool` interface (any other exported function is ignored).
    Tool,
    /// As plain typed functions, one tool each (see [`crate::typed_exports`]).
    Typed,
}

/// A component's contract is not one this host accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContractError {
    /// It exports neither the `chitin:tool/tool` interface nor any plain function.
    #[error(
        "exports neither a `{TOOL_INTERFACE}` interface nor any plain function, so it carries \
         no tools (it exports: {exports})"
    )]
    NotATool {
        /// What it exports instead.
        exports: String,
    },
    /// It uses a chitin interface at a version this host does not accept.
    #[error(
        "uses `{interface}` at version {found}, but this host accepts {package} {accepted}; \
         rebuild the component against a supported contract or upgrade chitin"
    )]
    UnsupportedVersion {
        /// The interface, without version.
        interface: String,
        /// The package name.
        package: String,
        /// The version the component uses.
        found: String,
        /// The accepted range.
        accepted: String,
    },
    /// A chitin interface without a version.
    #[error("uses `{0}` without a version; chitin contracts are always versioned")]
    Unversioned(String),
    /// It imports something the host never links.
    #[error("imports `{import}`, {reason}")]
    UnsupportedImport {
        /// The import name.
        import: String,
        /// Why it cannot be satisfied.
        reason: String,
    },
}

/// A human-readable statement of the accepted contracts, e.g. for `chitin --version`.
pub fn accepted_summary() -> String {
    ACCEPTED
        .iter()
        .map(|(pkg, req)| format!("{pkg}@{req}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Check a compiled component's imports and exports against the accepted contracts and the
/// interfaces the host links; `libraries` are imports linked to library components. Says how
/// the component offers its tools.
pub fn check(
    engine: &Engine,
    component: &Component,
    libraries: &[String],
) -> Result<Shape, ContractError> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_owned()).collect();
    let mut found_tool = false;
    for name in &exports {
        if let Some(version) = chitin_version(name)? {
            check_version(name, version)?;
            if interface_of(name) == TOOL_INTERFACE {
                found_tool = true;
            }
        }
    }
    let exports_functions = ty.exports(engine).any(|(_, item)| match item.ty {
        ComponentItem::ComponentFunc(_) => true,
        ComponentItem::ComponentInstance(i) => i
            .exports(engine)
            .any(|(_, e)| matches!(e.ty, ComponentItem::ComponentFunc(_))),
        _ => false,
    });
    if !found_tool && !exports_functions {
        return Err(ContractError::NotATool {
            exports: if exports.is_empty() {
                "nothing".into()
            } else {
                exports.join(", ")
            },
        });
    }
    for (name, _) in ty.imports(engine) {
        // Imports a library provides are the library's contract, checked when it was resolved.
        if libraries.iter().any(|l| l == name) {
            continue;
        }
        if let Some(version) = chitin_version(name)? {
            check_version(name, version)?;
        }
        if !crate::caps::is_linked(name) {
            return Err(ContractError::UnsupportedImport {
                import: name.to_owned(),
                reason: "which this host does not provide".into(),
            });
        }
    }
    Ok(if found_tool {
        Shape::Tool
    } else {
        Shape::Typed
    })
}

fn interface_of(name: &str) -> &str {
    name.split('@').next().unwrap_or(name)
}

/// For a `chitin:` name, its version part; `None` for other packages.
fn chitin_version(name: &str) -> Result<Option<&str>, ContractError> {
    if !name.starts_with("chitin:") {
        return Ok(None);
    }
    match name.split_once('@') {
        Some((_, version)) => Ok(Some(version)),
        None => Err(ContractError::Unversioned(name.to_owned())),
    }
}

fn check_version(name: &str, version: &str) -> Result<(), ContractError> {
    let interface = interface_of(name);
    let package = interface.split('/').next().unwrap_or(interface);
    let accepted = ACCEPTED.iter().find(|(pkg, _)| *pkg == package);
    let unsupported = |accepted: &str| ContractError::UnsupportedVersion {
        interface: interface.to_owned(),
        package: package.to_owned(),
        found: version.to_owned(),
        accepted: accepted.to_owned(),
    };
    let Some((_, req)) = accepted else {
        return Err(unsupported("no version (unknown package)"));
    };
    let parsed = semver::Version::parse(version).map_err(|_| unsupported(req))?;
    let range = semver::VersionReq::parse(req).map_err(|_| unsupported(req))?;
    if range.matches(&parsed) {
        Ok(())
    } else {
        Err(unsupported(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_patch_and_minor_zero_versions_of_the_contract() {
        assert!(check_version("chitin:tool/tool@0.1.0", "0.1.0").is_ok());
        assert!(check_version("chitin:tool/tool@0.1.7", "0.1.7").is_ok());
    }

    #[test]
    fn refuses_a_newer_minor_of_a_zero_major_contract() {
        let err = check_version("chitin:tool/tool@0.2.0", "0.2.0").unwrap_err();
        assert!(err.to_string().contains("0.2.0"), "{err}");
        assert!(err.to_string().contains("^0.1"), "{err}");
    }

    #[test]
    fn refuses_an_unknown_chitin_package() {
        assert!(check_version("chitin:other/x@0.1.0", "0.1.0").is_err());
    }

    #[test]
    fn refuses_an_unversioned_chitin_interface() {
        assert!(chitin_version("chitin:tool/tool").is_err());
    }
}
