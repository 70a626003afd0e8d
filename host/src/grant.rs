//! A component's effective grant: what its manifest asks for, resolved against the operator's
//! policy and this host's services at load. Per-call state is built from it; nothing is granted
//! that is not in it.

use std::collections::BTreeMap;
use std::sync::Arc;

use chitin_registry::manifest::{ApprovalHint, Limit, LimitRequest, Manifest};

pub use crate::capability::Cut;
use crate::capability::{CapabilityError, Load};
use crate::caps::Granted;
use crate::limits::{LimitCeiling, Limits, PolicyLimits};
use crate::policy::Policy;
use crate::services::Services;

/// What one component may use.
#[derive(Debug, Clone)]
pub struct Grant {
    /// The manifest it came from; `None` for a component without one (it gets nothing beyond
    /// the WASI base and logging).
    pub manifest: Option<Arc<Manifest>>,
    /// `namespace/name` from the manifest, made once: every call's state names the component.
    pub(crate) id: Option<Arc<str>>,
    /// Per-call limits: the manifest's requests clamped by the policy.
    pub limits: Limits,
    /// Approval hints per tool.
    pub approvals: BTreeMap<String, ApprovalHint>,
    /// What the policy cut from the manifest's request, and why.
    pub cuts: Vec<Cut>,
    /// Each capability's resolved grant.
    pub capabilities: Granted,
    /// Digest of the policy values that shaped this grant (see [`policy_shape`]).
    pub policy_shape: String,
}

impl Grant {
    /// The grant of a component without a manifest: nothing but the policy's default limits.
    pub fn none(policy: &Policy) -> Self {
        Self {
            manifest: None,
            id: None,
            limits: policy.limits.default,
            approvals: BTreeMap::new(),
            cuts: Vec::new(),
            capabilities: Granted::default(),
            policy_shape: policy_shape(policy),
        }
    }

    /// Resolve `manifest` against `policy` and `services`.
    pub fn resolve(
        manifest: Option<Manifest>,
        policy: &Policy,
        services: &Services,
    ) -> Result<Self, CapabilityError> {
        let Some(manifest) = manifest else {
            return Ok(Self::none(policy));
        };
        // Manifest ∩ policy: a capability the policy does not allow is cut, whatever is asked.
        let (caps, cut) = policy.intersect(&manifest.capabilities);
        let caps = &caps;
        let mut cuts: Vec<Cut> = cut
            .into_iter()
            .map(|name| Cut {
                what: format!("capabilities.{name}"),
                reason: "the policy does not allow this capability (capabilities.allow)".into(),
            })
            .collect();
        cuts.extend(limit_cuts(&manifest.limits, &policy.limits.ceiling));
        let id = manifest.id();
        let load = Load {
            id: &id,
            policy,
            services,
            granted: caps,
        };
        let capabilities = Granted::resolve(&load, &mut cuts)?;
        Ok(Self {
            policy_shape: policy_shape(policy),
            capabilities,
            cuts,
            limits: clamp(&manifest.limits, &policy.limits),
            approvals: manifest
                .tools
                .iter()
                .map(|(name, hints)| (name.clone(), hints.approval))
                .collect(),
            id: Some(id.into()),
            manifest: Some(Arc::new(manifest)),
        })
    }

    /// A digest of the effective grant (the manifest, what the policy cut from it, and every
    /// policy value that shapes what is left): remembered approvals are bound to it, so a
    /// changed grant or a widened policy is asked about again.
    pub fn digest(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        if let Some(manifest) = &self.manifest {
            hasher.update(manifest.to_toml().as_bytes());
        }
        for cut in &self.cuts {
            hasher.update(b"\0cut:");
            hasher.update(cut.what.as_bytes());
        }
        hasher.update(b"\0policy:");
        hasher.update(self.policy_shape.as_bytes());
        hasher.finalize().to_hex().to_string()
    }

    /// The approval hint for `tool`.
    pub fn approval(&self, tool: &str) -> ApprovalHint {
        self.approvals.get(tool).copied().unwrap_or_default()
    }

    /// `namespace/name` from the manifest, if there is one.
    pub fn id(&self) -> Option<&Arc<str>> {
        self.id.as_ref()
    }
}

