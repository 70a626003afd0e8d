//! One capability grant in plain words, as an audit shows it and a lockfile records it: each
//! capability section says what it grants through its own `audit_lines`.

/// One grant of a capability, for a person deciding whether to allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLine {
    /// The capability (`files`, `http`, `credential`…).
    pub name: &'static str,
    /// The scope, as granted.
    pub scope: String,
    /// What it lets the component do, for a person.
    pub risk: String,
}

impl AuditLine {
    /// The line as a lockfile records an approved grant (`http: GET https://example.com`).
    pub fn grant_words(&self) -> String {
        format!("{}: {}", self.name, self.scope)
    }
}

/// `list` as `` `a`, `b` ``.
pub(crate) fn quoted(list: &[String]) -> String {
    list.iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
