//! `[capabilities.probe]`: test only (the `test-capability` feature). A level the component may
//! read through `chitin:probe/probe`; it exists to prove that one section module and one table
//! line make a capability.

use serde::{Deserialize, Serialize};

use super::{AuditLine, ManifestError};
use crate::capability::Section;
use crate::manifest::Capabilities;
use crate::widening::limit;

/// The level the component may read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeGrant {
    /// At least 1.
    pub level: u32,
}

impl Section for ProbeGrant {
    const NAME: &'static str = "probe";
    const IMPORTS: &'static [&'static str] = &["chitin:probe/probe"];

    fn check(&self, _all: &Capabilities) -> Result<(), ManifestError> {
        if self.level == 0 {
            return Err(ManifestError::invalid(
                "capabilities.probe.level",
                "must be greater than zero",
            ));
        }
        Ok(())
    }

    fn widenings(&self, old: Option<&Self>, out: &mut Vec<String>) {
        limit(
            "capabilities.probe.level",
            old.map(|o| u64::from(o.level)),
            Some(u64::from(self.level)),
            old.is_some(),
            out,
        );
        if old.is_none() {
            out.push(format!("capabilities.probe: added: level {}", self.level));
        }
    }

    fn audit_lines(&self) -> Vec<AuditLine> {
        vec![AuditLine {
            name: "probe",
            scope: format!("level {}", self.level),
            risk: "can read a number (test only)".to_owned(),
        }]
    }
}
