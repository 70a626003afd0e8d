//! OCI registries, with the CNCF wasm artifact layout (`oci-wasm`): each version is the
//! repository `[<prefix>/]<namespace>/<name>` tagged with the version, one `application/wasm`
//! layer. The index is an artifact of its own at `[<prefix>/]chitin-index/index:latest`, since
//! OCI has no search.

use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use oci_wasm::{WASM_LAYER_MEDIA_TYPE, WasmClient, WasmConfig};

use super::{Auth, Entry, Index, Location, StoreError, check_overwrite};
use crate::compose::chain;

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
    client: WasmClient,
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
            client: WasmClient::new(Client::new(config)),
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
            .as_ref()
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
        let (config, layer) =
            WasmConfig::from_raw_component(bytes.to_vec(), None).map_err(|e| {
                StoreError::Other {
                    registry: self.name.clone(),
                    reason: format!(
                        "cannot describe {} as a wasm artifact: {e:#}",
                        entry.label()
                    ),
                }
            })?;
        let reference = self.reference(&entry.name, &entry.version.to_string());
        self.client
            .push(&reference, &self.auth, layer, config, None)
            .await
            .map_err(|e| self.anyhow_error(e, &entry.label()))?;
        index.upsert(entry);
        let layer = ImageLayer::new(index.to_json(), INDEX_MEDIA_TYPE.to_owned(), None);
        let config = Config::new(b"{}".to_vec(), INDEX_CONFIG_MEDIA_TYPE.to_owned(), None);
        let layers = [layer];
        // Registries may require the manifest to name its media type.
        let mut manifest = OciImageManifest::build(&layers, &config, None);
        manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_owned());
        self.client
            .as_ref()
            .push(
                &self.reference(INDEX_REPOSITORY, "latest"),
                &layers,
                config,
                &self.auth,
                Some(manifest),
            )
            .await
            .map_err(|e| self.error(e, "the index"))?;
        Ok(())
    }

    /// The artifact's bytes; the layer's digest is checked while it downloads.
    pub async fn fetch(&self, entry: &Entry) -> Result<Vec<u8>, StoreError> {
        let reference = self.reference(&entry.name, &entry.version.to_string());
        let image = self
            .client
            .pull(&reference, &self.auth)
            .await
            .map_err(|e| self.anyhow_error(e, &entry.label()))?;
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

    /// Classify an error `oci-wasm` wrapped in `anyhow`.
    fn anyhow_error(&self, e: anyhow::Error, what: &str) -> StoreError {
        match e.downcast::<OciDistributionError>() {
            Ok(e) => self.error(e, what),
            Err(e) => StoreError::Malformed {
                registry: self.name.clone(),
                reason: format!("{what}: {e:#}"),
            },
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
