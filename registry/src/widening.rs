//! What a new version of a manifest asks for beyond the old one: every widening of a capability
//! or a limit, compared per capability on the typed grant with each default made explicit (an
//! absent limit is the policy's ceiling, empty HTTP methods are GET and HEAD, an absent port is
//! the scheme's). Anything the old grant does not cover is a widening; a narrowing is none.

use std::collections::BTreeSet;

use crate::capability::SECTIONS;
use crate::manifest::{Limit, LimitRequest, Manifest};

/// Each widening from `old` to `new`, as `key: what changed`.
pub fn widenings(old: &Manifest, new: &Manifest) -> Vec<String> {
    let mut out = Vec::new();
    for section in SECTIONS {
        (section.widenings)(&old.capabilities, &new.capabilities, &mut out);
    }
    limits(&old.limits, &new.limits, &mut out);
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

/// Each item of `new` not in `old`, reported under `key` as `adds what `item``.
pub(crate) fn added<'a>(
    key: &str,
    what: &str,
    old: impl IntoIterator<Item = &'a String>,
    new: impl IntoIterator<Item = &'a String>,
    out: &mut Vec<String>,
) {
    let old: BTreeSet<&String> = old.into_iter().collect();
    for item in new {
        if !old.contains(item) {
            out.push(format!("{key}: adds {what} `{item}`"));
        }
    }
}

/// A limit where absent means the policy's ceiling: removing it or raising it widens.
/// `existed`: whether the section holding it was there before (a new section's limits are
/// part of what it adds, reported with it).
pub(crate) fn limit(
    key: &str,
    old: Option<u64>,
    new: Option<u64>,
    existed: bool,
    out: &mut Vec<String>,
) {
    match (old, new) {
        (Some(o), None) if existed => out.push(format!(
            "{key}: removed (was {o}; now the policy's ceiling)"
        )),
        (Some(o), Some(n)) if n > o => out.push(format!("{key}: raised from {o} to {n}")),
        _ => {}
    }
}

