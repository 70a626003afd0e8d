//! What a new version of a manifest asks for beyond the old one: every widening of a capability
//! or a limit. Compared structurally on the TOML form, so a capability section gaining new keys
//! is covered without this module knowing them: a new key, a new list entry, a `false` turned
//! `true`, a larger number or a changed string is a widening.

use toml::Value;

use crate::manifest::Manifest;

/// Each widening from `old` to `new`, as `key: what changed`.
pub fn widenings(old: &Manifest, new: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    let as_value = |m: &Manifest| {
        let caps = Value::try_from(&m.capabilities).unwrap_or(Value::Table(Default::default()));
        let limits = Value::try_from(m.limits).unwrap_or(Value::Table(Default::default()));
        (caps, limits)
    };
    let (old_caps, old_limits) = as_value(old);
    let (new_caps, new_limits) = as_value(new);
    compare("capabilities", Some(&old_caps), &new_caps, true, &mut out);
    // An absent limit means the policy's ceiling, so a limit newly asked for only narrows.
    compare("limits", Some(&old_limits), &new_limits, false, &mut out);
    for (tool, hints) in &new.tools {
        if let Some(before) = old.tools.get(tool)
            && hints.approval < before.approval
        {
            out.push(format!(
                "tools.{tool}.approval: relaxed from {:?} to {:?}",
                before.approval, hints.approval
            ));
        }
    }
    out
}

fn compare(
    key: &str,
    old: Option<&Value>,
    new: &Value,
    absent_is_narrower: bool,
    out: &mut Vec<String>,
) {
    let Some(old) = old else {
        if absent_is_narrower {
            out.push(format!("{key}: added {new}"));
        }
        return;
    };
    match (old, new) {
        (Value::Table(o), Value::Table(n)) => {
            for (k, v) in n {
                compare(&format!("{key}.{k}"), o.get(k), v, absent_is_narrower, out);
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            for item in n.iter().filter(|item| !o.contains(item)) {
                out.push(format!("{key}: adds {item}"));
            }
        }
        (Value::Boolean(false), Value::Boolean(true)) => {
            out.push(format!("{key}: turned on"));
        }
        (Value::Integer(o), Value::Integer(n)) if n > o => {
            out.push(format!("{key}: raised from {o} to {n}"));
        }
        (Value::String(o), Value::String(n)) if o != n => {
            out.push(format!("{key}: changed from {o:?} to {n:?}"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: &str) -> Manifest {
        Manifest::parse(&format!(
            "schema = 1\n[component]\nname = \"w\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn narrowing_or_equal_is_not_a_widening() {
        let files = "[capabilities.files]\npaths = [{ path = \"docs\", access = \"read-only\" }]\n";
        assert!(widenings(&manifest(files), &manifest(files)).is_empty());
        assert!(widenings(&manifest(files), &manifest("")).is_empty());
        assert!(widenings(&manifest(""), &manifest("[limits]\nfuel = 5\n")).is_empty());
    }

    #[test]
    fn every_widening_is_named() {
        let old = manifest(
            "[capabilities.files]\npaths = [{ path = \"docs\", access = \"read-only\" }]\n\
             [limits]\ntimeout_ms = 1000\n",
        );
        let new = manifest(
            "[capabilities.files]\npaths = [{ path = \"docs\", access = \"read-write\" }]\n\
             [capabilities.env]\nkeys = [\"HOME\"]\n[limits]\ntimeout_ms = 5000\n",
        );
        let list = widenings(&old, &new);
        let text = list.join("\n");
        assert!(text.contains("capabilities.files.paths: adds"), "{text}");
        assert!(text.contains("capabilities.env: added"), "{text}");
        assert!(
            text.contains("limits.timeout_ms: raised from 1000 to 5000"),
            "{text}"
        );
        assert_eq!(list.len(), 3, "{text}");
    }
}
