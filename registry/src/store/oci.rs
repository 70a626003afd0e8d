//! OCI registries, with the CNCF wasm artifact layout (the one `oci-wasm` and `wkg` write):
//! each version is the repository `[<prefix>/]<namespace>/<name>` tagged with the version, one
//! `application/wasm` layer under an `application/vnd.wasm.config.v0+json` config. The index is
//! an artifact of its own at `[<prefix>/]chitin-index/index:latest`, since OCI has no search.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use super::{Auth, Entry, Index, Location, StoreError, check_overwrite};
use crate::artifact::{ArtifactError, WitWorld};
use crate::compose::chain;

/// The media type of a component's layer.
pub const WASM_LAYER_MEDIA_TYPE: &str = "application/wasm";
/// The media type of a component artifact's config.
pub const WASM_CONFIG_MEDIA_TYPE: &str = "application/vnd.wasm.config.v0+json";

/// The repository (under the prefix) that holds the index.
pub const INDEX_REPOSITORY: &str = "chitin-index/index";
/// The media type of the index layer.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.chitin.index.v1+json";
/// The media type of the index artifact's config.
pub const INDEX_CONFIG_MEDIA_TYPE: &str = "application/vnd.chitin.index.config.v1+json";

/// An OCI registry.
pub struct OciRegistry {
    name: String,
    registry: String,
    prefix: Option<String>,
    auth: RegistryAuth,
    client: Client,
}

impl OciRegistry {
    /// A client for the registry at `location` (an OCI one), shown as `name`.
    pub fn new(name: &str, location: &Location, auth: Auth) -> Result<Self, StoreError> {
        let Location::Oci {
            registry,
            prefix,
            plain_http,
        } = location
        else {
            return Err(StoreError::Location(format!(
                "{location} is not an OCI registry"
            )));
        };
        let config = ClientConfig {
            protocol: if *plain_http {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            ..ClientConfig::default()
        };
        Ok(Self {
            name: name.to_owned(),
            registry: registry.clone(),
            prefix: prefix.clone(),
            auth: match auth {
                Auth::Anonymous => RegistryAuth::Anonymous,
                Auth::Basic { username, password } => RegistryAuth::Basic(username, password),
                Auth::Bearer(token) => RegistryAuth::Bearer(token),
            },
            client: Client::new(config),
        })
    }

    /// How it is shown.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn reference(&self, repository: &str, tag: &str) -> Reference {
        let repository = match &self.prefix {
            Some(p) => format!("{p}/{repository}"),
            None => repository.to_owned(),
        };
        Reference::with_tag(self.registry.clone(), repository, tag.to_owned())
    }

    /// The index; empty when the registry has none yet.
    pub async fn index(&self) -> Result<Index, StoreError> {
        let reference = self.reference(INDEX_REPOSITORY, "latest");
        match self
            .client
            .pull(&reference, &self.auth, vec![INDEX_MEDIA_TYPE])
            .await
        {
            Ok(image) => {
                let layer = image.layers.first().ok_or_else(|| StoreError::Malformed {
                    registry: self.name.clone(),
                    reason: "the index artifact has no layer".into(),
                })?;
                Index::parse(&layer.data).map_err(|reason| StoreError::Malformed {
                    registry: self.name.clone(),
                    reason: format!("index: {reason}"),
                })
            }
            Err(e) => match self.error(e, "the index") {
                StoreError::NotFound { .. } => Ok(Index::new()),
                other => Err(other),
            },
        }
    }

    /// Push the artifact, then the index that names it.
    pub async fn publish(
        &self,
        bytes: &[u8],
        entry: Entry,
        replace: bool,
    ) -> Result<(), StoreError> {
        let mut index = self.index().await?;
        check_overwrite(&self.name, &index, &entry, replace)?;
        let config = wasm_config(bytes).map_err(|e| StoreError::Other {
            registry: self.name.clone(),
            reason: format!("cannot describe {} as a wasm artifact: {e}", entry.label()),
        })?;
        let layers = [ImageLayer::new(
            bytes.to_vec(),
            WASM_LAYER_MEDIA_TYPE.to_owned(),
            None,
        )];
        let reference = self.reference(&entry.name, &entry.version.to_string());
        self.push(&reference, &layers, config)
            .await
            .map_err(|e| self.error(e, &entry.label()))?;
        index.upsert(entry);
        let layer = ImageLayer::new(index.to_json(), INDEX_MEDIA_TYPE.to_owned(), None);
        let config = Config::new(b"{}".to_vec(), INDEX_CONFIG_MEDIA_TYPE.to_owned(), None);
        self.push(
            &self.reference(INDEX_REPOSITORY, "latest"),
            &[layer],
            config,
        )
        .await
        .map_err(|e| self.error(e, "the index"))?;
        Ok(())
    }

