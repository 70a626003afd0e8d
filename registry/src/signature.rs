//! Signatures in the WebAssembly tool-conventions format (`wasmsign2`, Ed25519).
//!
//! A signed chitin artifact is laid out so that its manifest verifies on its own:
//!
//! ```text
//! header | signature | chitin-manifest | signature_delimiter | component sections… | signature_delimiter
//! ```
//!
//! Each signature covers two cumulative hashes: the manifest part (up to the first delimiter) and
//! the whole file. A reader holding only the manifest part can check who vouches for it before
//! fetching the rest; the host checks the whole file before compiling anything. More signers
//! (countersigners) add their signature over the same hashes.

use std::collections::BTreeSet;
use std::fmt;

use wasmsign2::reexports::hmac_sha256;
use wasmsign2::{Module, Section, WSError};

use crate::keys::{KeyId, SigningKey};
use crate::trust_store::{TrustStore, TrustedKey};

use crate::artifact::MANIFEST_SECTION;
/// The custom section holding the signatures.
pub const SIGNATURE_SECTION: &str = "signature";
/// The custom section that ends a signed part.
pub const DELIMITER_SECTION: &str = "signature_delimiter";

/// Why a file could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// Not a WebAssembly binary the signer can read.
    #[error("cannot read the WebAssembly sections: {0}")]
    Malformed(String),
    /// More than one manifest section: which one counts would be ambiguous.
    #[error("the file holds {0} `{MANIFEST_SECTION}` sections; exactly one is allowed")]
    DuplicateManifest(usize),
    /// Signature or delimiter sections where the layout does not allow them.
    #[error("signature sections out of place: {0}")]
    Layout(String),
    /// The file changed after it was signed, so its existing signatures no longer hold.
    #[error(
        "the file changed after it was signed: its existing signatures no longer match its \
         content (sign the unsigned build again)"
    )]
    Stale,
    /// This key already signed this content.
    #[error("already signed by key {0}")]
    AlreadySigned(String),
}

/// Why a file's signatures do not establish that a trusted key vouches for it.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    /// No signature section.
    #[error("unsigned: the component carries no signature (sign it with `chitin sign`)")]
    Unsigned,
    /// The manifest part no longer matches what the signer signed.
    #[error("tampered manifest: the embedded manifest was changed after {signer} signed it")]
    TamperedManifest {
        /// The signer (publisher and key fingerprint) whose signature no longer matches.
        signer: String,
    },
    /// The manifest still verifies, but the rest of the file does not.
    #[error(
        "tampered code: the manifest still matches {signer}'s signature but the component's \
         code or other sections were changed after signing"
    )]
    TamperedCode {
        /// The signer whose signature no longer matches.
        signer: String,
    },
    /// A signature that claims a trusted key but does not verify.
    #[error("invalid signature: the signature attributed to {signer} does not verify")]
    InvalidSignature {
        /// The trusted key the signature names.
        signer: String,
    },
    /// Signed, but by no key in the trust store.
    #[error(
        "unknown signer: signed only by key(s) {} that the trust store does not list \
         (add the publisher's key with `chitin trust add`)",
        key_ids.join(", ")
    )]
    UnknownSigner {
        /// Key ids (hex) of the signatures found; `anonymous` for signatures without one.
        key_ids: Vec<String>,
    },
    /// Signed by trusted keys, none of which may sign this component.
    #[error("signer outside its scope: {component} is signed by {signers}, which may not sign it")]
    OutOfScope {
        /// `namespace/name` of the component.
        component: String,
        /// The valid signers and their scopes.
        signers: String,
    },
    /// The signature section or the sections cannot be read.
    #[error("malformed signature data: {0}")]
    Malformed(String),
}

/// What one signature (one key) establishes about the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignatureStatus {
    /// Covers the whole file as it is.
    Valid,
    /// Covers the manifest as it is, but not the rest of the file.
    CodeChanged,
    /// Does not cover the manifest as it is.
    ManifestChanged,
    /// Claims a key but does not verify under it.
    Invalid,
    /// By a key not in the trust store: cannot be checked.
    Unknown,
}

impl fmt::Display for SignatureStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Valid => "valid",
            Self::CodeChanged => "code changed after signing",
            Self::ManifestChanged => "manifest changed after signing",
            Self::Invalid => "invalid signature",
            Self::Unknown => "unknown key",
        })
    }
}

