//! Key-value storage: `wasi:keyvalue` (store, atomics, batch; the 0.2.0-draft WIT that
//! wasmtime-wasi-keyvalue 48 ships) over the host's state database. A component opens only the
//! buckets its manifest grants (`[capabilities.kv] buckets = [...]`), and its keys live under its
//! own identity, so two components naming the same bucket never see each other's data. Writes
//! are durable before the call returns.

mod store;

use std::sync::Arc;

use chitin_registry::manifest::KvGrant;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

pub use store::{KvError, KvStore, LINGER, Place, Unsettled, Write};

use crate::call::Call;
use crate::capability::{Capability, CapabilityError, Cut, Holds, Load};
use crate::fault::Faults;
use crate::services::{Services, ServicesError};

mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit/deps/keyvalue",
        world: "wasi:keyvalue/imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": super::Bucket,
        },
        trappable_error_type: {
            "wasi:keyvalue/store.error" => super::KvFault,
        },
    });
}

use bindings::wasi::keyvalue::{atomics, batch, store as wit};

/// The key-value capability.
pub struct Kv;

impl Capability for Kv {
    type Section = KvGrant;
    type Config = KvConfig;
    type Ctx = KvCtx;
    const LINKS: &'static [&'static str] = &["wasi:keyvalue/"];

    fn configure(
        section: Option<&KvGrant>,
        load: &Load<'_>,
        _cuts: &mut Vec<Cut>,
    ) -> Result<KvConfig, CapabilityError> {
        configure(
            section,
            load.id,
            load.policy.kv_quota_ceiling(),
            load.services,
        )
        .map_err(CapabilityError::new::<Self>)
    }

    fn ctx(config: &KvConfig, call: &Call<'_>) -> KvCtx {
        KvCtx::new(config, call.faults.clone())
    }

    async fn settle(ctx: &mut KvCtx) {
        let Some(access) = &ctx.config.access else {
            return;
        };
        if let Err(e) = access.store.settle(&mut ctx.unsettled).await {
            ctx.faults.record(e.to_string());
        }
    }

    fn add_to_linker<T: Holds<Self>>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
        fn view<T: Holds<Kv>>(state: &mut T) -> KvView<'_> {
            let (ctx, table) = state.parts();
            KvView { ctx, table }
        }
        wit::add_to_linker::<T, HasKv>(linker, view)?;
        atomics::add_to_linker::<T, HasKv>(linker, view)?;
        batch::add_to_linker::<T, HasKv>(linker, view)?;
        Ok(())
    }
}

/// The key-value store cannot be opened at load.
#[derive(Debug, thiserror::Error)]
#[error("kv grant: {0}")]
pub struct KvGrantError(String);

/// The resolved kv grant: the component's namespace and the buckets it may open.
#[derive(Debug, Clone, Default)]
pub struct KvConfig {
    /// The store and the component's identity, when any bucket is granted.
    access: Option<Access>,
    /// Granted bucket names.
    buckets: Vec<String>,
}

#[derive(Debug, Clone)]
struct Access {
    store: Arc<KvStore>,
    component: Arc<str>,
    quota: u64,
}

/// The component's byte quota: what its manifest asks for (`max_bytes`), clamped to the
/// policy's ceiling; the ceiling when it asks for nothing.
pub fn quota(grant: &KvGrant, policy_max: u64) -> u64 {
    grant
        .max_bytes
        .map_or(policy_max, |asked| asked.min(policy_max))
}

/// Resolve a kv grant for the component `id` (`namespace/name`) under the policy's quota
/// ceiling `policy_max`. The database is not opened here, so a broken one fails only the calls
/// that use it.
pub fn configure(
    grant: Option<&KvGrant>,
    id: &str,
    policy_max: u64,
    services: &Services,
) -> Result<KvConfig, KvGrantError> {
    let Some(grant) = grant.filter(|g| !g.buckets.is_empty()) else {
        return Ok(KvConfig::default());
    };
    let store = services.kv().map_err(|e| KvGrantError(e.to_string()))?;
    Ok(KvConfig {
        access: Some(Access {
            store,
            component: id.into(),
            quota: quota(grant, policy_max),
        }),
        buckets: grant.buckets.clone(),
    })
}

/// The key-value store is this capability's service; the core keeps it without knowing it.
impl Services {
    /// The key-value store over the state database, started on first use.
    pub fn kv(&self) -> Result<Arc<KvStore>, ServicesError> {
        self.shared(|s| KvStore::new(s.state().clone()))
            .map_err(|e| ServicesError::Service(Box::new(e)))
    }
}

/// An open bucket: where its keys live.
pub struct Bucket {
    place: Place,
}

/// Per-call kv state.
#[derive(Debug, Default)]
pub struct KvCtx {
    config: KvConfig,
    faults: Faults,
    /// The call's write applied but not yet committed.
    unsettled: Option<Unsettled>,
}

impl KvCtx {
    /// The call's kv state under `config`, recording database failures in `faults`.
    pub fn new(config: &KvConfig, faults: Faults) -> Self {
        Self {
            config: config.clone(),
            faults,
            unsettled: None,
        }
    }
}

/// What the `wasi:keyvalue` host functions see: the grant and the call's resource table.
pub struct KvView<'a> {
    ctx: &'a mut KvCtx,
    table: &'a mut ResourceTable,
}

struct HasKv;