    /// Push one artifact: `layers` under `config`, with a manifest that names its media type
    /// (registries may require it).
    async fn push(
        &self,
        reference: &Reference,
        layers: &[ImageLayer],
        config: Config,
    ) -> Result<(), OciDistributionError> {
        let mut manifest = OciImageManifest::build(layers, &config, None);
        manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
        self.client
            .push(reference, layers, config, &self.auth, Some(manifest))
            .await
            .map(|_| ())
    }

    /// The artifact's bytes; the layer's digest is checked while it downloads.
    pub async fn fetch(&self, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        let reference = self.reference(&entry.name, &entry.version.to_string());
        let image = self
            .client
            .pull(&reference, &self.auth, vec![WASM_LAYER_MEDIA_TYPE])
            .await
            .map_err(|e| self.error(e, &entry.label()))?;
        if image.config.media_type != WASM_CONFIG_MEDIA_TYPE {
            return Err(StoreError::Malformed {
                registry: self.name.clone(),
                reason: format!(
                    "{} has a `{}` config, not `{WASM_CONFIG_MEDIA_TYPE}`",
                    entry.label(),
                    image.config.media_type
                ),
            });
        }
        let mut layers = image.layers.into_iter();
        match (layers.next(), layers.next()) {
            (Some(layer), None) if layer.media_type == WASM_LAYER_MEDIA_TYPE => {
                Ok(layer.data.to_vec())
            }
            _ => Err(StoreError::Malformed {
                registry: self.name.clone(),
                reason: format!(
                    "{} is not one `{WASM_LAYER_MEDIA_TYPE}` layer",
                    entry.label()
                ),
            }),
        }
    }

    /// Classify an `oci-client` error about `what`.
    fn error(&self, e: OciDistributionError, what: &str) -> StoreError {
        let registry = self.name.clone();
        let not_found = || StoreError::NotFound {
            registry: registry.clone(),
            what: what.to_owned(),
        };
        match e {
            OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
                StoreError::Unreachable {
                    registry,
                    reason: chain(&e),
                }
            }
            OciDistributionError::RequestError(e) => StoreError::Unreachable {
                registry,
                reason: format!("the transfer of {what} failed: {}", chain(&e)),
            },
            OciDistributionError::AuthenticationFailure(reason) => {
                StoreError::Auth { registry, reason }
            }
            OciDistributionError::UnauthorizedError { url } => StoreError::Auth {
                registry,
                reason: format!("not authorized for {url}"),
            },
            OciDistributionError::ImageManifestNotFoundError(_) => not_found(),
            OciDistributionError::ServerError { code: 404, .. } => not_found(),
            OciDistributionError::ServerError {
                code: 401 | 403,
                url,
                ..
            } => StoreError::Auth {
                registry,
                reason: format!("not authorized for {url}"),
            },
            OciDistributionError::RegistryError { envelope, url } => {
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::NotFound
                            | OciErrorCode::BlobUnknown
                    )
                }) {
                    not_found()
                } else if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    StoreError::Auth {
                        registry,
                        reason: format!("not authorized for {url}"),
                    }
                } else {
                    StoreError::Other {
                        registry,
                        reason: format!("{what}: {envelope}"),
                    }
                }
            }
            OciDistributionError::DigestError(e) => StoreError::DigestMismatch {
                registry,
                what: what.to_owned(),
                expected: "the digest its manifest names".into(),
                found: e.to_string(),
            },
            other => StoreError::Other {
                registry,
                reason: format!("{what}: {other}"),
            },
        }
    }
}

/// The config of a component's artifact in the CNCF wasm layout: what it imports and exports
/// (from its WIT world) and the digest of its one layer, which makes each config unique.
fn wasm_config(bytes: &[u8]) -> Result<Config, ArtifactError> {
    let world = WitWorld::decode(bytes)?;
    let config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "author": null,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [format!("sha256:{:x}", Sha256::digest(bytes))],
        "component": {
            "exports": world.exports(),
            "imports": world.imports(),
            "target": null,
        },
    });
    Ok(Config::new(
        config.to_string().into_bytes(),
        WASM_CONFIG_MEDIA_TYPE.to_owned(),
        None,
    ))
}