/// Digest of every policy value that shapes an effective grant: the limits and ceilings, which
/// capabilities may be granted, unconfined processes, the HTTP rules (plain-HTTP hosts, allowed
/// addresses, rate ceilings, CA files) and the key-value quota ceiling. Tool offers and approval
/// rules are left out: they decide whether a call is asked about, not what it may reach. The debug form is used as
/// the encoding; a chitin upgrade that changes it only asks for approvals again.
pub fn policy_shape(policy: &Policy) -> String {
    let shape = format!(
        "limits={:?}\0unconfined={}\0capabilities={:?}\0http={:?}\0kv={:?}",
        policy.limits,
        policy.allow_unconfined_processes,
        policy.capabilities,
        policy.http,
        policy.kv
    );
    blake3::hash(shape.as_bytes()).to_hex().to_string()
}

/// A cut for each requested limit above the policy's ceiling.
fn limit_cuts(asked: &LimitRequest, policy: &LimitCeiling) -> Vec<Cut> {
    Limit::ALL
        .into_iter()
        .filter_map(|limit| {
            let (asked, ceiling) = (asked.get(limit)?, policy.get(limit));
            (asked > ceiling).then(|| Cut {
                what: format!("limits.{}", limit.key()),
                reason: format!("asked {asked}, clamped to the policy's ceiling {ceiling}"),
            })
        })
        .collect()
}

/// Each requested limit, capped at the policy's ceiling; an absent request takes the policy's
/// default.
fn clamp(asked: &LimitRequest, policy: &PolicyLimits) -> Limits {
    let mut limits = policy.default;
    for limit in Limit::ALL {
        if let Some(value) = asked.get(limit) {
            limits.set(limit, value.min(policy.ceiling.get(limit)));
        }
    }
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_clamped_by_the_ceiling_and_absent_ones_take_the_default() {
        let policy = PolicyLimits::default();
        let asked = LimitRequest {
            memory_bytes: Some(policy.ceiling.memory_bytes * 4),
            timeout_ms: Some(1000),
            fuel: Some(policy.default.fuel * 2),
            ..LimitRequest::default()
        };
        let got = clamp(&asked, &policy);
        assert_eq!(got.memory_bytes, policy.ceiling.memory_bytes);
        assert_eq!(got.timeout_ms, 1000);
        assert_eq!(got.fuel, policy.default.fuel * 2);
        assert_eq!(got.output_bytes, policy.default.output_bytes);
        let cuts = limit_cuts(&asked, &policy.ceiling);
        assert_eq!(cuts.len(), 1);
        assert_eq!(cuts[0].what, "limits.memory_bytes");
        assert_eq!(
            cuts[0].reason,
            format!(
                "asked {}, clamped to the policy's ceiling {}",
                policy.ceiling.memory_bytes * 4,
                policy.ceiling.memory_bytes
            )
        );
        assert_eq!(clamp(&LimitRequest::default(), &policy), policy.default);
    }

    #[test]
    fn every_policy_value_that_shapes_a_grant_changes_the_digest() {
        let base = Policy::builtin().unwrap();
        let digest = |policy: &Policy| Grant::none(policy).digest();
        type Widen = fn(&mut Policy);
        let widened: [(&str, Widen); 8] = [
            ("allow_addresses", |p| {
                p.http.allow_addresses.push("127.0.0.1/32".parse().unwrap())
            }),
            ("plain_http_hosts", |p| {
                p.http.plain_http_hosts.push("example.com".into())
            }),
            ("allow_unconfined_processes", |p| {
                p.allow_unconfined_processes = !p.allow_unconfined_processes
            }),
            ("limits.default", |p| p.limits.default.timeout_ms += 1),
            ("limits.ceiling", |p| p.limits.ceiling.timeout_ms += 1),
            ("kv.max_bytes", |p| p.kv.max_bytes += 1),
            ("capabilities.allow", |p| {
                p.capabilities.allow.push("process".into())
            }),
            ("ca_files", |p| p.http.ca_files.push("/lab/ca.pem".into())),
        ];
        for (name, widen) in widened {
            let mut policy = base.clone();
            widen(&mut policy);
            assert_ne!(digest(&policy), digest(&base), "{name}");
        }
        let mut offers = base.clone();
        offers.tools.deny.push("echo".into());
        assert_eq!(
            digest(&offers),
            digest(&base),
            "tool offers do not shape a grant"
        );
    }
}
