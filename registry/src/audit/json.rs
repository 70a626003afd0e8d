//! The audit as JSON, for tools that read it.

use serde_json::{Value, json};

use super::{AuditLine, AuditReport, LibraryPart};

/// `report` as the JSON `chitin audit --json` prints.
pub fn render(r: &AuditReport) -> Value {
    let component = r.component.as_ref();
    let imports = r.imports.as_ref();
    json!({
        "file": r.file.to_string_lossy(),
        "component": component.map(|c| &c.id),
        "version": component.map(|c| c.version.to_string()),
        "publisher": component.map(|c| &c.publisher),
        "description": component.map(|c| &c.description),
        "hash": r.hash.to_string(),
        "size": r.size,
        "signers": r.signers.as_ref().map(|signers| signers.iter().map(|s| json!({
            "key_id": s.key_id,
            "publisher": s.publisher,
            "fingerprint": s.fingerprint,
            "scope": s.scope,
            "status": s.status,
        })).collect::<Vec<_>>()).unwrap_or_default(),
        "trusted": r.trust.is_ok(),
        "refusal": r.trust.as_ref().err(),
        "tools": match &r.tools {
            Ok(list) => json!(list.iter().map(|t| json!({"name": t.name, "description": t.description})).collect::<Vec<_>>()),
            Err(why) => json!({"not_listed": why}),
        },
        "unserved_exports": r.unserved_exports,
        "capabilities": lines(&r.capabilities),
        "limits": r.limits.iter().map(|row| {
            (row.key.to_owned(), json!({"asked": row.asked, "effective": row.effective}))
        }).collect::<serde_json::Map<_, _>>(),
        "policy_cuts": r.cuts.iter().map(|c| json!({"what": c.what, "reason": c.reason})).collect::<Vec<_>>(),
        "imports": imports.map(|i| &i.all),
        "uncovered_imports": imports.map(|i| i.uncovered.iter().map(|(import, _)| import).collect::<Vec<_>>()).unwrap_or_default(),
        "linked_without_grant": imports.map(|i| i.linked_without_grant.as_slice()).unwrap_or_default(),
        "diff": r.diff.as_ref().map(|d| json!({"against": d.against.to_string_lossy(), "version": d.version, "widenings": d.widenings})),
        "composition": r.composition.iter().map(part).collect::<Vec<_>>(),
        "composed_by_author": r.composed_by_author.iter().map(|p| json!({"component": p.name, "version": p.version.to_string(), "hash": p.hash})).collect::<Vec<_>>(),
    })
}

fn lines(lines: &[AuditLine]) -> Vec<Value> {
    lines
        .iter()
        .map(|c| json!({"capability": c.name, "scope": c.scope, "risk": c.risk}))
        .collect()
}

fn part(p: &LibraryPart) -> Value {
    json!({
        "component": p.name,
        "version": p.version,
        "hash": p.hash,
        "signer": p.signer,
        "publisher": p.publisher,
        "use": p.how.words(),
        "capabilities": lines(&p.capabilities),
    })
}