/// One signer found in a file.
#[derive(Debug, Clone)]
pub struct Signer {
    /// The key id the signature carries (empty for anonymous signatures).
    pub key_id: KeyId,
    /// The trust-store entry of the key, if trusted.
    pub trusted: Option<TrustedKey>,
    /// What the signature establishes.
    pub status: SignatureStatus,
}

impl Signer {
    /// `publisher (SHA256:…)` for trusted keys, `key <id>` otherwise.
    pub fn describe(&self) -> String {
        match &self.trusted {
            Some(t) => format!("{} ({})", t.publisher, t.key.fingerprint()),
            None if self.key_id.0.is_empty() => "an anonymous key".to_owned(),
            None => format!("key {}", self.key_id),
        }
    }
}

/// Every signer of a file, checked against a trust store.
#[derive(Debug, Clone)]
pub struct SignatureReport {
    /// The signers, trusted ones first.
    pub signers: Vec<Signer>,
}

impl SignatureReport {
    /// The trusted keys whose signature covers the whole file.
    pub fn valid(&self) -> impl Iterator<Item = &TrustedKey> {
        self.signers
            .iter()
            .filter(|s| s.status == SignatureStatus::Valid)
            .filter_map(|s| s.trusted.as_ref())
    }

    /// The integrity verdict: `Ok` if at least one trusted key's signature covers the whole
    /// file, else the error naming the cause.
    pub fn require_valid(&self) -> Result<(), SignatureError> {
        if self.valid().next().is_some() {
            return Ok(());
        }
        let first = |status| self.signers.iter().find(|s| s.status == status);
        if let Some(s) = first(SignatureStatus::ManifestChanged) {
            return Err(SignatureError::TamperedManifest {
                signer: s.describe(),
            });
        }
        if let Some(s) = first(SignatureStatus::CodeChanged) {
            return Err(SignatureError::TamperedCode {
                signer: s.describe(),
            });
        }
        if let Some(s) = first(SignatureStatus::Invalid) {
            return Err(SignatureError::InvalidSignature {
                signer: s.describe(),
            });
        }
        Err(SignatureError::UnknownSigner {
            key_ids: self
                .signers
                .iter()
                .map(|s| {
                    if s.key_id.0.is_empty() {
                        "anonymous".to_owned()
                    } else {
                        s.key_id.to_string()
                    }
                })
                .collect(),
        })
    }

