//! Remembered approvals: "always allow this tool with these grants", kept in the shared database
//! and bound to the component's content hash and the digest of its effective grant. A new
//! version, or a manifest or policy change that alters the grant, no longer matches: the person
//! is asked again. An approval given under an OAuth token is that token holder's alone
//! ([`crate::approver::Consenter`]); the operator's cover the operator's channels.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::record_table::{self, TableError};
use crate::state_db::{Records, StateDb, StateError};

/// `component/tool` (the operator's), or `component/tool holder` (an OAuth token holder's) →
/// JSON [`Approval`].
const TABLE: Records = Records::Approvals;

/// The approvals table could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("approvals database: {0}")]
pub struct ApprovalStoreError(String);

impl From<StateError> for ApprovalStoreError {
    fn from(e: StateError) -> Self {
        Self(e.to_string())
    }
}

impl From<TableError> for ApprovalStoreError {
    fn from(e: TableError) -> Self {
        match e {
            TableError::Db(e) => e.into(),
            TableError::Corrupt { key, reason } => Self(format!(
                "the remembered approval of {key} cannot be read ({reason}); \
                 `chitin approvals revoke {}` forgets it",
                shlex::try_quote(&key).unwrap_or_else(|_| key.as_str().into())
            )),
        }
    }
}

/// One remembered approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// The component (`namespace/name`).
    pub component: String,
    /// The tool.
    pub tool: String,
    /// The component version approved, as its manifest names it (empty without one).
    pub version: String,
    /// Content hash of the approved artifact.
    pub hash: String,
    /// Digest of the effective grant approved (manifest ∩ policy).
    pub grant: String,
    /// Who approved.
    pub user: String,
    /// The OAuth token holder whose calls it covers; none: the operator's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<String>,
    /// When, in seconds since the Unix epoch.
    pub approved_at: u64,
}

impl Approval {
    fn key(&self) -> String {
        key(&self.component, &self.tool, self.holder.as_deref())
    }
}

/// The record key of `tool` of `component` for `holder`. Neither a component's nor a tool's
/// name holds a space, so the holder is told apart from both.
fn key(component: &str, tool: &str, holder: Option<&str>) -> String {
    match holder {
        None => format!("{component}/{tool}"),
        Some(holder) => format!("{component}/{tool} {holder}"),
    }
}

/// The approvals kept in the database.
#[derive(Clone)]
pub struct ApprovalStore {
    db: Arc<StateDb>,
}

impl ApprovalStore {
    /// The store in `db`.
    pub fn new(db: Arc<StateDb>) -> Self {
        Self { db }
    }

    /// Remember `approval`, replacing any earlier one for the same tool.
    pub fn remember(&self, approval: &Approval) -> Result<(), ApprovalStoreError> {
        let json =
            serde_json::to_string(approval).map_err(|e| ApprovalStoreError(e.to_string()))?;
        Ok(record_table::put(&self.db, TABLE, &approval.key(), &json)?)
    }

    /// Whether `tool` of `component` was approved for exactly this artifact and grant, by
    /// `holder` (`None`: by the operator).
    pub fn covers(
        &self,
        component: &str,
        tool: &str,
        hash: &str,
        grant: &str,
        holder: Option<&str>,
    ) -> Result<bool, ApprovalStoreError> {
        let key = key(component, tool, holder);
        let approval: Option<Approval> = record_table::read_one(&self.db, TABLE, &key)?;
        Ok(approval.is_some_and(|a| {
            a.component == component
                && a.tool == tool
                && a.hash == hash
                && a.grant == grant
                && a.holder.as_deref() == holder
        }))
    }

    /// Every remembered approval, sorted by component and tool.
    pub fn list(&self) -> Result<Vec<Approval>, ApprovalStoreError> {
        Ok(record_table::read_all(&self.db, TABLE)?)
    }

    /// Forget the approvals of `selector`: a tool name, a component (`namespace/name`) or
    /// `component/tool`, whoever gave them, or one key as listed. Returns the keys removed.
    /// Works on the keys alone, so a record that no longer parses can be removed too.
    pub fn revoke(&self, selector: &str) -> Result<Vec<String>, ApprovalStoreError> {
        let matching: Vec<String> = record_table::keys(&self.db, TABLE)?
            .into_iter()
            .filter(|key| {
                let of = key.split_once(' ').map_or(key.as_str(), |(of, _)| of);
                let (component, tool) = of.rsplit_once('/').unwrap_or(("", of));
                tool == selector || component == selector || of == selector || key == selector
            })
            .collect();
        if matching.is_empty() {
            return Ok(matching);
        }
        record_table::remove(&self.db, TABLE, matching.iter().map(String::as_str))?;
        Ok(matching)
    }
}

