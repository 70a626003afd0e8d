//! `[capabilities.invoke]`: other tools the component may call through `chitin:host/invoke`,
//! each under an alias the component uses. The host resolves the alias, applies the policy to
//! the tool called and runs it in its own sandbox with its own grant.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::audit_line::AuditLine;
use super::{ManifestError, check_ident};

/// Most aliases one manifest may declare.
pub const MAX_ALIASES: usize = 32;

/// Alias → tool name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InvokeGrant {
    /// The tools the component may call, by the alias it calls them with.
    pub tools: BTreeMap<String, String>,
}

impl InvokeGrant {
    /// At least one alias, at most [`MAX_ALIASES`]; aliases and tool names are identifiers.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.tools.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.invoke.tools",
                "is empty: name at least one tool, or drop the section",
            ));
        }
        if self.tools.len() > MAX_ALIASES {
            return Err(ManifestError::invalid(
                "capabilities.invoke.tools",
                format!(
                    "declares {} aliases; at most {MAX_ALIASES} are allowed",
                    self.tools.len()
                ),
            ));
        }
        for (alias, tool) in &self.tools {
            let field = format!("capabilities.invoke.tools.{alias}");
            check_ident(&field, alias)?;
            let ok = !tool.is_empty()
                && tool.len() <= 64
                && tool
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return Err(ManifestError::invalid(
                    field,
                    format!("`{tool}` is not a tool name (ASCII letters, digits, `_`, `-`)"),
                ));
            }
        }
        Ok(())
    }
}

impl InvokeGrant {
    /// Each alias and the tool it calls, in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        self.tools
            .iter()
            .map(|(alias, tool)| AuditLine {
                name: "invoke",
                scope: format!("`{alias}` → {tool}"),
                risk: format!(
                    "can call {tool} (under its own grant, subject to the policy and approvals)"
                ),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(pairs: &[(&str, &str)]) -> InvokeGrant {
        InvokeGrant {
            tools: pairs
                .iter()
                .map(|(a, t)| (a.to_string(), t.to_string()))
                .collect(),
        }
    }

    #[test]
    fn aliases_name_tools() {
        assert!(grant(&[("search", "memory_search")]).validate().is_ok());
        let e = grant(&[]).validate().unwrap_err().to_string();
        assert!(e.contains("capabilities.invoke.tools"), "{e}");
        let e = grant(&[("Bad", "echo")])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`Bad`"), "{e}");
        let e = grant(&[("ok", "no spaces")])
            .validate()
            .unwrap_err()
            .to_string();
        assert!(e.contains("`no spaces`"), "{e}");
        let many: Vec<(String, String)> = (0..=MAX_ALIASES)
            .map(|i| (format!("a{i}"), "echo".to_string()))
            .collect();
        let many = InvokeGrant {
            tools: many.into_iter().collect(),
        };
        assert!(many.validate().is_err());
    }
}
