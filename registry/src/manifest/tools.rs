//! Tool specs in the signed manifest: the name, description, schemas and annotations of each
//! tool, recorded by `chitin manifest embed` from the component's own `specs()` (run with no
//! capability), so an auditor reads them without running anything and the signature covers
//! them. At load the component's `specs()` must still say exactly this.

use serde::{Deserialize, Serialize};

use super::{ManifestError, ToolHints};

/// Behaviour hints of a tool (MCP tool annotations).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolAnnotations {
    /// Changes nothing outside its result.
    #[serde(default)]
    pub read_only: bool,
    /// May destroy or overwrite data.
    #[serde(default)]
    pub destructive: bool,
    /// Repeating a call has no further effect.
    #[serde(default)]
    pub idempotent: bool,
    /// Reaches an open world (internet, other systems).
    #[serde(default)]
    pub open_world: bool,
}

/// One tool as its component describes it to agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// The tool's own name (what `call` takes).
    pub name: String,
    /// Description for the agent.
    pub description: String,
    /// JSON Schema of the arguments, as JSON text.
    pub input_schema: String,
    /// JSON Schema of a successful result, as JSON text, when declared.
    pub output_schema: Option<String>,
    /// Behaviour hints.
    pub annotations: ToolAnnotations,
}

/// The component's own specs differ from the signed ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecMismatch {
    /// The component offers a tool the signed manifest does not list.
    #[error("tool `{0}` is not in the signed manifest")]
    Unsigned(String),
    /// The signed manifest lists a tool the component does not offer.
    #[error("tool `{0}` is in the signed manifest, but the component does not offer it")]
    Missing(String),
    /// A tool's spec differs from the signed one.
    #[error("tool `{tool}`: its {field} differs from the signed manifest")]
    Changed {
        /// The tool.
        tool: String,
        /// What differs (`description`, `input_schema`, `output_schema`, `annotations`).
        field: &'static str,
    },
}

impl SpecMismatch {
    /// The tool the mismatch is about.
    pub fn tool(&self) -> &str {
        match self {
            Self::Unsigned(tool) | Self::Missing(tool) | Self::Changed { tool, .. } => tool,
        }
    }
}

impl ToolSpec {
    /// The first field in which `found` differs from this spec. Schemas compare as JSON values,
    /// so formatting and key order do not count.
    pub fn difference(&self, found: &ToolSpec) -> Option<&'static str> {
        let same_output = match (&self.output_schema, &found.output_schema) {
            (None, None) => true,
            (Some(a), Some(b)) => same_json(a, b),
            _ => false,
        };
        if self.description != found.description {
            Some("description")
        } else if !same_json(&self.input_schema, &found.input_schema) {
            Some("input_schema")
        } else if !same_output {
            Some("output_schema")
        } else if self.annotations != found.annotations {
            Some("annotations")
        } else {
            None
        }
    }

    /// This spec as the `[tools.<name>]` fields record it, keeping `hints`' approval.
    pub fn record_in(&self, hints: &mut ToolHints) {
        hints.description = Some(self.description.clone());
        hints.input_schema = Some(self.input_schema.clone());
        hints.output_schema = self.output_schema.clone();
        hints.annotations = Some(self.annotations);
    }
}

/// Whether two JSON texts hold the same value (texts that do not parse compare as text).
fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Check `found` (what the component's `specs()` says) against `signed`: the same tools, each
/// with the same spec. The first difference is the error, naming its tool.
pub fn compare(signed: &[ToolSpec], found: &[ToolSpec]) -> Result<(), SpecMismatch> {
    for spec in found {
        let Some(want) = signed.iter().find(|s| s.name == spec.name) else {
            return Err(SpecMismatch::Unsigned(spec.name.clone()));
        };
        if let Some(field) = want.difference(spec) {
            return Err(SpecMismatch::Changed {
                tool: spec.name.clone(),
                field,
            });
        }
    }
    match signed
        .iter()
        .find(|s| !found.iter().any(|f| f.name == s.name))
    {
        Some(absent) => Err(SpecMismatch::Missing(absent.name.clone())),
        None => Ok(()),
    }
}

impl ToolHints {
    /// The spec recorded for tool `name`, when the manifest carries one.
    pub fn spec(&self, name: &str) -> Option<ToolSpec> {
        Some(ToolSpec {
            name: name.to_owned(),
            description: self.description.clone()?,
            input_schema: self.input_schema.clone()?,
            output_schema: self.output_schema.clone(),
            annotations: self.annotations?,
        })
    }

    /// A recorded spec is whole and its schemas are JSON; no spec at all is valid too (an
    /// author's manifest before `chitin manifest embed` records it).
    pub(super) fn validate(&self, name: &str) -> Result<(), ManifestError> {
        let present = [
            ("description", self.description.is_some()),
            ("input_schema", self.input_schema.is_some()),
            ("annotations", self.annotations.is_some()),
        ];
        let any = present.iter().any(|(_, p)| *p) || self.output_schema.is_some();
        if let Some((field, _)) = present.iter().find(|(_, p)| !p)
            && any
        {
            return Err(ManifestError::invalid(
                format!("tools.{name}.{field}"),
                "is missing from a partly recorded spec; re-run `chitin manifest embed` to \
                 record the component's specs",
            ));
        }
        for (field, text) in [
            ("input_schema", &self.input_schema),
            ("output_schema", &self.output_schema),
        ] {
            if let Some(text) = text
                && let Err(e) = serde_json::from_str::<serde_json::Value>(text)
            {
                return Err(ManifestError::invalid(
                    format!("tools.{name}.{field}"),
                    format!("is not JSON: {e}"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, schema: &str) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: "Does it.".into(),
            input_schema: schema.into(),
            output_schema: None,
            annotations: ToolAnnotations::default(),
        }
    }

    #[test]
    fn equal_specs_compare_equal_whatever_the_json_formatting() {
        let signed = [spec("a", r#"{"type":"object","properties":{}}"#)];
        let found = [spec("a", r#"{ "properties": {}, "type": "object" }"#)];
        assert_eq!(compare(&signed, &found), Ok(()));
    }

    #[test]
    fn every_difference_names_its_tool() {
        let signed = [spec("a", r#"{"type":"object"}"#)];
        let mut changed = spec("a", r#"{"type":"object"}"#);
        changed.annotations.destructive = true;
        assert_eq!(
            compare(&signed, &[changed]),
            Err(SpecMismatch::Changed {
                tool: "a".into(),
                field: "annotations"
            })
        );
        let widened = spec("a", r#"{"type":"object","additionalProperties":true}"#);
        let err = compare(&signed, &[widened]).unwrap_err();
        assert_eq!(err.tool(), "a");
        assert!(err.to_string().contains("input_schema"), "{err}");
        let extra = [signed[0].clone(), spec("b", r#"{"type":"object"}"#)];
        assert_eq!(
            compare(&signed, &extra),
            Err(SpecMismatch::Unsigned("b".into()))
        );
        assert_eq!(
            compare(&signed, &[]),
            Err(SpecMismatch::Missing("a".into()))
        );
    }
}