/// Seconds since the Unix epoch, now.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval(tool: &str, hash: &str) -> Approval {
        Approval {
            component: "acme/weather".into(),
            tool: tool.into(),
            version: "1.0.0".into(),
            hash: hash.into(),
            grant: "g1".into(),
            user: "local".into(),
            holder: None,
            approved_at: now(),
        }
    }

    #[test]
    fn approvals_are_bound_to_hash_and_grant_and_can_be_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        let store = ApprovalStore::new(db);
        assert!(store.list().unwrap().is_empty());
        store.remember(&approval("forecast", "h1")).unwrap();
        assert!(
            store
                .covers("acme/weather", "forecast", "h1", "g1", None)
                .unwrap()
        );
        assert!(
            !store
                .covers("acme/weather", "forecast", "h2", "g1", None)
                .unwrap()
        );
        assert!(
            !store
                .covers("acme/weather", "forecast", "h1", "g2", None)
                .unwrap()
        );
        store.remember(&approval("alerts", "h1")).unwrap();
        assert_eq!(store.list().unwrap().len(), 2);
        let removed = store.revoke("forecast").unwrap();
        assert_eq!(removed.len(), 1);
        assert!(
            !store
                .covers("acme/weather", "forecast", "h1", "g1", None)
                .unwrap()
        );
        assert_eq!(store.revoke("acme/weather").unwrap().len(), 1);
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn an_approval_covers_only_whoever_gave_it_and_a_revoke_takes_everyones() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        let store = ApprovalStore::new(db);
        let alice = r#"oauth:"app" for "alice""#;
        let by = |holder: Option<&str>| Approval {
            holder: holder.map(str::to_owned),
            ..approval("forecast", "h1")
        };
        let covers = |holder| {
            store
                .covers("acme/weather", "forecast", "h1", "g1", holder)
                .unwrap()
        };
        store.remember(&by(Some(alice))).unwrap();
        assert!(covers(Some(alice)));
        assert!(!covers(None), "a holder's approval is not the operator's");
        assert!(!covers(Some(r#"oauth:"app" for "bob""#)));
        store.remember(&by(None)).unwrap();
        assert!(covers(None));
        assert!(
            !covers(Some(r#"oauth:"app" for "bob""#)),
            "nor the operator's a holder's"
        );
        assert_eq!(store.list().unwrap().len(), 2);
        // One key as listed takes one; the tool takes everyone's.
        let alices = format!("acme/weather/forecast {alice}");
        assert_eq!(
            store.revoke(&alices).unwrap(),
            std::slice::from_ref(&alices)
        );
        store.remember(&by(Some(alice))).unwrap();
        let mut removed = store.revoke("forecast").unwrap();
        removed.sort();
        assert_eq!(removed, ["acme/weather/forecast".to_owned(), alices]);
        assert!(store.list().unwrap().is_empty());
    }

    #[test]
    fn a_holders_approval_that_does_not_parse_names_its_key_quoted_for_a_shell() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        let key = r#"acme/weather/forecast oauth:"app" for "alice""#;
        record_table::put(&db, TABLE, key, "[1, 2").unwrap();
        let store = ApprovalStore::new(db);
        let err = store
            .covers(
                "acme/weather",
                "forecast",
                "h1",
                "g1",
                Some(r#"oauth:"app" for "alice""#),
            )
            .unwrap_err();
        assert!(
            err.to_string().contains(
                r#"`chitin approvals revoke 'acme/weather/forecast oauth:"app" for "alice"'`"#
            ),
            "{err}"
        );
    }

    #[test]
    fn an_approval_that_does_not_parse_refuses_naming_the_fix_and_can_be_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(StateDb::new(&dir.path().join("db.sqlite")));
        record_table::put(&db, TABLE, "acme/weather/forecast", "[1, 2").unwrap();
        let store = ApprovalStore::new(db);
        let err = store
            .covers("acme/weather", "forecast", "h1", "g1", None)
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("`chitin approvals revoke acme/weather/forecast`"),
            "{err}"
        );
        assert!(store.list().is_err());
        assert_eq!(
            store.revoke("acme/weather/forecast").unwrap(),
            ["acme/weather/forecast"]
        );
        assert!(store.list().unwrap().is_empty());
    }
}
