//! The audit as text for a person: one fact a line, the composition as a tree.

use std::fmt::Write as _;

use super::{AuditReport, Diff};
use crate::imports;

/// `report` as the text `chitin audit` prints, every line ending in a newline.
pub fn render(report: &AuditReport) -> String {
    let mut out = Text::default();
    identity(&mut out, report);
    grants(&mut out, report);
    imports_and_diff(&mut out, report);
    composition(&mut out, report);
    out.0
}

/// Lines of text.
#[derive(Default)]
struct Text(String);

impl Text {
    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        // Writing to a String cannot fail.
        let _ = self.0.write_fmt(args);
        self.0.push('\n');
    }
}

/// Who it is, what it is, who signed it, whether that is trusted, and its tools.
fn identity(out: &mut Text, r: &AuditReport) {
    match &r.component {
        Some(c) => {
            out.line(format_args!("component:   {} {}", c.id, c.version));
            out.line(format_args!("publisher:   {}", c.publisher));
            if !c.description.is_empty() {
                out.line(format_args!("description: {}", c.description));
            }
        }
        None => out.line(format_args!(
            "component:   (no manifest: nothing beyond the WASI base is granted)"
        )),
    }
    out.line(format_args!("file:        {}", r.file.display()));
    out.line(format_args!("size:        {} bytes", r.size));
    out.line(format_args!("hash:        {}", r.hash));
    out.line(format_args!("signers:"));
    match &r.signers {
        Ok(signers) => {
            for s in signers {
                let scope = s
                    .scope
                    .as_ref()
                    .map(|scope| format!(", trusted for {scope}"))
                    .unwrap_or_default();
                out.line(format_args!("  {}: {}{scope}", s.described, s.status));
            }
        }
        Err(e) => out.line(format_args!("  {e}")),
    }
    match &r.trust {
        Ok(publisher) => out.line(format_args!(
            "trust:       TRUSTED (vouched for by {publisher})"
        )),
        Err(why) => out.line(format_args!("trust:       REFUSED: {why}")),
    }
    out.line(format_args!("tools:"));
    match &r.tools {
        Ok(list) => {
            for t in list {
                out.line(format_args!(
                    "  {} [approval: {}]: {}",
                    t.name,
                    format!("{:?}", t.approval).to_lowercase(),
                    t.description.lines().next().unwrap_or_default()
                ));
            }
        }
        Err(why) => out.line(format_args!("  ({why})")),
    }
    if !r.unserved_exports.is_empty() {
        out.line(format_args!(
            "  note: also exports {}, which chitin does not serve: a `{}` component's tools are \
             those its specs() lists",
            r.unserved_exports.join(", "),
            r.tool_interface
        ));
    }
}

/// Every capability with its risk, the policy's cuts, and the limits.
fn grants(out: &mut Text, r: &AuditReport) {
    out.line(format_args!("capabilities:"));
    if r.capabilities.is_empty() {
        out.line(format_args!(
            "  none: runs with the WASI base only (clocks, randomness, its own log)"
        ));
    }
    for c in &r.capabilities {
        out.line(format_args!("  {}: {}", c.name, c.scope));
        out.line(format_args!("    risk: {}", c.risk));
    }
    for cut in &r.cuts {
        out.line(format_args!("  policy cuts {}: {}", cut.what, cut.reason));
    }
    out.line(format_args!(
        "limits (asked -> effective under this policy):"
    ));
    for row in &r.limits {
        out.line(format_args!(
            "  {}: {} -> {}",
            row.key, row.asked, row.effective
        ));
    }
}

/// The imports against the manifest, then the widenings against an earlier version.
fn imports_and_diff(out: &mut Text, r: &AuditReport) {
    match &r.imports {
        None => out.line(format_args!(
            "imports:     not checked: the manifest part alone has no binary to read"
        )),
        Some(check) => {
            if check.uncovered.is_empty() {
                out.line(format_args!(
                    "imports:     all covered by the WASI base or declared capabilities"
                ));
            } else {
                out.line(format_args!(
                    "imports:     NOT COVERED: {}",
                    imports::describe_uncovered(&check.uncovered)
                ));
            }
            for line in &check.linked_without_grant {
                out.line(format_args!("  {line}"));
            }
        }
    }
    if let Some(Diff {
        against,
        version,
        widenings,
    }) = &r.diff
    {
        out.line(format_args!("against {version} ({}):", against.display()));
        if widenings.is_empty() {
            out.line(format_args!("  no widening"));
        }
        for w in widenings {
            out.line(format_args!("  WIDENS {w}"));
        }
    }
}

/// The composition tree: the root, then each library with its signer, hash and grants.
fn composition(out: &mut Text, r: &AuditReport) {
    let Some(root) = &r.component else { return };
    if r.composition.is_empty() && r.composed_by_author.is_empty() {
        return;
    }
    out.line(format_args!("composition:"));
    let signer = r.trust.as_deref().unwrap_or("untrusted");
    out.line(format_args!(
        "  {} {} (this component), {}, signed by {signer}",
        root.id, root.version, r.hash
    ));
    let total = r.composed_by_author.len() + r.composition.len();
    for (i, part) in r.composed_by_author.iter().enumerate() {
        let (branch, rail) = tree_marks(i + 1 == total);
        out.line(format_args!(
            "  {branch} {} {}, composed in by its author (`chitin compose`)",
            part.name, part.version
        ));
        out.line(format_args!(
            "  {rail}   {}, covered by this component's signature",
            part.hash
        ));
    }
    for (i, part) in r.composition.iter().enumerate() {
        let (branch, rail) = tree_marks(r.composed_by_author.len() + i + 1 == total);
        out.line(format_args!(
            "  {branch} {} {}, {}",
            part.name,
            part.version,
            part.how.words()
        ));
        out.line(format_args!(
            "  {rail}   {}, signed by {} ({})",
            part.hash,
            part.publisher.as_deref().unwrap_or("an unnamed publisher"),
            part.signer
        ));
        if part.capabilities.is_empty() {
            out.line(format_args!("  {rail}   grants: none"));
        }
        for c in &part.capabilities {
            out.line(format_args!(
                "  {rail}   {}: {} — {}",
                c.name, c.scope, c.risk
            ));
        }
    }
}

/// The branch and the rail below it, for the last entry of a tree or another.
fn tree_marks(last: bool) -> (&'static str, &'static str) {
    if last {
        ("└─", "  ")
    } else {
        ("├─", "│ ")
    }
}
