//! What the benchmarks share: services over a data directory, trusting the development key.

use std::path::Path;
use std::sync::Arc;

use chitin_host::Services;
use chitin_host::data_dir::DataDir;

/// Services with data in `data` and its `workspace` folder (created) as the workspace, trusting
/// the development key that signed the built components (`just build-components`).
pub fn services(data: &Path) -> Arc<Services> {
    let workspace = data.join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    let trusted = Path::new(env!("CARGO_MANIFEST_DIR")).join("../build/trusted_keys");
    let trust =
        chitin_registry::trust_store::TrustStore::load(&trusted).expect("build/trusted_keys");
    Arc::new(
        Services::new(&workspace, DataDir::resolve(Some(data)).expect("data dir"))
            .expect("services")
            .with_trust(trust),
    )
}
