//! `[capabilities.client]`: questions the component may put to the MCP client that made the call
//! (`chitin:host/client`): its user (elicitation), its model (sampling), its roots. The client
//! answers or refuses; nothing is asked of a client that did not declare the method.

use serde::{Deserialize, Serialize};

use super::ManifestError;
use super::audit_line::{AuditLine, quoted};

/// The client methods a component may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientGrant {
    /// The methods, at least one, each once.
    pub methods: Vec<ClientMethod>,
}

/// One kind of question to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientMethod {
    /// `elicitation/create`: a form the client's user fills in.
    Elicit,
    /// `sampling/createMessage`: a completion by the client's model.
    Sample,
    /// `roots/list`: the client's roots.
    ListRoots,
}

impl ClientMethod {
    /// The manifest spelling (`elicit`, `sample`, `list-roots`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Elicit => "elicit",
            Self::Sample => "sample",
            Self::ListRoots => "list-roots",
        }
    }
}

impl ClientGrant {
    /// At least one method, none twice.
    pub fn validate(&self) -> Result<(), ManifestError> {
        if self.methods.is_empty() {
            return Err(ManifestError::invalid(
                "capabilities.client.methods",
                "name at least one of `elicit`, `sample`, `list-roots`, or drop the section",
            ));
        }
        for (i, m) in self.methods.iter().enumerate() {
            if self.methods[..i].contains(m) {
                return Err(ManifestError::invalid(
                    format!("capabilities.client.methods[{i}]"),
                    format!("`{}` is listed twice", m.as_str()),
                ));
            }
        }
        Ok(())
    }
}

impl ClientGrant {
    /// The client methods in plain words.
    pub fn audit_lines(&self) -> Vec<AuditLine> {
        let methods: Vec<String> = self.methods.iter().map(|m| m.as_str().to_owned()).collect();
        vec![AuditLine {
            name: "client",
            scope: format!("methods {}", quoted(&methods)),
            risk: "can put questions to the calling MCP client (its user's forms, its model's \
                   completions, its roots), whose answers come back to the component"
                .into(),
        }]
    }
}