fn limits(old: &LimitRequest, new: &LimitRequest, out: &mut Vec<String>) {
    for key in Limit::ALL {
        let field = format!("limits.{}", key.key());
        limit(&field, old.get(key), new.get(key), true, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(extra: &str) -> Manifest {
        Manifest::parse(&format!(
            "schema = 1\n[component]\nname = \"w\"\nnamespace = \"acme\"\nversion = \"1.0.0\"\n\
             publisher = \"acme\"\n[capabilities.secrets]\nnames = [\"tok_*\", \"key\"]\n{extra}"
        ))
        .unwrap()
    }

    /// The widenings from `old` to `new` (manifest sections), and those back from `new` to
    /// `old`, which must be none: each case is a widening one way and a narrowing the other.
    fn both_ways(old: &str, new: &str) -> Vec<String> {
        let (o, n) = (manifest(old), manifest(new));
        let back = widenings(&n, &o);
        assert!(
            back.is_empty(),
            "narrowing {new:?} -> {old:?} widens: {back:?}"
        );
        widenings(&o, &n)
    }

    fn assert_widens(old: &str, new: &str, expect: &str) {
        let w = both_ways(old, new);
        assert!(
            w.iter().any(|x| x.contains(expect)),
            "{old:?} -> {new:?}: expected `{expect}` among {w:?}"
        );
    }

    #[test]
    fn the_same_manifest_widens_nothing() {
        let all = "[capabilities.files]\npaths = [{ path = \"docs\", access = \"read-only\" }]\n\
                   [capabilities.kv]\nbuckets = [\"b\"]\n\
                   [capabilities.http]\nallow = [{ host = \"*.example.com\", methods = [\"POST\"] }]\n\
                   [capabilities.process]\nprograms = [\"git\"]\nread_only = true\n\
                   [capabilities.env]\nkeys = [\"LANG\"]\n\
                   [capabilities.invoke]\ntools = { fmt = \"json_format\" }\n\
                   [limits]\nfuel = 10\n";
        assert!(widenings(&manifest(all), &manifest(all)).is_empty());
    }

    #[test]
    fn files_paths_and_access() {
        let ro = |p: &str| {
            format!(
                "[capabilities.files]\npaths = [{{ path = \"{p}\", access = \"read-only\" }}]\n"
            )
        };
        let rw = |p: &str| {
            format!(
                "[capabilities.files]\npaths = [{{ path = \"{p}\", access = \"read-write\" }}]\n"
            )
        };
        assert_widens("", &ro("docs"), "adds read-only `docs`");
        assert_widens(&ro("docs/a"), &ro("docs"), "adds read-only `docs`");
        assert_widens(&ro("docs"), &ro("."), "adds read-only `.`");
        assert_widens(&ro("docs"), &rw("docs"), "from read-only to read-write");
        // A different path is a widening both ways.
        let w = widenings(&manifest(&rw("docs")), &manifest(&rw("src")));
        assert!(w[0].contains("adds read-write `src`"), "{w:?}");
        assert!(widenings(&manifest(&ro(".")), &manifest(&ro("./docs/"))).is_empty());
    }

    #[test]
    fn kv_buckets() {
        let b = |list: &str| format!("[capabilities.kv]\nbuckets = [{list}]\n");
        assert_widens("", &b("\"a\""), "adds bucket `a`");
        assert_widens(&b("\"a\""), &b("\"a\", \"b\""), "adds bucket `b`");
    }

    #[test]
    fn kv_quota_raised_or_removed() {
        let q = |max: &str| format!("[capabilities.kv]\nbuckets = [\"a\"]\n{max}\n");
        assert_widens(
            &q("max_bytes = 1024"),
            &q("max_bytes = 4096"),
            "capabilities.kv.max_bytes: raised from 1024 to 4096",
        );
        assert_widens(
            &q("max_bytes = 1024"),
            &q(""),
            "capabilities.kv.max_bytes: removed (was 1024; now the policy's ceiling)",
        );
        // Lowering it, or keeping it, asks nothing (`assert_widens` checks the way back too).
        assert!(
            widenings(
                &manifest(&q("max_bytes = 4096")),
                &manifest(&q("max_bytes = 10"))
            )
            .is_empty()
        );
        assert!(widenings(&manifest(&q("")), &manifest(&q("max_bytes = 10"))).is_empty());
        assert!(
            widenings(
                &manifest(&q("max_bytes = 10")),
                &manifest(&q("max_bytes = 10"))
            )
            .is_empty()
        );
    }

    #[test]
    fn http_hosts_ports_prefixes_schemes_and_methods() {
        let allow = |entry: &str| format!("[capabilities.http]\nallow = [{{ host = {entry} }}]\n");
        assert_widens(
            "",
            &allow("\"api.example.com\""),
            "adds https://api.example.com",
        );
        assert_widens(
            &allow("\"api.example.com\""),
            &allow("\"*.example.com\""),
            "adds https://*.example.com",
        );
        assert_widens(
            &allow("\"*.api.example.com\""),
            &allow("\"*.example.com\""),
            "adds",
        );
        assert_widens(
            &allow("\"api.example.com\""),
            &allow("\"*\""),
            "adds https://*",
        );
        let w = widenings(
            &manifest(&allow("\"a.example.com\", port = 8443")),
            &manifest(&allow("\"a.example.com\", port = 9000")),
        );
        assert!(w[0].contains("adds https://a.example.com:9000"), "{w:?}");
        assert_widens(
            &allow("\"a.example.com\""),
            &allow("\"a.example.com\", scheme = \"http\""),
            "adds http://a.example.com",
        );
        assert_widens(
            &allow("\"a.example.com\", path_prefix = \"/v1/repos\""),
            &allow("\"a.example.com\", path_prefix = \"/v1\""),
            "adds https://a.example.com/v1",
        );
        assert_widens(
            &allow("\"a.example.com\", path_prefix = \"/v1\""),
            &allow("\"a.example.com\""),
            "adds https://a.example.com",
        );
        assert_widens(
            &allow("\"a.example.com\", methods = [\"GET\"]"),
            &allow("\"a.example.com\", methods = [\"GET\", \"POST\"]"),
            "adds method POST",
        );
        assert_widens(
            &allow("\"a.example.com\", methods = [\"GET\"]"),
            &allow("\"a.example.com\""),
            "adds method HEAD (empty methods mean GET and HEAD)",
        );
        assert!(
            both_ways(
                &allow("\"a.example.com\", methods = [\"get\", \"head\"]"),
                &allow("\"a.example.com\", port = 443"),
            )
            .is_empty()
        );
    }

    #[test]
    fn http_rate_limits_and_credentials() {
        let rate =
            |r: &str| format!("[capabilities.http]\nallow = [{{ host = \"a.example.com\" }}]\n{r}");
        assert_widens(
            &rate("rate_limit = { per_minute = 10 }\n"),
            &rate(""),
            "per_minute: removed",
        );
        assert_widens(
            &rate("rate_limit = { per_hour = 10 }\n"),
            &rate("rate_limit = { per_hour = 20 }\n"),
            "per_hour: raised from 10 to 20",
        );
        let cred = |hosts: &str| {
            rate(&format!(
                "[[capabilities.http.credentials]]\nsecret = \"tok_a\"\nhosts = [{hosts}]\n\
                 inject = \"bearer\"\n"
            ))
        };
        assert_widens(
            &rate(""),
            &cred("\"a.example.com\""),
            "injects secret `tok_a`",
        );
        assert_widens(
            &cred("\"a.example.com\""),
            &cred("\"a.example.com\", \"b.example.com\""),
            "into requests to a.example.com, b.example.com",
        );
    }

    #[test]
    fn secret_globs() {
        let s = |names: &str| {
            format!(
                "schema = 1\n[component]\nname = \"w\"\nnamespace = \"acme\"\n\
                 version = \"1.0.0\"\npublisher = \"acme\"\n[capabilities.secrets]\nnames = [{names}]\n"
            )
        };
        let m = |t: String| Manifest::parse(&t).unwrap();
        let w = widenings(&m(s("\"tok_a\"")), &m(s("\"tok_*\"")));
        assert!(w[0].contains("adds secret glob `tok_*`"), "{w:?}");
        assert!(widenings(&m(s("\"tok_*\"")), &m(s("\"tok_a\""))).is_empty());
        let w = widenings(&m(s("\"tok_a\"")), &m(s("\"tok_a\", \"key_b\"")));
        assert!(w[0].contains("`key_b`"), "{w:?}");
    }

    #[test]
    fn process_programs_env_and_switches() {
        let p = |extra: &str| format!("[capabilities.process]\nprograms = [\"git\"]\n{extra}");
        assert_widens("", &p(""), "capabilities.process: added: may run `git`");
        assert_widens(
            &p(""),
            "[capabilities.process]\nprograms = [\"git\", \"sh\"]\n",
            "adds program `sh`",
        );
        assert_widens(&p(""), &p("env = [\"LANG\"]\n"), "adds env key `LANG`");
        assert_widens(&p(""), &p("network = true\n"), "network: turned on");
        assert_widens(&p("read_only = true\n"), &p(""), "read_only: turned off");
    }

    #[test]
    fn client_methods() {
        let c = |methods: &str| format!("[capabilities.client]\nmethods = [{methods}]\n");
        assert_widens(
            "",
            &c("\"elicit\""),
            "capabilities.client.methods: adds `elicit`",
        );
        assert_widens(
            &c("\"elicit\""),
            &c("\"elicit\", \"sample\""),
            "capabilities.client.methods: adds `sample`",
        );
    }

    #[test]
    fn env_keys() {
        let e = |keys: &str| format!("[capabilities.env]\nkeys = [{keys}]\n");
        assert_widens("", &e("\"LANG\""), "adds env key `LANG`");
        assert_widens(&e("\"LANG\""), &e("\"LANG\", \"TZ\""), "adds env key `TZ`");
    }

    #[test]
    fn invoke_aliases() {
        let i = |tools: &str| format!("[capabilities.invoke]\ntools = {{ {tools} }}\n");
        assert_widens("", &i("fmt = \"json_format\""), "adds alias `fmt`");
        assert_widens(
            &i("fmt = \"json_format\""),
            &i("fmt = \"json_format\", sh = \"shell\""),
            "adds alias `sh`",
        );
        let w = widenings(
            &manifest(&i("fmt = \"json_format\"")),
            &manifest(&i("fmt = \"shell\"")),
        );
        assert!(
            w[0].contains("now calls `shell` instead of `json_format`"),
            "{w:?}"
        );
    }

    #[test]
    fn limits_removed_or_raised() {
        let l = |v: &str| format!("[limits]\n{v}\n");
        assert_widens(&l("timeout_ms = 1000"), "", "limits.timeout_ms: removed");
        assert_widens(
            &l("fuel = 5"),
            &l("fuel = 50"),
            "limits.fuel: raised from 5 to 50",
        );
        assert_widens(
            &l("memory_bytes = 1024"),
            &l("memory_bytes = 2048"),
            "limits.memory_bytes",
        );
        assert_widens(
            &l("output_bytes = 10"),
            &l("output_bytes = 20"),
            "limits.output_bytes",
        );
    }

    #[test]
    fn relaxed_approval_hints() {
        let t = |a: &str| format!("[tools.run]\napproval = \"{a}\"\n");
        assert_widens(&t("always"), &t("ask"), "tools.run.approval: relaxed");
        assert_widens(&t("ask"), &t("never"), "tools.run.approval: relaxed");
    }
}