impl HasData for HasKv {
    type Data<'a> = KvView<'a>;
}

/// How a kv host function fails: a refusal the guest sees as `error::other`, or a trap (a bad
/// resource handle; a database failure, recorded as the call's host fault first).
pub enum KvFault {
    /// Refused; the message goes to the guest.
    Refused(KvError),
    /// Traps.
    Trap(wasmtime::Error),
}

impl From<KvError> for KvFault {
    fn from(e: KvError) -> Self {
        Self::Refused(e)
    }
}

impl From<wasmtime::component::ResourceTableError> for KvFault {
    fn from(e: wasmtime::component::ResourceTableError) -> Self {
        Self::Trap(e.into())
    }
}

type KvResult<T> = Result<T, KvFault>;

impl KvView<'_> {
    /// The store and place of an open bucket.
    fn bucket(&self, bucket: &Resource<Bucket>) -> KvResult<(Arc<KvStore>, Place)> {
        let place = self.table.get(bucket)?.place.clone();
        // A bucket resource exists only if `open` succeeded, which needs access.
        let access = self.ctx.config.access.as_ref().ok_or_else(|| {
            KvFault::Trap(wasmtime::format_err!("kv bucket used without a kv grant"))
        })?;
        Ok((access.store.clone(), place))
    }

    /// One write to an open bucket, after (or joining) the call's unsettled write.
    async fn write(&mut self, bucket: &Resource<Bucket>, write: Write) -> KvResult<u64> {
        let (store, place) = self.bucket(bucket)?;
        Ok(store.write(&place, write, &mut self.ctx.unsettled).await?)
    }
}

impl wit::Host for KvView<'_> {
    async fn open(&mut self, identifier: String) -> KvResult<Resource<Bucket>> {
        let config = &self.ctx.config;
        let access = match &config.access {
            Some(access) if config.buckets.contains(&identifier) => access,
            _ => {
                let granted = if config.buckets.is_empty() {
                    "none".into()
                } else {
                    config.buckets.join(", ")
                };
                return Err(KvError::NotGranted {
                    bucket: identifier,
                    granted,
                }
                .into());
            }
        };
        let place = Place {
            component: access.component.clone(),
            bucket: identifier.into(),
            quota: access.quota,
        };
        Ok(self.table.push(Bucket { place })?)
    }

    fn convert_error(&mut self, err: KvFault) -> wasmtime::Result<wit::Error> {
        match err {
            // The database failed, not the component: the call ends as a host fault rather
            // than handing the component an error it could swallow or misreport.
            KvFault::Refused(e @ KvError::Storage(_)) => {
                Err(self.ctx.faults.record(e.to_string()).into())
            }
            KvFault::Refused(e) => Ok(wit::Error::Other(e.to_string())),
            KvFault::Trap(e) => Err(e),
        }
    }
}

impl wit::HostBucket for KvView<'_> {
    async fn get(&mut self, bucket: Resource<Bucket>, key: String) -> KvResult<Option<Vec<u8>>> {
        let (store, place) = self.bucket(&bucket)?;
        store.settle(&mut self.ctx.unsettled).await?;
        Ok(store.get(&place, &key)?)
    }

    async fn set(&mut self, bucket: Resource<Bucket>, key: String, value: Vec<u8>) -> KvResult<()> {
        self.write(&bucket, Write::Set(vec![(key, value)]))
            .await
            .map(drop)
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> KvResult<()> {
        self.write(&bucket, Write::Delete(vec![key]))
            .await
            .map(drop)
    }

    async fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> KvResult<bool> {
        let (store, place) = self.bucket(&bucket)?;
        store.settle(&mut self.ctx.unsettled).await?;
        Ok(store.get(&place, &key)?.is_some())
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<u64>,
    ) -> KvResult<wit::KeyResponse> {
        let (store, place) = self.bucket(&bucket)?;
        store.settle(&mut self.ctx.unsettled).await?;
        let (keys, cursor) = store.list_keys(&place, cursor.unwrap_or(0))?;
        Ok(wit::KeyResponse { keys, cursor })
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> wasmtime::Result<()> {
        self.table.delete(bucket)?;
        Ok(())
    }
}

impl atomics::Host for KvView<'_> {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: u64,
    ) -> KvResult<u64> {
        self.write(&bucket, Write::Increment(key, delta)).await
    }
}

impl batch::Host for KvView<'_> {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> KvResult<Vec<Option<(String, Vec<u8>)>>> {
        let (store, place) = self.bucket(&bucket)?;
        store.settle(&mut self.ctx.unsettled).await?;
        let values = store.get_many(&place, &keys)?;
        Ok(keys
            .into_iter()
            .zip(values)
            .map(|(key, value)| value.map(|v| (key, v)))
            .collect())
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> KvResult<()> {
        self.write(&bucket, Write::Set(key_values)).await.map(drop)
    }

    async fn delete_many(&mut self, bucket: Resource<Bucket>, keys: Vec<String>) -> KvResult<()> {
        self.write(&bucket, Write::Delete(keys)).await.map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_asks_and_the_policy_caps() {
        let grant = |max_bytes| KvGrant {
            buckets: vec!["b".into()],
            max_bytes,
        };
        assert_eq!(quota(&grant(None), 1000), 1000);
        assert_eq!(quota(&grant(Some(10)), 1000), 10);
        assert_eq!(quota(&grant(Some(5000)), 1000), 1000);
    }
}