    /// The first valid trusted signer allowed to sign `namespace/name`.
    pub fn authorize(&self, namespace: &str, name: &str) -> Result<&TrustedKey, SignatureError> {
        self.require_valid()?;
        if let Some(key) = self.valid().find(|k| k.covers(namespace, name)) {
            return Ok(key);
        }
        Err(SignatureError::OutOfScope {
            component: format!("{namespace}/{name}"),
            signers: self
                .valid()
                .map(|k| format!("{} (scope {})", k.publisher, k.scope_text()))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// For a component without a manifest (so without a name): a valid signer whose scope is
    /// `*`.
    pub fn authorize_unnamed(&self) -> Result<&TrustedKey, SignatureError> {
        self.require_valid()?;
        if let Some(key) = self
            .valid()
            .find(|k| k.scopes.contains(&crate::trust_store::Scope::Any))
        {
            return Ok(key);
        }
        Err(SignatureError::OutOfScope {
            component: "a component without a manifest (only a key trusted for `*` may sign one)"
                .to_owned(),
            signers: self
                .valid()
                .map(|k| format!("{} (scope {})", k.publisher, k.scope_text()))
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

fn custom_name(section: &Section) -> Option<&str> {
    match section {
        Section::Custom(c) => Some(c.name()),
        Section::Standard(_) => None,
    }
}

fn is_manifest(section: &Section) -> bool {
    custom_name(section) == Some(MANIFEST_SECTION)
}

fn parse(bytes: &[u8]) -> Result<Module, WSError> {
    Module::deserialize(&mut &bytes[..])
}

/// The cumulative hashes the signer would sign for these sections (the signature header
/// excluded): one at each delimiter.
fn content_hashes(sections: &[Section]) -> Result<Vec<Vec<u8>>, WSError> {
    let mut hasher = hmac_sha256::Hash::new();
    let mut hashes = Vec::new();
    for section in sections.iter().filter(|s| !s.is_signature_header()) {
        let mut buf = Vec::new();
        section.serialize(&mut buf)?;
        hasher.update(&buf);
        if section.is_signature_delimiter() {
            hashes.push(hasher.finalize().to_vec());
        }
    }
    Ok(hashes)
}

/// Sign `bytes` with `key`. An unsigned file is first laid out with its manifest (if any) ahead
/// of a delimiter; a signed file gets one more signature over the same content.
pub fn sign(bytes: &[u8], key: &SigningKey) -> Result<Vec<u8>, SignError> {
    let malformed = |e: WSError| SignError::Malformed(e.to_string());
    let module = parse(bytes).map_err(malformed)?;
    let manifests = module.sections.iter().filter(|s| is_manifest(s)).count();
    if manifests > 1 {
        return Err(SignError::DuplicateManifest(manifests));
    }
    let already_signed = module
        .sections
        .first()
        .is_some_and(|s| s.is_signature_header());
    let module = if already_signed {
        check_signed_layout(&module)?;
        let header = match &module.sections[0] {
            Section::Custom(c) => c.signature_data().map_err(malformed)?,
            Section::Standard(_) => {
                return Err(SignError::Layout(
                    "the signature header is not a custom section".into(),
                ));
            }
        };
        let hashes = content_hashes(&module.sections).map_err(malformed)?;
        if !header.signed_hashes_set.iter().any(|s| s.hashes == hashes) {
            return Err(SignError::Stale);
        }
        module
    } else {
        if module
            .sections
            .iter()
            .any(|s| s.is_signature_header() || s.is_signature_delimiter())
        {
            return Err(SignError::Layout(
                "signature or delimiter sections but no signature header first".into(),
            ));
        }
        let (manifest, rest): (Vec<Section>, Vec<Section>) =
            module.sections.into_iter().partition(is_manifest);
        let ordered = Module {
            header: module.header,
            sections: manifest.into_iter().chain(rest).collect(),
        };
        // Delimiters at every boundary between manifest and non-manifest sections, and at the end.
        ordered.split(is_manifest).map_err(malformed)?
    };
    let key_id = key.public().key_id().0;
    let (signed, _) = key
        .wasmsign()
        .sign_multi(module, Some(&key_id), false, false)
        .map_err(|e| match e {
            WSError::DuplicateSignature => SignError::AlreadySigned(key.public().fingerprint()),
            other => malformed(other),
        })?;
    let mut out = Vec::with_capacity(bytes.len() + 256);
    signed.serialize(&mut out).map_err(malformed)?;
    Ok(out)
}

/// A signed file must keep the layout `signature [manifest delimiter] … delimiter`.
fn check_signed_layout(module: &Module) -> Result<(), SignError> {
    let s = &module.sections;
    if s.iter().skip(1).any(|s| s.is_signature_header()) {
        return Err(SignError::Layout("more than one signature section".into()));
    }
    if s.last().is_none_or(|l| !l.is_signature_delimiter()) {
        return Err(SignError::Layout(
            "the last section is not a signature delimiter".into(),
        ));
    }
    if let Some(pos) = s.iter().position(is_manifest)
        && (pos != 1 || !s.get(2).is_some_and(|d| d.is_signature_delimiter()))
    {
        return Err(SignError::Layout(
            "the manifest is not the first section ahead of a delimiter".into(),
        ));
    }
    Ok(())
}

/// `bytes` without its signatures and delimiters: the unsigned artifact, ready to be signed
/// afresh (after editing its manifest, say).
pub fn strip(bytes: &[u8]) -> Result<Vec<u8>, SignError> {
    let malformed = |e: WSError| SignError::Malformed(e.to_string());
    let mut module = parse(bytes).map_err(malformed)?;
    module
        .sections
        .retain(|s| !s.is_signature_header() && !s.is_signature_delimiter());
    let mut out = Vec::with_capacity(bytes.len());
    module.serialize(&mut out).map_err(malformed)?;
    Ok(out)
}

/// Check every signature of `bytes` against `trust`. Fails only when the file is unsigned or
/// its signature data cannot be read; the per-signer verdicts are in the report (see
/// [`SignatureReport::require_valid`] and [`SignatureReport::authorize`]).
pub fn inspect(bytes: &[u8], trust: &TrustStore) -> Result<SignatureReport, SignatureError> {
    let malformed = |e: WSError| SignatureError::Malformed(e.to_string());
    // Only the first section is read here; the hashing passes below stream the rest.
    let mut reader = bytes;
    let first = Module::iterate(Module::init_from_reader(&mut reader).map_err(malformed)?)
        .map_err(malformed)?
        .next()
        .transpose()
        .map_err(malformed)?;
    let header = match &first {
        Some(Section::Custom(c)) if c.is_signature_header() => c,
        _ => return Err(SignatureError::Unsigned),
    };
    let data = header.signature_data().map_err(malformed)?;
    let key_ids: BTreeSet<KeyId> = data
        .signed_hashes_set
        .iter()
        .flat_map(|s| &s.signatures)
        .map(|s| KeyId(s.key_id.clone().unwrap_or_default()))
        .collect();
    if key_ids.is_empty() {
        return Err(SignatureError::Unsigned);
    }
    let anonymous = key_ids.iter().any(|id| id.0.is_empty());
    let mut signers = Vec::new();
    for trusted in trust.keys() {
        let id = trusted.key.key_id();
        let named = key_ids.contains(&id);
        if !named && !anonymous {
            continue;
        }
        let status = key_status(bytes, trusted)?;
        if status == SignatureStatus::Invalid && !named {
            continue;
        }
        signers.push(Signer {
            key_id: id,
            trusted: Some(trusted.clone()),
            status,
        });
    }
    for id in key_ids {
        if id.0.is_empty() || trust.by_key_id(&id).is_some() {
            continue;
        }
        signers.push(Signer {
            key_id: id,
            trusted: None,
            status: SignatureStatus::Unknown,
        });
    }
    Ok(SignatureReport { signers })
}

fn key_status(bytes: &[u8], trusted: &TrustedKey) -> Result<SignatureStatus, SignatureError> {
    let pk = trusted.key.wasmsign();
    match pk.verify(&mut &bytes[..], None) {
        Ok(()) => return Ok(SignatureStatus::Valid),
        Err(WSError::VerificationFailed) => {}
        Err(e) => return Err(SignatureError::Malformed(e.to_string())),
    }
    match pk.verify_multi(&mut &bytes[..], None, is_manifest) {
        Ok(()) => Ok(SignatureStatus::CodeChanged),
        Err(WSError::VerificationFailedForPredicates) => Ok(SignatureStatus::ManifestChanged),
        Err(WSError::VerificationFailed) => Ok(SignatureStatus::Invalid),
        Err(e) => Err(SignatureError::Malformed(e.to_string())),
    }
}

/// Check `bytes` entirely: at least one trusted key's signature must cover the whole file.
pub fn verify(bytes: &[u8], trust: &TrustStore) -> Result<SignatureReport, SignatureError> {
    let report = inspect(bytes, trust)?;
    report.require_valid()?;
    Ok(report)
}

/// The manifest part of a signed file: the bytes up to and including the delimiter after the
/// manifest, enough to check who vouches for the manifest without the rest of the file.
pub fn manifest_part(bytes: &[u8]) -> Option<&[u8]> {
    let module = parse(bytes).ok()?;
    let s = &module.sections;
    let layout_ok = s.first()?.is_signature_header()
        && is_manifest(s.get(1)?)
        && s.get(2)?.is_signature_delimiter();
    if !layout_ok {
        return None;
    }
    let mut prefix = module.header.to_vec();
    for section in &s[..3] {
        section.serialize(&mut prefix).ok()?;
    }
    bytes.starts_with(&prefix).then(|| &bytes[..prefix.len()])
}

/// The trusted keys whose signature covers the manifest part `prefix` (as returned by
/// [`manifest_part`], or a whole file).
pub fn verify_manifest_part(
    prefix: &[u8],
    trust: &TrustStore,
) -> Result<Vec<TrustedKey>, SignatureError> {
    let part = manifest_part(prefix).ok_or_else(|| {
        SignatureError::Malformed(format!(
            "no signed manifest part (expected `{SIGNATURE_SECTION}`, `{MANIFEST_SECTION}` and \
             `{DELIMITER_SECTION}` first)"
        ))
    })?;
    let mut vouching = Vec::new();
    let mut changed = None;
    for trusted in trust.keys() {
        match trusted
            .key
            .wasmsign()
            .verify_multi(&mut &part[..], None, is_manifest)
        {
            Ok(()) => vouching.push(trusted.clone()),
            Err(WSError::VerificationFailedForPredicates) => changed = Some(trusted),
            Err(WSError::VerificationFailed) => {}
            Err(e) => return Err(SignatureError::Malformed(e.to_string())),
        }
    }
    if vouching.is_empty() {
        if let Some(t) = changed {
            return Err(SignatureError::TamperedManifest {
                signer: format!("{} ({})", t.publisher, t.key.fingerprint()),
            });
        }
        let report = inspect(part, trust)?;
        report.require_valid()?;
    }
    Ok(vouching)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trust_store::Scope;

    /// A small real component with the manifest appended as a custom section (where an
    /// embedder would put it).
    fn component(manifest: Option<&str>) -> Vec<u8> {
        let mut bytes = wat::parse_str(
            r#"(component
                 (core module $m (func (export "f") (result i32) i32.const 42))
                 (core instance $i (instantiate $m))
                 (func (export "answer") (result u32) (canon lift (core func $i "f"))))"#,
        )
        .unwrap();
        if let Some(text) = manifest {
            let section = Section::Custom(wasmsign2::CustomSection::new(
                MANIFEST_SECTION.to_owned(),
                text.as_bytes().to_vec(),
            ));
            section.serialize(&mut bytes).unwrap();
        }
        bytes
    }

    const MANIFEST: &str = "schema = 1\n[component]\nname = \"weather\"\n";

    fn trust(entries: &[(&SigningKey, &str, &str)]) -> TrustStore {
        let mut store = TrustStore::empty();
        for (key, publisher, scope) in entries {
            let entry = TrustedKey::new(
                key.public().clone(),
                publisher,
                vec![Scope::parse(scope).unwrap()],
            )
            .unwrap();
            store.add(entry).unwrap();
        }
        store
    }

    /// Offset of the manifest text in a signed file.
    fn manifest_offset(signed: &[u8]) -> usize {
        signed
            .windows(MANIFEST.len())
            .position(|w| w == MANIFEST.as_bytes())
            .unwrap()
    }

    #[test]
    fn signed_file_is_a_valid_component_with_the_manifest_first() {
        let key = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        crate::artifact::validate(&signed).unwrap();
        let module = parse(&signed).unwrap();
        assert!(module.sections[0].is_signature_header());
        assert!(is_manifest(&module.sections[1]));
        assert!(module.sections[2].is_signature_delimiter());
        assert!(module.sections.last().unwrap().is_signature_delimiter());
        let store = trust(&[(&key, "acme", "acme/*")]);
        let report = verify(&signed, &store).unwrap();
        assert_eq!(
            report.authorize("acme", "weather").unwrap().publisher,
            "acme"
        );
    }

    #[test]
    fn several_signers_each_verify() {
        let publisher = SigningKey::generate();
        let reviewer = SigningKey::generate();
        let once = sign(&component(Some(MANIFEST)), &publisher).unwrap();
        let twice = sign(&once, &reviewer).unwrap();
        assert!(matches!(
            sign(&twice, &reviewer),
            Err(SignError::AlreadySigned(_))
        ));
        let store = trust(&[(&publisher, "acme", "acme/*"), (&reviewer, "audit", "*")]);
        let report = verify(&twice, &store).unwrap();
        assert_eq!(report.valid().count(), 2);
        for key in [&publisher, &reviewer] {
            let only = trust(&[(key, "x", "*")]);
            verify(&twice, &only).unwrap();
        }
    }

    #[test]
    fn a_component_without_manifest_signs_and_verifies() {
        let key = SigningKey::generate();
        let signed = sign(&component(None), &key).unwrap();
        verify(&signed, &trust(&[(&key, "acme", "*")])).unwrap();
        assert!(manifest_part(&signed).is_none());
    }

    #[test]
    fn unsigned_is_refused() {
        let err = verify(&component(Some(MANIFEST)), &TrustStore::empty()).unwrap_err();
        assert!(matches!(err, SignatureError::Unsigned), "{err}");
    }

    #[test]
    fn a_stripped_signature_is_unsigned() {
        let key = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let mut module = parse(&signed).unwrap();
        module.sections.remove(0);
        let mut stripped = Vec::new();
        module.serialize(&mut stripped).unwrap();
        let err = verify(&stripped, &trust(&[(&key, "acme", "*")])).unwrap_err();
        assert!(matches!(err, SignatureError::Unsigned), "{err}");
    }

    #[test]
    fn a_flipped_code_byte_is_tampered_code() {
        let key = SigningKey::generate();
        let mut signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        // The constant 42 in the core module's code.
        let code = signed.len() - 40;
        let pos = signed[..code].iter().rposition(|&b| b == 42).unwrap();
        signed[pos] = 43;
        let err = verify(&signed, &trust(&[(&key, "acme", "*")])).unwrap_err();
        assert!(matches!(err, SignatureError::TamperedCode { .. }), "{err}");
        assert!(err.to_string().contains("acme"), "{err}");
    }

    #[test]
    fn an_edited_manifest_is_tampered_manifest() {
        let key = SigningKey::generate();
        let mut signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let at = manifest_offset(&signed) + MANIFEST.find("weather").unwrap();
        signed[at] = b'W';
        let store = trust(&[(&key, "acme", "*")]);
        let err = verify(&signed, &store).unwrap_err();
        assert!(
            matches!(err, SignatureError::TamperedManifest { .. }),
            "{err}"
        );
        let err = verify_manifest_part(&signed, &store).unwrap_err();
        assert!(
            matches!(err, SignatureError::TamperedManifest { .. }),
            "{err}"
        );
    }

    #[test]
    fn an_appended_section_is_tampered_code() {
        let key = SigningKey::generate();
        let mut signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        Section::Custom(wasmsign2::CustomSection::new("extra".into(), vec![1]))
            .serialize(&mut signed)
            .unwrap();
        let err = verify(&signed, &trust(&[(&key, "acme", "*")])).unwrap_err();
        assert!(matches!(err, SignatureError::TamperedCode { .. }), "{err}");
    }

    #[test]
    fn an_unknown_key_is_named() {
        let key = SigningKey::generate();
        let other = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let err = verify(&signed, &trust(&[(&other, "acme", "*")])).unwrap_err();
        match &err {
            SignatureError::UnknownSigner { key_ids } => {
                assert_eq!(key_ids, &[key.public().key_id().to_string()]);
            }
            other => panic!("expected UnknownSigner, got {other}"),
        }
    }

    #[test]
    fn a_signer_outside_its_scope_is_refused() {
        let key = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let report = verify(&signed, &trust(&[(&key, "acme", "acme/weather")])).unwrap();
        assert!(report.authorize("acme", "weather").is_ok());
        let err = report.authorize("chitin", "fs").unwrap_err();
        assert!(matches!(err, SignatureError::OutOfScope { .. }), "{err}");
        assert!(err.to_string().contains("chitin/fs"), "{err}");
        assert!(err.to_string().contains("acme/weather"), "{err}");
    }

    #[test]
    fn a_corrupted_signature_of_a_trusted_key_is_invalid() {
        let key = SigningKey::generate();
        let mut signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        // The Ed25519 signature is the last 64 bytes of the signature section payload, which
        // ends right before the manifest section.
        let manifest_section_start = manifest_offset(&signed) - MANIFEST_SECTION.len() - 3;
        signed[manifest_section_start - 5] ^= 1;
        let err = verify(&signed, &trust(&[(&key, "acme", "*")])).unwrap_err();
        assert!(
            matches!(err, SignatureError::InvalidSignature { .. }),
            "{err}"
        );
    }

    #[test]
    fn the_manifest_part_verifies_on_its_own() {
        let key = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let part = manifest_part(&signed).unwrap();
        assert!(part.len() < signed.len());
        assert!(std::str::from_utf8(&part[manifest_offset(part)..][..MANIFEST.len()]).is_ok());
        let store = trust(&[(&key, "acme", "*")]);
        let vouching = verify_manifest_part(part, &store).unwrap();
        assert_eq!(vouching.len(), 1);
        let err =
            verify_manifest_part(part, &trust(&[(&SigningKey::generate(), "x", "*")])).unwrap_err();
        assert!(matches!(err, SignatureError::UnknownSigner { .. }), "{err}");
    }

    #[test]
    fn signing_a_file_changed_after_signing_is_refused() {
        let key = SigningKey::generate();
        let mut signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let at = manifest_offset(&signed);
        signed[at] = b'#';
        assert!(matches!(
            sign(&signed, &SigningKey::generate()),
            Err(SignError::Stale)
        ));
    }

    #[test]
    fn stripping_gives_back_a_file_that_signs_afresh() {
        let key = SigningKey::generate();
        let signed = sign(&component(Some(MANIFEST)), &key).unwrap();
        let bare = strip(&signed).unwrap();
        assert!(matches!(
            verify(&bare, &TrustStore::empty()),
            Err(SignatureError::Unsigned)
        ));
        let again = sign(&bare, &key).unwrap();
        verify(&again, &trust(&[(&key, "acme", "*")])).unwrap();
    }

    #[test]
    fn two_manifests_are_refused() {
        let mut bytes = component(Some(MANIFEST));
        Section::Custom(wasmsign2::CustomSection::new(
            MANIFEST_SECTION.into(),
            b"x".to_vec(),
        ))
        .serialize(&mut bytes)
        .unwrap();
        assert!(matches!(
            sign(&bytes, &SigningKey::generate()),
            Err(SignError::DuplicateManifest(2))
        ));
    }
}
