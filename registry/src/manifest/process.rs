//! `[capabilities.process]`: which programs the component may run, which environment keys it
//! may set for them, and whether they may use the network or only read the workspace.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};
use crate::capability::Section;
use crate::manifest::Capabilities;
use crate::widening::added;

/// Programs and their environment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessGrant {
    /// Programs, by absolute path or by name resolved on the host's PATH at load.
    pub programs: Vec<String>,
    /// Extra environment keys the component may set for them (`[A-Za-z_][A-Za-z0-9_]*`; not
    /// `HOME`, `TMPDIR` or `SHELL`, which the host sets).
    #[serde(default)]
    pub env: Vec<String>,
    /// Whether the programs may make IP sockets (TCP, with connect and bind, and UDP); without
    /// it the host refuses them.
    #[serde(default)]
    pub network: bool,
    /// Whether the programs may only read the workspace.
    #[serde(default)]
    pub read_only: bool,
}

impl Section for ProcessGrant {
    const NAME: &'static str = "process";
    const IMPORTS: &'static [&'static str] = &["chitin:host/process"];

    fn check(&self, _all: &Capabilities) -> Result<(), ManifestError> {
        self.validate()
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        widen(old, self, out);
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        ProcessGrant::audit_lines(self)
    }
}

/// Each widening from `old` to `new`, as `key: what changed`.
fn widen(old: Option<&ProcessGrant>, new: &ProcessGrant, out: &mut Vec<String>) {
    let Some(old) = old else {
        out.push(format!(
            "capabilities.process: added: may run {}",
            new.programs
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return;
    };
    added(
        "capabilities.process.programs",
        "program",
        &old.programs,
        &new.programs,
        out,
    );
    added(
        "capabilities.process.env",
        "env key",
        &old.env,
        &new.env,
        out,
    );
    if new.network && !old.network {
        out.push("capabilities.process.network: turned on".into());
    }
    if old.read_only && !new.read_only {
        out.push("capabilities.process.read_only: turned off (may now write)".into());
    }
}

impl ProcessGrant {
    /// At least one program, none empty.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.programs.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.process.programs",
                "is empty: name at least one program, or drop the section",
            ));
        }
        for (i, p) in self.programs.iter().enumerate() {
            if p.trim().is_empty() || p.contains('\0') {
                return Err(ManifestError::invalid(
                    format!("capabilities.process.programs[{i}]"),
                    "must be a program name or absolute path",
                ));
            }
        }
        for (i, key) in self.env.iter().enumerate() {
            let mut chars = key.chars();
            let well_formed = chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !well_formed || ["HOME", "TMPDIR", "SHELL"].contains(&key.as_str()) {
                return Err(ManifestError::invalid(
                    format!("capabilities.process.env[{i}]"),
                    "must be a variable name ([A-Za-z_][A-Za-z0-9_]*) other than HOME, TMPDIR \
                     and SHELL, which the host sets",
                ));
            }
        }
        Ok(())
    }
}

impl ProcessGrant {
    /// The programs, their environment keys and network access in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        let network = if self.network {
            ", with network access"
        } else {
            ", without network access"
        };
        let env = if self.env.is_empty() {
            String::new()
        } else {
            format!(", env {}", quoted(&self.env))
        };
        vec![AuditLine {
            name: "process",
            scope: format!("programs {}{env}", quoted(&self.programs)),
            risk: format!(
                "can run {} inside the workspace{network}",
                self.programs.join(", ")
            ),
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(programs: &[&str], env: &[&str]) -> ProcessGrant {
        ProcessGrant {
            programs: programs.iter().map(|s| (*s).to_owned()).collect(),
            env: env.iter().map(|s| (*s).to_owned()).collect(),
            network: false,
            read_only: false,
        }
    }

    #[test]
    fn a_grant_needs_programs_and_well_formed_env_keys() {
        assert!(grant(&["/bin/sh"], &["RUST_LOG"]).validate().is_ok());
        assert!(grant(&[], &[]).validate().is_err());
        assert!(grant(&[" "], &[]).validate().is_err());
        let err = grant(&["sh"], &["HOME"]).validate().unwrap_err();
        assert!(err.to_string().contains("env[0]"), "{err}");
        assert!(grant(&["sh"], &["A=B"]).validate().is_err());
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err =
            toml::from_str::<ProcessGrant>("programs = [\"sh\"]\nnetwrok = true").unwrap_err();
        assert!(err.to_string().contains("netwrok"), "{err}");
    }
}
