//! Which registry a command talks to: `--registry NAME|LOCATION`, else the configured default
//! (`local`, the registry under the data directory). Credentials of configured registries come
//! from the secret store.

use anyhow::Context;
use chitin_registry::store::config::{AuthRef, LOCAL, RegistriesConfig};
use chitin_registry::store::{Auth, Location, Registry};

use crate::services::Services;

/// The configured registries.
pub(super) fn config(services: &Services) -> anyhow::Result<RegistriesConfig> {
    Ok(RegistriesConfig::load(
        &services.data_dir().registries_config(),
    )?)
}

/// Open the registry `choice` names (a configured name, `local`, or a location), or the
/// default one.
pub(super) fn open(services: &Services, choice: Option<&str>) -> anyhow::Result<Registry> {
    let config = config(services)?;
    let name = choice.unwrap_or(config.default_name());
    if name == LOCAL {
        return Ok(Registry::open(
            LOCAL,
            &Location::Local(services.data_dir().registry()),
            Auth::Anonymous,
        )?);
    }
    if let Some(entry) = config.registries.get(name) {
        let location: Location = entry.url.parse()?;
        let secret = |secret: &str| -> anyhow::Result<String> {
            let value = services.secrets()?.get(secret)?.with_context(|| {
                format!(
                    "registry `{name}` needs the secret `{secret}`, which is not set \
                         (`chitin secret set {secret}`)"
                )
            })?;
            Ok(value.to_string())
        };
        let auth = match entry.auth().map_err(anyhow::Error::msg)? {
            AuthRef::Anonymous => Auth::Anonymous,
            AuthRef::Basic {
                username,
                password_secret,
            } => Auth::Basic {
                username,
                password: secret(&password_secret)?,
            },
            AuthRef::Bearer { token_secret } => Auth::Bearer(secret(&token_secret)?),
        };
        return Ok(Registry::open(name, &location, auth)?);
    }
    let location: Location = name.parse().with_context(|| {
        format!(
            "`{name}` is neither a registry configured in {} nor a registry location",
            services.data_dir().registries_config().display()
        )
    })?;
    Ok(Registry::open(name, &location, Auth::Anonymous)?)
}

/// Every registry a search looks in by default: `local` and each configured one.
pub(super) fn all_names(services: &Services) -> anyhow::Result<Vec<String>> {
    let config = config(services)?;
    let mut names = vec![LOCAL.to_owned()];
    names.extend(config.registries.keys().filter(|n| *n != LOCAL).cloned());
    Ok(names)
}
